public import Foundation
import Synchronization
import StrataLog
public import StrataCore

/// What an asset's bytes are fetched from when the store does not hold them: a sync engine
/// attaches itself (``Store/attach(assetSource:)``) and answers through its zone.
public protocol AssetSource: AnyObject, Sendable {
    /// The asset's manifest, or `nil` when the source has no such asset for this user.
    func assetManifest(for asset: Asset) async throws -> AssetManifest?
    /// Chunk `index` of the asset (its bytes, checked by the store against the manifest).
    func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8]
}

/// How far a fetch has come.
public struct AssetProgress: Sendable, Hashable {
    /// Bytes held so far (those a resumed fetch found already here included).
    public var completedBytes: UInt64
    public var totalBytes: UInt64
    public var fractionCompleted: Double { totalBytes == 0 ? 1 : Double(completedBytes) / Double(totalBytes) }
}

/// The sources attached, and the fetches under way (one per asset, whoever asks).
struct AssetFetching {
    struct WeakSource {
        weak var source: (any AssetSource)?
    }
    var sources: [ObjectIdentifier: WeakSource] = [:]
    var downloads: [AssetHash: SharedDownload] = [:]
    /// ``StoreOptions/assetCacheBudget``.
    var budget: UInt64?
    /// ``StoreOptions/assetCollectionGrace``.
    var collectionGrace: Duration = .seconds(24 * 3600)
}

/// One fetch of an asset, shared by everyone who asks for it while it runs. Each asker waits on
/// its own continuation, so that one who is cancelled returns at once while the others wait on;
/// the fetch itself is cancelled when the last asker is. Every asker's progress handler hears it.
final class SharedDownload: Sendable {
    private struct State {
        var waiters: [UInt64: CheckedContinuation<String, any Error>] = [:]
        var progress: [UInt64: @Sendable (AssetProgress) -> Void] = [:]
        var result: Result<String, any Error>?
        var nextID: UInt64 = 0
        var task: Task<Void, Never>?
    }
    private let state = Mutex(State())

    /// Starts `body` (the fetch); its result goes to every waiter.
    func start(_ body: @escaping @Sendable (_ progress: @escaping @Sendable (AssetProgress) -> Void) async throws -> String) {
        let task = Task {
            let result: Result<String, any Error>
            do { result = .success(try await body { report in self.report(report) }) } catch { result = .failure(error) }
            let waiters = self.state.withLock { state -> [CheckedContinuation<String, any Error>] in
                state.result = result
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(with: result) }
        }
        state.withLock { $0.task = task }
    }

    private func report(_ progress: AssetProgress) {
        for handler in state.withLock({ Array($0.progress.values) }) { handler(progress) }
    }

    /// Waits for the fetch's file; throws `CancellationError` as soon as the caller is cancelled.
    func wait(progress: (@Sendable (AssetProgress) -> Void)?) async throws -> String {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            if let progress { state.progress[state.nextID] = progress }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                let done = state.withLock { state -> Result<String, any Error>? in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let done { continuation.resume(with: done) }
            }
        } onCancel: {
            let (waiter, last, task) = state.withLock { state -> (CheckedContinuation<String, any Error>?, Bool, Task<Void, Never>?) in
                state.progress[id] = nil
                let waiter = state.waiters.removeValue(forKey: id)
                return (waiter, state.waiters.isEmpty && state.result == nil, state.task)
            }
            waiter?.resume(throwing: CancellationError())
            if last { task?.cancel() }
        }
    }
}

extension Store {
    // MARK: Adding assets

    /// Copies the file at `url` into the store's asset directory and returns its reference, to
    /// set as an asset attribute's value. The file is read once, in 1 MiB pieces (a 5 GiB video
    /// takes no more memory than a photo), and hashed on the way; an asset the store already
    /// holds is not written again. The copy is durable before this returns.
    ///
    /// - Throws: `StoreError.Code.invalidArgument` for an unreadable file or an invalid media
    ///   type or file name (see `Asset.init(sha256:byteCount:mediaType:fileName:)` in `StrataCore`);
    ///   `StoreError.Code.log` when the store's disk fails (`StoreError.logError` says how: a
    ///   full disk is errno `ENOSPC`) — nothing of the import is left, and trying again once
    ///   there is room succeeds.
    public func importAsset(contentsOf url: URL, mediaType: String, fileName: String? = nil) async throws -> Asset {
        if let problem = Asset.problem(byteCount: 0, mediaType: mediaType, fileName: fileName) {
            throw StoreError(.invalidArgument, "cannot import \(url.path): \(problem)")
        }
        let assets = self.assets
        let path = url.path
        let manifest: AssetManifest
        do {
            manifest = try await BlockingIO.run { try assets.importFile(at: path) }
        } catch let error as LogError {
            throw StoreError(.log, "cannot import \(path): \(error)", logError: error)
        }
        return try Asset(sha256: manifest.sha256, byteCount: manifest.byteCount, mediaType: mediaType, fileName: fileName)
    }

