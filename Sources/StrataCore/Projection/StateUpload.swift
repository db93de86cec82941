import StrataLog

/// A projection snapshot payload a device uploaded to heal a zone, checked but never decoded
/// whole: a server merges it object by object as it reads it
/// (``ProjectionBuilder/mergedPayload(with:believingApplied:withholding:crediting:)``), so that
/// its memory is the payload's bytes, not the several times more a decoded projection takes.
///
/// Checking reads every object once: the layout (every index in range, nothing truncated or
/// trailing), object IDs strictly ascending (the payload's order, which the merge relies on;
/// Strata's own encoder always writes them so), every sequence a removal names within the range
/// of event sequences, and the newest stamp anywhere in it.
public struct StateUpload: Sendable {
    /// The payload as uploaded.
    public let payload: [UInt8]
    let header: SnapshotHeader
    /// The newest timestamp of any event the state names, found by looking at every stamp (not
    /// the header's claim): what a server checks against its clock, since a stamp far ahead
    /// would win every later edit.
    public let newestTimestamp: HLC
    /// The assets its objects' fields name (deleted objects' left out): the zone must hold them
    /// before it takes the state.
    public let namedAssets: Set<AssetHash>

    /// Whether the uploaded `record` is of a deleted object (its delete newer than its insert),
    /// whose asset fields the zone neither checks nor takes: the merge leaves them out
    /// (`ProjectionBuilder.mergedPayload`), so that an uploader cannot slip an asset the zone does
    /// not hold into an object the zone's own newer insert keeps alive.
    package static func bringsNoAssets(_ record: ObjectRecord) -> Bool {
        !record.inserted.isNone && !record.deleted.isNone && record.deleted.hlc > record.inserted.hlc
    }

    /// Checks `payload`.
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` saying what is wrong and at which byte.
    public init(payload: [UInt8]) throws {
        self.payload = payload
        var newest: UInt64 = 0
        var assets = Set<AssetHash>()
        header = try payload.withUnsafeBytes { raw in
            var decoder = SnapshotDecoder(r: ByteReader(raw))
            let header = try decoder.header()
            newest = max(header.maxHLC, header.schemaEvents.map(\.ref.hlc).max() ?? 0)
            var previous: ObjectID?
            for _ in 0..<header.recordCount {
                let at = decoder.r.offset
                let (id, record) = try decoder.record()
                if let previous, !(previous < id) {
                    throw StoreError(.corruptSnapshot, "object \(id) at byte \(at) of the snapshot payload is not after object \(previous): objects are in ascending ID order")
                }
                previous = id
                newest = max(newest, record.inserted.hlc, record.deleted.hlc)
                // A deleted object's fields are never read again (only a newer insert brings the
                // object back, with fields of its own), and its assets are collected on devices
                // once the delete is older than their grace: the zone need not hold them, else a
                // device healing a restored zone is refused for a photo nobody keeps any more.
                // (Without the replica table's order, a tie of stamps counts as not deleted.)
                let deleted = Self.bringsNoAssets(record)
                for slot in record.fields {
                    newest = max(newest, slot.ref.hlc)
                    if !deleted, case .asset(let asset) = slot.value, asset.sha256 != Asset.empty.sha256 { assets.insert(asset.sha256) }
                }
                for member in record.sets {
                    for add in member.adds { newest = max(newest, add.hlc) }
                    // A removal's sequence is not a ref's (read unchecked by the layout): bound it
                    // as events' sequences are, so that the merge's arithmetic on it cannot wrap.
                    for removed in member.removedAdds where removed.sequence == 0 || removed.sequence > Ref.maxSequence {
                        throw StoreError(.corruptSnapshot, "object \(id) (at byte \(at) of the snapshot payload) removes an add of sequence \(removed.sequence); sequences are 1…\(Ref.maxSequence)")
                    }
                }
            }
            guard decoder.r.remaining == 0 else { throw decoder.corrupt("\(decoder.r.remaining) trailing bytes") }
            return header
        }
        newestTimestamp = HLC(rawValue: newest)
        namedAssets = assets
    }

    /// Objects in the state.
    public var objectCount: Int { header.recordCount }

    /// Each replica's highest sequence below which the state claims everything applied.
    public func contiguousSequences() -> [ReplicaID: UInt64] {
        var result: [ReplicaID: UInt64] = [:]
        for (index, set) in header.applied.enumerated() where set.contiguous > 0 { result[header.replicas[index]] = set.contiguous }
        return result
    }
}

extension StateUpload: MergeSource {
    package var names: [String] { header.names }
    package var replicas: [ReplicaID] { header.replicas }
    package var applied: [AppliedSet] { header.applied }
    package var schemaEvents: [(ref: Ref, schema: Schema)] { header.schemaEvents }
    package var maxHLC: UInt64 { header.maxHLC }

    /// Decodes the objects one at a time, in ID order (checked when the upload was).
    package func forEachRecord(_ body: (ObjectID, ObjectRecord) throws -> Void) throws {
        try payload.withUnsafeBytes { raw in
            var decoder = SnapshotDecoder(r: ByteReader(raw, offset: header.recordsOffset))
            decoder.names = header.names
            decoder.replicas = header.replicas
            for _ in 0..<header.recordCount {
                let (id, record) = try decoder.record()
                try body(id, record)
            }
        }
    }
}
