@_spi(StrataInternals) public import Strata
public import StrataCore
import StrataProtocol

/// Assets: uploaded before the transactions that name them, fetched through the zone when the
/// store asks for one it lacks (the engine is the store's `AssetSource`).
extension SyncEngine: AssetSource {
    /// The assets encoded transactions name. Bytes the store wrote itself: a summary that does
    /// not decode names nothing, and the server refuses the push for what it is.
    static func assetsNamed(byTransactions encoded: [[UInt8]]) -> Set<AssetHash> {
        var named = Set<AssetHash>()
        for bytes in encoded {
            if let summary = try? TransactionSummary(validating: bytes) { named.formUnion(summary.namedAssets) }
        }
        return named
    }

    /// The assets a state (a projection snapshot payload) names as the server counts them —
    /// deleted objects' left out, which the server neither checks nor takes; none when it does
    /// not decode (the server refuses it for what it is).
    static func assetsNamed(byState state: [UInt8]) -> Set<AssetHash> {
        (try? StateUpload(payload: state).namedAssets) ?? []
    }

    /// Records that the zone now holds `named` for good — a transaction or state naming them was
    /// acknowledged, so the zone's history or snapshot keeps them — and the device may let them
    /// go under its cache budget. Not when an upload completes: until something naming it is
    /// acknowledged, the server keeps an upload only for its grace, and the device's copy may be
    /// the last.
    func zoneKeeps(_ named: Set<AssetHash>) {
        for hash in named { store.markAssetUploaded(hash) }
    }

    /// Requests an upload keeps in flight at once (begins and chunk PUTs, across assets): enough
    /// to overlap the server's durable writes and the round trips, few enough to bound memory
    /// (each chunk request holds at most a 1 MiB chunk and its compressed form) and what a kill
    /// makes the engine send again (the requests in flight; every chunk the server answered is
    /// recorded there and not asked for again).
    static let assetUploadWindow = 8
    /// Chunk PUTs of one asset in flight at once: a large asset alone (a video) keeps its
    /// memory to about half the window's (the 5 GiB upload's client grew by +53 MiB with 8 of
    /// its chunks in flight, against a goal of +64 MiB), and the rest of the window goes to the
    /// other assets.
    static let assetChunkWindow = 4

    /// Uploads the assets of `named` the zone may not hold yet (the manifest, then the chunks the server says it lacks — after a kill or a dropped connection only those; an asset this store does not hold is left to the server, which refuses the push with `assetMissing` if the zone lacks it too):
    /// several requests in flight at once (``assetUploadWindow``, at most ``assetChunkWindow``
    /// chunks of one asset), chunks of begun assets before new begins, so that assets complete
    /// one after another rather than all at the end.
    func uploadAssets(_ named: Set<AssetHash>) async throws {
        do {
            // Under a time budget the uploads in flight at the deadline are cancelled; the server
            // keeps the chunks it took, and the next sync sends only those it lacks.
            try await SyncBudget.bounding { try await self.uploadAssetsInWindow(named) }
        } catch let error as SyncError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch let spent as SyncBudget.Spent {
            throw spent
        } catch {
            // The store's own failure (an asset file damaged or unreadable, the disk): typed, so
            // that the sync's status says it rather than keep the phase it had.
            throw SyncError(.store, "cannot read an asset of this store to upload it: \(error)")
        }
    }

    /// Records that the server will not take `hash` (too large, over a quota): its transaction
    /// stays pending (the push is refused with `assetMissing`, which the sync defers), the other
    /// assets and the pull go on, and the sync reports this refusal — naming every asset refused.
    private func noteRefusal(_ refusal: SyncError, of hash: AssetHash) {
        var noted = refusal
        let earlier = assetUploadRefusal?.assets ?? []
        noted.assets = earlier.contains(hash) ? earlier : earlier + [hash]
        assetUploadRefusal = noted
    }

