@_spi(StrataInternals) public import Strata
public import StrataCore
import StrataProtocol

/// Assets: uploaded before the transactions that name them, fetched through the zone when the
/// store asks for one it lacks (the engine is the store's `AssetSource`).
extension SyncEngine: AssetSource {
    /// Uploads every asset the transactions name that the zone may not hold yet: the manifest,
    /// then the chunks the server says it lacks — after a kill or a dropped connection, only
    /// those, so at most the chunk in flight is sent twice. An asset this store does not hold
    /// (a reference pulled from the zone, or copied from another object) is left to the server,
    /// which refuses the push with `assetMissing` if the zone does not hold it either.
    func uploadAssets(namedBy encoded: [[UInt8]]) async throws {
        var named = Set<AssetHash>()
        for bytes in encoded {
            // Bytes the store wrote itself: a summary that does not decode names nothing, and
            // the server refuses the push for what it is.
            if let summary = try? TransactionSummary(validating: bytes) { named.formUnion(summary.namedAssets) }
        }
        try await uploadAssets(named)
    }

    /// The assets a state (a projection snapshot payload) names; none when it does not decode
    /// (the server refuses it for what it is).
    static func assetsNamed(byState state: [UInt8]) -> Set<AssetHash> {
        (try? ProjectionCodec.assetsNamed(inSnapshot: state)) ?? []
    }

    /// Uploads the assets of `named` the zone may not hold yet (see ``uploadAssets(namedBy:)``).
    func uploadAssets(_ named: Set<AssetHash>) async throws {
        for hash in named.sorted() where !assetsInZone.contains(hash) {
            guard let manifest = try store.localManifest(for: hash) else { continue }
            var answer: AssetUploadAnswer
            do {
                answer = try await transport.beginAssetUpload(zone: zoneReference, manifest: manifest)
            } catch let refusal as SyncError where refusal.code == .tooLarge || refusal.code == .quotaExceeded {
                // An asset the server will not take: its transaction stays pending (the push is
                // refused with `assetMissing`, which the sync defers), the other assets and the
                // pull go on, and the sync reports this refusal, which says why.
                assetUploadRefusal = refusal
                continue
            }
            // The server's list is checked before any index is used: in range, each once.
            guard answer.missing.allSatisfy({ $0 >= 0 && $0 < manifest.chunks.count }), Set(answer.missing).count == answer.missing.count else {
                throw SyncError(.malformedResponse, "the server asked for chunks \(answer.missing.prefix(8).map(String.init).joined(separator: ", ")) of asset \(hash), which has \(manifest.chunks.count) chunks")
            }
            for index in answer.missing {
                try Task.checkCancellation()
                let bytes = try await store.localChunk(index, of: manifest)
                answer = try await transport.putAssetChunk(zone: zoneReference, asset: hash, index: index, bytes: bytes)
            }
            guard answer.complete else {
                throw SyncError(.assetMismatch, "asset \(hash): every chunk was sent, and the server still lacks chunks \(answer.missing.prefix(8).map(String.init).joined(separator: ", "))")
            }
            assetsInZone.insert(hash)
            // A server holds it now: the device may let it go under its cache budget.
            store.markAssetUploaded(hash)
        }
    }

    public nonisolated func assetManifest(for asset: Asset) async throws -> AssetManifest? {
        try await transport.assetManifest(zone: zoneReference, asset: asset.sha256)
    }

    public nonisolated func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
        try await transport.assetChunk(zone: zoneReference, asset: asset.sha256, index: index)
    }
}
