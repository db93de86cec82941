public import Foundation
import StrataLog
import Synchronization
public import StrataCore

/// The store's assets as a cache: which may leave the device (a server holds them), which must
/// stay (pinned), and the least recently used order eviction follows.
///
/// Kept as marker files beside the objects, so that nothing needs an index that a crash could
/// leave behind its files: `assets/remote/<sha256>` (a server holds the asset for good: it was
/// fetched, or a transaction or state naming it was acknowledged after its upload),
/// `assets/pins/<sha256>` (pinned for offline use). The object
/// file's modification time is its last use (``Store/localFile(for:)`` and fetches set it).
extension LocalAssets {
    var remote: String { root + "/remote" }
    var pins: String { root + "/pins" }

    /// Records a use of the asset (its file's modification time).
    func touch(_ hash: AssetHash) {
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: objectPath(hash))
    }

    func markRemote(_ hash: AssetHash) throws { try markLightly(remote, hash) }
    func isRemote(_ hash: AssetHash) -> Bool { FileSystem.exists(remote + "/" + hash.hex) }
    func unmarkRemote(_ hash: AssetHash) throws {
        let path = remote + "/" + hash.hex
        guard FileSystem.exists(path) else { return }
        try FileSystem.remove(path)
        try FileSystem.syncDirectory(remote)
    }

    func pin(_ hash: AssetHash) throws { try mark(pins, hash) }
    func unpin(_ hash: AssetHash) throws {
        try FileSystem.remove(pins + "/" + hash.hex)
        if FileSystem.isDirectory(pins) { try FileSystem.syncDirectory(pins) }
    }
    func isPinned(_ hash: AssetHash) -> Bool { FileSystem.exists(pins + "/" + hash.hex) }

    private func mark(_ directory: String, _ hash: AssetHash) throws {
        let path = directory + "/" + hash.hex
        guard !FileSystem.exists(path) else { return }
        try FileSystem.makeDirectory(directory)
        try FileSystem.writeAtomicallyUnique([], to: path)
    }

    /// Every complete asset here: its hash, size and last use.
    func inventory() throws -> [(hash: AssetHash, bytes: UInt64, lastUse: Date)] {
        guard FileSystem.isDirectory(objects) else { return [] }
        var found: [(AssetHash, UInt64, Date)] = []
        for name in try FileSystem.list(objects) {
            guard let hash = AssetHash(hex: name) else { continue }
            let attributes = try? FileManager.default.attributesOfItem(atPath: objectPath(hash))
            let size = (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
            let date = attributes?[.modificationDate] as? Date ?? .distantPast
            found.append((hash, size, date))
        }
        return found
    }

    /// Removes the least recently used assets that may leave (a server holds them, not pinned,
    /// not `keeping`) until those that may leave take at most `budget` bytes: the bytes freed.
    /// Pinned assets and ones no server holds yet do not count against the budget — a large
    /// pinned album must not push every other cached photo out.
    func evict(toFit budget: UInt64, keeping: AssetHash? = nil) throws -> UInt64 {
        let cached = try inventory().filter { isRemote($0.hash) && !isPinned($0.hash) }
        var total = cached.reduce(UInt64(0)) { $0 + $1.bytes }
        guard total > budget else { return 0 }
        var freed: UInt64 = 0
        for candidate in cached.sorted(by: { $0.lastUse < $1.lastUse }) where total > budget {
            guard candidate.hash != keeping else { continue }
            try remove(candidate.hash)
            total -= candidate.bytes
            freed += candidate.bytes
        }
        return freed
    }

    /// Removes an asset's object and manifest (the object first: a manifest without its object
    /// is ignored, an object without its manifest is not).
    func remove(_ hash: AssetHash) throws {
        try FileSystem.remove(objectPath(hash))
        try FileSystem.syncDirectory(objects)
        try FileSystem.remove(manifestPath(hash))
    }

    /// Removes downloads in progress untouched for longer than `grace` (a fetch cancelled and
    /// never asked for again): the bytes they held.
    func removeStalePartials(olderThan cutoff: Date, except running: Set<String>) throws -> UInt64 {
        guard FileSystem.isDirectory(partial) else { return 0 }
        var freed: UInt64 = 0
        for name in try FileSystem.list(partial) where name.hasSuffix(".data") && !running.contains(String(name.dropLast(5))) {
            let path = partial + "/" + name
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            guard let date = attributes?[.modificationDate] as? Date, date < cutoff else { continue }
            freed += (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
            try FileSystem.remove(path)
            try FileSystem.remove(partial + "/" + String(name.dropLast(5)) + ".chunks")
            // The manifest a download stores when it starts goes with it, unless the asset is here.
            if let hash = AssetHash(hex: String(name.dropLast(5))), !has(hash) { try FileSystem.remove(manifestPath(hash)) }
        }
        return freed
    }
}

/// What the store's assets take on this device.
public struct AssetCacheUsage: Sendable, Hashable {
    /// Complete assets held, and their bytes.
    public var assets: Int
    public var bytes: UInt64
    /// Of them, pinned for offline use.
    public var pinned: Int
    public var pinnedBytes: UInt64
    /// Of them, held by no server yet (imported here, not yet uploaded): they stay.
    public var notUploaded: Int
    public var notUploadedBytes: UInt64
}

extension Store {
    /// The most bytes of fetched assets this device keeps (see ``StoreOptions/assetCacheBudget``);
    /// setting a lower one evicts at once.
    public var assetCacheBudget: UInt64? {
        get { assetFetching.withLock { $0.budget } }
        set {
            assetFetching.withLock { $0.budget = newValue }
            if let newValue { _ = try? assets.evict(toFit: newValue) }
        }
    }

    /// Fetches the asset when the store lacks it and pins it: it stays on this device, whatever
    /// the cache budget, until ``unpin(_:)``. Returns its file.
    @discardableResult
    public func pin(_ asset: Asset, progress: (@Sendable (AssetProgress) -> Void)? = nil) async throws -> URL {
        // Pinned first, so that no eviction between the fetch and the pin takes it; unpinned
        // again when the fetch fails, so that a pin never claims a copy the device lacks.
        let assets = self.assets
        let hash = asset.sha256
        let wasPinned = assets.isPinned(hash)
        try await BlockingIO.run { try assets.pin(hash) }
        do {
            return try await self.asset(asset, progress: progress)
        } catch {
            if !wasPinned { try? assets.unpin(hash) }
            throw error
        }
    }

    /// Lets a pinned asset leave the device again under the cache budget.
    public func unpin(_ asset: Asset) async throws {
        let assets = self.assets
        let hash = asset.sha256
        try await BlockingIO.run { try assets.unpin(hash) }
        if let budget = assetCacheBudget { _ = try await BlockingIO.run { try assets.evict(toFit: budget) } }
    }

    /// Whether the asset is pinned on this device.
    public func isPinned(_ asset: Asset) -> Bool { assets.isPinned(asset.sha256) }

    /// Fetches every asset of `assets` the store lacks (for offline use ahead of time), one after
    /// the other; the first failure is thrown after the others were tried.
    public func prefetch(_ assets: some Sequence<Asset>) async throws {
        var failure: (any Error)?
        for asset in assets {
            do { _ = try await self.asset(asset) } catch is CancellationError { throw CancellationError() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// Evicts down to the budget now (it happens after each fetch anyway): the bytes freed.
    @discardableResult
    public func trimAssetCache() async throws -> UInt64 {
        guard let budget = assetCacheBudget else { return 0 }
        let assets = self.assets
        return try await BlockingIO.run { try assets.evict(toFit: budget) }
    }

    /// What the assets take on this device.
    public func assetCacheUsage() throws -> AssetCacheUsage {
        var usage = AssetCacheUsage(assets: 0, bytes: 0, pinned: 0, pinnedBytes: 0, notUploaded: 0, notUploadedBytes: 0)
        for asset in try assets.inventory() {
            usage.assets += 1
            usage.bytes += asset.bytes
            if assets.isPinned(asset.hash) {
                usage.pinned += 1
                usage.pinnedBytes += asset.bytes
            }
            if !assets.isRemote(asset.hash) {
                usage.notUploaded += 1
                usage.notUploadedBytes += asset.bytes
            }
        }
        return usage
    }

    /// Records that a server holds the asset for good (a transaction or state naming it was
    /// acknowledged after its upload): it may leave this device under the cache budget from now
    /// on. Nothing when the store does not hold the asset.
    @_spi(StrataInternals)
    public func markAssetUploaded(_ hash: AssetHash) {
        // Only for what the store holds: a reference pulled from elsewhere leaves no marker.
        guard assets.has(hash) else { return }
        try? assets.markRemote(hash)
    }

    /// Records that the server no longer holds the asset (it answered `assetMissing` naming it:
    /// restored from a backup, or its link swept): the device keeps its copy under any budget
    /// until an upload completes again — it may be the last one.
    @_spi(StrataInternals)
    public func markAssetNotUploaded(_ hash: AssetHash) {
        try? assets.unmarkRemote(hash)
    }
}

/// What a collection removed.
public struct AssetCollection: Sendable, Hashable {
    public var removed: Int
    public var bytes: UInt64
}

extension Store {
    /// Removes the assets nothing names any more: no object of the projection (deleted ones
    /// until their delete is older than `grace`), no transaction of the retained log (pending pushes among them), no kept
    /// snapshot or adopted state, no pin — and whose files were not used (imported, fetched,
    /// read) within `grace`, so that an asset imported for a transaction not yet committed stays.
    /// Compaction runs it with ``StoreOptions/assetCollectionGrace``.
    @discardableResult
    public func collectUnreferencedAssets(grace: Duration) async throws -> AssetCollection {
        let assets = self.assets
        let held = try await BlockingIO.run { try assets.inventory() }
        let cutoff = Date().addingTimeInterval(-Double(grace.components.seconds) - Double(grace.components.attoseconds) / 1e18)
        let running = Set(assetFetching.withLock { $0.downloads.keys.map(\.hex) })
        _ = try await BlockingIO.run { try assets.removeStalePartials(olderThan: cutoff, except: running) }
        let candidates = held.filter { $0.lastUse < cutoff && !assets.isPinned($0.hash) && $0.hash != Asset.empty.sha256 }
        guard !candidates.isEmpty else { return AssetCollection(removed: 0, bytes: 0) }
        // A deleted object's assets are forgotten once the delete is older than the grace.
        let deletedBefore = UInt64(max(0, cutoff.timeIntervalSince1970 * 1000))
        let scannedThrough = log.nextPosition
        let named = try await BlockingIO.run { try self.assetsNamedByRetainedHistory(forgettingDeletedBefore: deletedBefore) }
        let unnamed = candidates.filter { !named.contains($0.hash) }
        guard !unnamed.isEmpty else { return AssetCollection(removed: 0, bytes: 0) }
        // Checked again against the projection, and removed, under the store's lock: a commit
        // naming one of them meanwhile keeps it, and none can name it while it goes (an unlink
        // is quick; the directory's fsync comes after).
        let removed = try core.withLock { core -> [(hash: AssetHash, bytes: UInt64, lastUse: Date)] in
            var nowNamed = core.projection.assetsNamed(forgettingDeletedBefore: deletedBefore)
            // What was committed while the history was read (and maybe overwritten since).
            if log.nextPosition > scannedThrough {
                for entry in try log.entries(from: scannedThrough) where !AdoptionRecord.isAdoption(entry.payload) {
                    nowNamed.formUnion(try TransactionSummary(validating: entry.payload, position: entry.position).namedAssets)
                }
            }
            var removed: [(hash: AssetHash, bytes: UInt64, lastUse: Date)] = []
            for candidate in unnamed where !nowNamed.contains(candidate.hash) {
                // Imported (or read) again meanwhile: its grace starts over.
                let attributes = try? FileManager.default.attributesOfItem(atPath: assets.objectPath(candidate.hash))
                if let used = attributes?[.modificationDate] as? Date, used >= cutoff { continue }
                try FileSystem.remove(assets.objectPath(candidate.hash))
                removed.append(candidate)
            }
            return removed
        }
        try await BlockingIO.run {
            if FileSystem.isDirectory(assets.objects) { try FileSystem.syncDirectory(assets.objects) }
            for asset in removed {
                try FileSystem.remove(assets.manifestPath(asset.hash))
                // A later import of the same bytes is not yet uploaded anywhere.
                try FileSystem.remove(assets.remote + "/" + asset.hash.hex)
            }
        }
        return AssetCollection(removed: removed.count, bytes: removed.reduce(0) { $0 + $1.bytes })
    }

    /// The assets the projection, the retained log, the kept snapshots and adopted states name.
    private func assetsNamedByRetainedHistory(forgettingDeletedBefore deletedBefore: UInt64) throws -> Set<AssetHash> {
        var named = core.withLock { $0.projection.assetsNamed(forgettingDeletedBefore: deletedBefore) }
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries where !AdoptionRecord.isAdoption(entry.payload) {
                    // Whatever cannot be read stops the collection: nothing is removed on a guess.
                    named.formUnion(try TransactionSummary(validating: entry.payload, position: entry.position).namedAssets)
                }
            }
            for info in try log.snapshots() {
                named.formUnion(try ProjectionCodec.assetsNamed(inSnapshot: try log.readSnapshot(info).payload, forgettingDeletedBefore: deletedBefore))
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        let adopted = AdoptedStates(storeDirectory: directory)
        for hash in adopted.kept() {
            guard let bytes = try FileSystem.read(adopted.path(of: hash)) else { continue }
            named.formUnion(try ProjectionCodec.assetsNamed(inSnapshot: bytes, forgettingDeletedBefore: deletedBefore))
        }
        return named
    }
}
