import StrataLog

/// Which assets a state names: what must not be collected while the state is kept, and what a
/// server must hold before it takes a state someone uploads.
extension Projection {
    /// Every asset a field of any object names — deleted objects' fields too (a concurrent
    /// edit elsewhere can bring such an object back) — the empty asset left out.
    package func assetsNamed() -> Set<AssetHash> {
        var named = Set<AssetHash>()
        for record in records.values {
            for slot in record.fields {
                if case .asset(let asset) = slot.value, asset.sha256 != Asset.empty.sha256 { named.insert(asset.sha256) }
            }
        }
        return named
    }
}

extension ProjectionCodec {
    /// Every asset a snapshot payload's fields name, read in one pass without building the
    /// projection (the empty asset left out).
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` naming the byte offset.
    package static func assetsNamed(inSnapshot bytes: [UInt8]) throws -> Set<AssetHash> {
        try bytes.withUnsafeBytes { raw in
            var decoder = SnapshotDecoder(r: ByteReader(raw))
            let header = try decoder.header()
            var named = Set<AssetHash>()
            for _ in 0..<header.recordCount {
                let (_, record) = try decoder.record()
                for slot in record.fields {
                    if case .asset(let asset) = slot.value, asset.sha256 != Asset.empty.sha256 { named.insert(asset.sha256) }
                }
            }
            return named
        }
    }
}