    /// Stores `data` as an asset and returns its reference (see ``importAsset(contentsOf:mediaType:fileName:)``).
    public func importAsset(_ data: Data, mediaType: String, fileName: String? = nil) async throws -> Asset {
        if let problem = Asset.problem(byteCount: UInt64(data.count), mediaType: mediaType, fileName: fileName) {
            throw StoreError(.invalidArgument, "cannot import \(data.count) bytes: \(problem)")
        }
        let assets = self.assets
        let bytes = [UInt8](data)
        let manifest: AssetManifest
        do {
            manifest = try await BlockingIO.run { try assets.importBytes(bytes) }
        } catch let error as LogError {
            throw StoreError(.log, "cannot import \(bytes.count) bytes: \(error)", logError: error)
        }
        return try Asset(sha256: manifest.sha256, byteCount: manifest.byteCount, mediaType: mediaType, fileName: fileName)
    }

    // MARK: Reading assets

    /// The asset's file when the store holds it, else `nil` (see ``asset(_:progress:)`` to fetch
    /// it). The file is the store's: read it, never change it.
    public func localFile(for asset: Asset) -> URL? {
        if asset.sha256 == Asset.empty.sha256 { try? assets.ensureEmpty() }
        guard assets.has(asset.sha256) else { return nil }
        // Its use, for the cache's least-recently-used order.
        assets.touch(asset.sha256)
        return URL(fileURLWithPath: assets.objectPath(asset.sha256))
    }

    /// The asset's file: the store's copy when it holds it, else fetched from an attached source
    /// (a sync engine of a zone that holds it) first — resuming a fetch interrupted before, chunk
    /// by chunk, each chunk and then the whole checked against the asset's hash. Concurrent calls
    /// for one asset share one fetch; cancelling the last caller cancels it (what was fetched
    /// stays, and the next call resumes from there).
    ///
    /// - Throws: `StoreError.Code.assetUnavailable` when no attached source has the asset,
    ///   `StoreError.Code.corruptAsset` when a source's bytes do not match it,
    ///   `StoreError.Code.log` when the store's disk fails (a full disk: errno `ENOSPC` in
    ///   `StoreError.logError`; what was fetched stays, and the next call resumes), or the
    ///   source's error (a `SyncError` of the transport) when fetching failed.
    public func asset(_ asset: Asset, progress: (@Sendable (AssetProgress) -> Void)? = nil) async throws -> URL {
        if let file = localFile(for: asset) { return file }
        let shared = assetFetching.withLock { state -> SharedDownload in
            if let running = state.downloads[asset.sha256] { return running }
            let shared = SharedDownload()
            shared.start { [self] report in try await self.download(asset, progress: report) }
            state.downloads[asset.sha256] = shared
            return shared
        }
        return URL(fileURLWithPath: try await shared.wait(progress: progress))
    }

    /// Attaches a source assets are fetched from (a sync engine attaches itself). The store
    /// keeps it weakly: a source that is released is forgotten.
    public func attach(assetSource source: any AssetSource) {
        assetFetching.withLock { state in
            state.sources = state.sources.filter { $0.value.source != nil }
            state.sources[ObjectIdentifier(source)] = AssetFetching.WeakSource(source: source)
        }
    }

    /// Detaches a source attached with ``attach(assetSource:)``.
    public func detach(assetSource source: any AssetSource) {
        _ = assetFetching.withLock { $0.sources.removeValue(forKey: ObjectIdentifier(source)) }
    }

    /// The asset's manifest when the store holds it (for sync engines uploading it).
    @_spi(StrataInternals)
    public func localManifest(for hash: AssetHash) throws -> AssetManifest? {
        try assets.manifest(hash)
    }

