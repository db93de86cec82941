import StrataLog

/// Which assets a state names: what must not be collected while the state is kept, and what a
/// server must hold before it takes a state someone uploads.
///
/// A deleted object's fields still name their assets for a while: updates never revive a deleted
/// object, but an insert of the same object newer than the delete does (one made elsewhere
/// before the delete was seen, an app's undo), and the fields it does not write keep their
/// values — its photo among them. Once the delete is older than the caller's cutoff (a
/// collection's grace period), its assets are no longer counted: deleting a note frees its photo.
extension Projection {
    /// Every asset a field of any object names — deleted objects' fields too, unless deleted
    /// before `deletedBefore` (milliseconds since 1970) — the empty asset left out.
    package func assetsNamed(forgettingDeletedBefore deletedBefore: UInt64? = nil) -> Set<AssetHash> {
        var named = Set<AssetHash>()
        for record in records.values {
            if let deletedBefore, !exists(record), !record.inserted.isNone, HLC(rawValue: record.deleted.hlc).milliseconds < deletedBefore { continue }
            for slot in record.fields {
                if case .asset(let asset) = slot.value, asset.sha256 != Asset.empty.sha256 { named.insert(asset.sha256) }
            }
        }
        return named
    }
}

extension ProjectionCodec {
    /// Every asset a snapshot payload's fields name, read in one pass without building the
    /// projection (the empty asset left out); a deleted object's fields are left out when its
    /// delete is newer than its insert and older than `deletedBefore` (milliseconds since 1970).
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` naming the byte offset.
    package static func assetsNamed(inSnapshot bytes: [UInt8], forgettingDeletedBefore deletedBefore: UInt64? = nil) throws -> Set<AssetHash> {
        try bytes.withUnsafeBytes { raw in
            var decoder = SnapshotDecoder(r: ByteReader(raw))
            let header = try decoder.header()
            var named = Set<AssetHash>()
            for _ in 0..<header.recordCount {
                let (_, record) = try decoder.record()
                // Without the replica table's order, a tie of stamps counts as not deleted.
                if let deletedBefore, !record.inserted.isNone, !record.deleted.isNone, record.deleted.hlc > record.inserted.hlc,
                   HLC(rawValue: record.deleted.hlc).milliseconds < deletedBefore { continue }
                for slot in record.fields {
                    if case .asset(let asset) = slot.value, asset.sha256 != Asset.empty.sha256 { named.insert(asset.sha256) }
                }
            }
            return named
        }
    }
}
