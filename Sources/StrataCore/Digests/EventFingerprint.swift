import StrataLog

/// The fingerprints of a transaction's events, for the history digests (``HistoryDigests``).
///
/// An event's fingerprint is taken over a canonical encoding of what it *is*, not over the bytes
/// that carried it: a device's log and a server's zone hold the same event in records that group
/// and number it differently (a name table per transaction, HLCs as deltas, other events beside
/// it). The canonical encoding (version 1):
///
/// - `1` (a byte: the encoding's version), the replica (16 bytes), the sequence (8 bytes,
///   little-endian), the HLC (8 bytes), the kind (a byte, as in the event codec);
/// - insert and update: the entity name, the object (16 bytes), the number of fields (varint),
///   then each field — name, value (the event codec's value encoding) — in the UTF-8 byte order
///   of the names;
/// - delete: the entity name and the object;
/// - add: the entity name, the object, the relationship name, the target;
/// - remove: those four, then the adds it removes (replica, sequence), sorted;
/// - schema: the schema's JSON as the event stores it (not re-encoded: another version's encoder
///   could write it differently).
///
/// Names are length-prefixed UTF-8. A withheld event (the server left its content out of a
/// pull) has no fingerprint: its holder does not know what it says. Local-only attributes are
/// left out of the events of the reader's own replicas (they are never pushed: the author's log
/// has them, every other copy lacks them).
extension DecodedTransaction {
    /// Each event's sequence and fingerprint, in the transaction's order (withheld ones left
    /// out), without the fields `localOnly` names (entity name → attribute names): pass them for
    /// a transaction of the reader's own replicas only.
    package func fingerprints(leavingOut localOnly: [String: Set<String>] = [:]) -> [SequenceDigests.Held] {
        var result: [SequenceDigests.Held] = []
        result.reserveCapacity(events.count)
        var w = ByteWriter(capacity: 256)
        var order: [(rank: Int, field: Int)] = []
        let ranks = nameRanks()
        for (index, event) in events.enumerated() where event.kind != .withheld {
            let sequence = firstSequence + UInt64(index)
            w.bytes.removeAll(keepingCapacity: true)
            canonical(event, sequence: sequence, leavingOut: localOnly, ranks: ranks, order: &order, into: &w)
            result.append((sequence, Fingerprint(of: w.bytes), event.hlc))
        }
        return result
    }

    private func name(_ index: Int32) -> String {
        names.indices.contains(Int(index)) ? names[Int(index)] : ""
    }

    /// Each name's place in the UTF-8 byte order of the transaction's names (equal names share
    /// one; "" and an index out of range are 0): fields are sorted by comparing integers, once
    /// per transaction rather than strings per event.
    private func nameRanks() -> [Int] {
        let sorted = names.indices.sorted { names[$0].utf8.lexicographicallyPrecedes(names[$1].utf8) }
        var ranks = [Int](repeating: 0, count: names.count)
        var rank = 0
        for (i, index) in sorted.enumerated() {
            if i == 0 || names[sorted[i - 1]] != names[index] { rank += 1 }
            ranks[index] = names[index].isEmpty ? 0 : rank
        }
        return ranks
    }

    private func canonical(_ e: RawEvent, sequence: UInt64, leavingOut localOnly: [String: Set<String>],
                           ranks: [Int], order: inout [(rank: Int, field: Int)], into w: inout ByteWriter) {
        w.u8(1)
        w.id(replica)
        w.u64(sequence)
        w.u64(e.hlc)
        w.u8(e.kind.rawValue)
        switch e.kind {
        case .insert, .update:
            w.string(name(e.entity))
            w.id(e.object)
            let start = Int(e.start)
            let end = min(fields.count, start + Int(e.count))
            let skipped = localOnly.isEmpty ? [] : localOnly[name(e.entity)] ?? []
            order.removeAll(keepingCapacity: true)
            // Each field with its name's rank, sorted by (rank, place): the order of a stable sort
            // by rank. (A closure reading `fields` here captured the whole transaction, copied
            // for every event: most of a diff's time.)
            for field in start..<max(start, end) where skipped.isEmpty || !skipped.contains(name(fields[field].name)) {
                let index = Int(fields[field].name)
                order.append((ranks.indices.contains(index) ? ranks[index] : 0, field))
            }
            if order.count > 1 { order.sort { ($0.rank, $0.field) < ($1.rank, $1.field) } }
            w.varint(UInt64(order.count))
            for (_, field) in order {
                w.string(name(fields[field].name))
                EventCodec.writeValue(fields[field].value, into: &w)
            }
        case .delete:
            w.string(name(e.entity))
            w.id(e.object)
        case .add, .remove:
            w.string(name(e.entity))
            w.id(e.object)
            w.string(name(e.relationship))
            w.id(e.target)
            if e.kind == .remove {
                let start = Int(e.start)
                let end = min(adds.count, start + Int(e.count))
                let removed = (start < end ? Array(adds[start..<end]) : []).map { add -> (ReplicaID, UInt64) in
                    (replicas.indices.contains(Int(add.replica)) ? replicas[Int(add.replica)] : ReplicaID(rawValue: 0), add.sequence)
                }.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
                w.varint(UInt64(removed.count))
                for (replica, sequence) in removed {
                    w.id(replica)
                    w.u64(sequence)
                }
            }
        case .schema:
            if schemaJSON.indices.contains(Int(e.start)) { w.lengthPrefixed(schemaJSON[Int(e.start)]) }
        case .withheld:
            break
        }
    }
}