    /// Chunk `index` of an asset the store holds (for sync engines uploading it).
    @_spi(StrataInternals)
    public func localChunk(_ index: Int, of manifest: AssetManifest) async throws -> [UInt8] {
        let path = assets.objectPath(manifest.sha256)
        let length = manifest.chunkLength(index)
        let offset = manifest.chunkOffset(index)
        return try await BlockingIO.run {
            let file = try PositionalFile.open(path, write: false)
            let bytes = try file.read(count: length, at: offset)
            guard bytes.count == length else {
                throw StoreError(.corruptAsset, "asset \(manifest.sha256): \(path) ends before chunk \(index)")
            }
            return bytes
        }
    }

    private func download(_ asset: Asset, progress: (@Sendable (AssetProgress) -> Void)?) async throws -> String {
        defer { _ = assetFetching.withLock { $0.downloads.removeValue(forKey: asset.sha256) } }
        let sources = assetFetching.withLock { $0.sources.values.compactMap(\.source) }
        var lastError: (any Error)?
        for source in sources {
            do {
                // Chunk 0 of an asset with no download under way is asked for together with the
                // manifest (its index needs none; it is checked against the manifest once that
                // is in): one round trip less for a photo. A download under way may hold it.
                let fresh = asset.byteCount > 0 && !FileSystem.exists(assets.partial + "/" + asset.sha256.hex + ".chunks")
                async let first: [UInt8]? = fresh ? (try? await source.assetChunk(0, of: asset)) : nil
                guard let manifest = try await source.assetManifest(for: asset) else { continue }
                guard manifest.sha256 == asset.sha256, manifest.byteCount == asset.byteCount else {
                    throw StoreError(.corruptAsset, "asked for \(asset), the source answered the manifest of asset \(manifest.sha256) (\(manifest.byteCount) bytes)")
                }
                return try await fetch(manifest, from: source, asset: asset, first: await first, progress: progress)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                lastError = error
            }
        }
        if let lastError { throw lastError }
        throw StoreError(.assetUnavailable, sources.isEmpty
            ? "the store does not hold \(asset), and no sync engine is attached to fetch it"
            : "the store does not hold \(asset), and no server it syncs with has it for this user")
    }

    private func fetch(_ manifest: AssetManifest, from source: any AssetSource, asset: Asset, first: [UInt8]?,
                       progress: (@Sendable (AssetProgress) -> Void)?) async throws -> String {
        do {
            return try await fetchChunks(manifest, from: source, asset: asset, first: first, progress: progress)
        } catch let error as LogError {
            throw StoreError(.log, "cannot store \(asset) as it arrives: \(error)", logError: error)
        }
    }

    private func fetchChunks(_ manifest: AssetManifest, from source: any AssetSource, asset: Asset, first: [UInt8]?,
                             progress: (@Sendable (AssetProgress) -> Void)?) async throws -> String {
        let assets = self.assets
        let download = try await BlockingIO.run { try AssetDownload(manifest, in: assets) }
        // The manifest is made durable while the first chunk travels (two of the fetch's four
        // fsyncs off its critical path): the object's install then renames and syncs one
        // directory. A manifest without its object is ignored until the object arrives.
        async let manifestStored: Void = BlockingIO.run { try assets.storeManifest(manifest) }
        if let first, download.missing.first == 0 {
            try await BlockingIO.run { try download.write(chunk: 0, first) }
        }
        var done = download.heldBytes
        progress?(AssetProgress(completedBytes: done, totalBytes: manifest.byteCount))
        // A second round fetches the chunks the final check found damaged (a power cut lost them).
        for _ in 0..<2 {
            for index in download.missing {
                try Task.checkCancellation()
                let bytes = try await source.assetChunk(index, of: asset)
                try await BlockingIO.run { try download.write(chunk: index, bytes) }
                done += UInt64(bytes.count)
                progress?(AssetProgress(completedBytes: done, totalBytes: manifest.byteCount))
            }
            try await manifestStored
            if try await BlockingIO.run({ try download.finish() }) {
                // Fetched from a server: it may leave this device again under the budget.
                try? assets.markRemote(manifest.sha256)
                if let budget = assetFetching.withLock({ $0.budget }) {
                    let keep = manifest.sha256
                    _ = try? await BlockingIO.run { try assets.evict(toFit: budget, keeping: keep) }
                }
                return assets.objectPath(manifest.sha256)
            }
            done = download.heldBytes
        }
        throw StoreError(.corruptAsset, "\(asset): chunks fetched twice still do not make the asset")
    }
}