    private func uploadAssetsInWindow(_ named: Set<AssetHash>) async throws {
        var toBegin: [(hash: AssetHash, manifest: AssetManifest)] = []
        for hash in named.sorted() where !assetsInZone.contains(hash) {
            guard let manifest = try store.localManifest(for: hash) else { continue }
            toBegin.append((hash, manifest))
        }
        guard !toBegin.isEmpty else { return }
        // Smallest first: a thumbnail is on the server (and its note can follow) before the
        // original it stands for, and many photos before one video takes the window.
        toBegin.sort { ($0.manifest.byteCount, $0.hash) < ($1.manifest.byteCount, $1.hash) }
        let transport = self.transport
        let store = self.store
        let zone = self.zoneReference
        // Begun assets with chunks waiting for a slot (in begin order, each with the next of its
        // chunks to send), the chunk PUTs in flight per asset, and per begun asset: the chunks
        // not yet answered, and whether an answer said the upload completed.
        var ready: [(manifest: AssetManifest, chunks: [Int], next: Int)] = []
        var sending: [AssetHash: Int] = [:]
        var unanswered: [AssetHash: Int] = [:]
        var completed: Set<AssetHash> = []
        var refused: Set<AssetHash> = []
        var nextBegin = 0
        try await withThrowingTaskGroup(of: AssetUploadStep.self) { group in
            var inFlight = 0
            func startNext() -> Bool {
                if let slot = ready.firstIndex(where: { sending[$0.manifest.sha256, default: 0] < Self.assetChunkWindow }) {
                    let manifest = ready[slot].manifest
                    let index = ready[slot].chunks[ready[slot].next]
                    ready[slot].next += 1
                    if ready[slot].next == ready[slot].chunks.count { ready.remove(at: slot) }
                    sending[manifest.sha256, default: 0] += 1
                    group.addTask {
                        try Task.checkCancellation()
                        let bytes = try await store.localChunk(index, of: manifest)
                        do {
                            let answer = try await transport.putAssetChunk(zone: zone, asset: manifest.sha256, index: index, bytes: bytes)
                            return .chunk(manifest.sha256, answer)
                        } catch let refusal as SyncError where refusal.code == .tooLarge || refusal.code == .quotaExceeded {
                            // The owner's quota filled while this asset was on its way.
                            return .refused(manifest.sha256, refusal)
                        }
                    }
                    return true
                }
                guard nextBegin < toBegin.count else { return false }
                let (hash, manifest) = toBegin[nextBegin]
                nextBegin += 1
                group.addTask {
                    try Task.checkCancellation()
                    do {
                        return .begun(manifest, try await transport.beginAssetUpload(zone: zone, manifest: manifest))
                    } catch let refusal as SyncError where refusal.code == .tooLarge || refusal.code == .quotaExceeded {
                        return .refused(hash, refusal)
                    }
                }
                return true
            }
            while inFlight < Self.assetUploadWindow, startNext() { inFlight += 1 }
            while let step = try await group.next() {
                inFlight -= 1
                switch step {
                case .refused(let hash, let refusal):
                    if sending[hash] != nil { sending[hash, default: 1] -= 1 }
                    // (`break` leaves the switch only: the window is refilled below either way.)
                    guard refused.insert(hash).inserted else { break }
                    // No more of its chunks go out; answers to those in flight are let go.
                    ready.removeAll { $0.manifest.sha256 == hash }
                    unanswered[hash] = nil
                    noteRefusal(refusal, of: hash)
                case .begun(let manifest, let answer):
                    // The server's list is checked before any index is used: in range, each once.
                    guard answer.missing.allSatisfy({ $0 >= 0 && $0 < manifest.chunks.count }), Set(answer.missing).count == answer.missing.count else {
                        throw SyncError(.malformedResponse, "the server asked for chunks \(answer.missing.prefix(8).map(String.init).joined(separator: ", ")) of asset \(manifest.sha256), which has \(manifest.chunks.count) chunks")
                    }
                    if answer.missing.isEmpty {
                        try uploaded(manifest.sha256, complete: answer.complete, missing: answer.missing)
                    } else {
                        unanswered[manifest.sha256] = answer.missing.count
                        ready.append((manifest, answer.missing, 0))
                    }
                case .chunk(let hash, let answer):
                    sending[hash, default: 1] -= 1
                    if refused.contains(hash) { break }
                    if answer.complete { completed.insert(hash) }
                    let left = (unanswered[hash] ?? 1) - 1
                    unanswered[hash] = left
                    if left == 0 {
                        unanswered[hash] = nil
                        try uploaded(hash, complete: completed.remove(hash) != nil, missing: answer.missing)
                    }
                }
                while inFlight < Self.assetUploadWindow, startNext() { inFlight += 1 }
            }
        }
    }

    /// Records an asset whose every chunk was answered: the zone holds it when an answer said
    /// the upload completed (with several chunks in flight, the last one the server recorded).
    private func uploaded(_ hash: AssetHash, complete: Bool, missing: [Int]) throws {
        guard complete else {
            throw SyncError(.assetMismatch, "asset \(hash): every chunk was sent, and the server still lacks chunks \(missing.prefix(8).map(String.init).joined(separator: ", "))")
        }
        // The zone holds it now; the device keeps its copy until something naming it is
        // acknowledged (`zoneKeeps`).
        assetsInZone.insert(hash)
    }

    public nonisolated func assetManifest(for asset: Asset) async throws -> AssetManifest? {
        try await transport.assetManifest(zone: zoneReference, asset: asset.sha256)
    }

    public nonisolated func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
        try await transport.assetChunk(zone: zoneReference, asset: asset.sha256, index: index)
    }
}

/// What one request of an upload answered (``SyncEngine/uploadAssets(_:)``).
enum AssetUploadStep: Sendable {
    case begun(AssetManifest, AssetUploadAnswer)
    case refused(AssetHash, SyncError)
    case chunk(AssetHash, AssetUploadAnswer)
}
