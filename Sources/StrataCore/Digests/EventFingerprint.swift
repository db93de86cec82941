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
        fingerprints(leavingOut: localOnly) { result.append($0) }
        return result
    }

    /// The same, handed to `each` one at a time (a caller collecting many transactions' appends
    /// them to its own list, without an array per transaction).
    package func fingerprints(leavingOut localOnly: [String: Set<String>] = [:], _ each: (SequenceDigests.Held) -> Void) {
        guard events.contains(where: { $0.kind != .withheld }) else { return }
        let table = NameTable(self, leavingOut: localOnly)
        let hardware = SHA256Hasher.usesHardware
        var w = CanonicalBytes(capacity: 256)
        var order: [(rank: Int, field: Int)] = []
        for (index, event) in events.enumerated() where event.kind != .withheld {
            let sequence = firstSequence + UInt64(index)
            w.removeAll()
            canonical(event, sequence: sequence, names: table, order: &order, into: &w)
            let (high, low) = SHA256Hasher.prefix128(of: w.bytes, hardware: hardware)
            each((sequence, Fingerprint(high: high, low: low), event.hlc))
        }
    }

    /// A transaction's names as the canonical encoding needs them, worked out once per
    /// transaction rather than per field: each name's length-prefixed UTF-8 bytes, its place in
    /// the names' order, and which names are left out of which entity's events.
    private struct NameTable {
        /// Each name's length-prefixed UTF-8, one after another; `ends[i]` is where name `i`'s end.
        var encoded: [UInt8] = []
        var ends: [Int] = []
        /// Each name's place in the UTF-8 byte order of the transaction's names (equal names
        /// share one; "" and an index out of range are 0): fields are sorted by comparing
        /// integers, not strings.
        var ranks: [Int]
        /// By entity name index: the name indexes whose fields are left out, and whether a
        /// name out of range (read as "") is (`nil`: none).
        var skipped: [(byName: [Bool], empty: Bool)?]
        /// The same for an entity index out of range (read as "").
        var skippedForNoEntity: (byName: [Bool], empty: Bool)?

        init(_ transaction: DecodedTransaction, leavingOut localOnly: [String: Set<String>]) {
            let names = transaction.names
            var writer = ByteWriter(capacity: names.reduce(0) { $0 + $1.utf8.count + 1 })
            ends.reserveCapacity(names.count)
            for name in names {
                writer.string(name)
                ends.append(writer.bytes.count)
            }
            encoded = writer.bytes
            let sorted = names.indices.sorted { names[$0].utf8.lexicographicallyPrecedes(names[$1].utf8) }
            ranks = [Int](repeating: 0, count: names.count)
            var rank = 0
            for (i, index) in sorted.enumerated() {
                if i == 0 || names[sorted[i - 1]] != names[index] { rank += 1 }
                ranks[index] = names[index].isEmpty ? 0 : rank
            }
            // One row per distinct local-only entity name among the names, shared by every index
            // that names it (a name table repeating an entity's name — a hostile log may — costs
            // one row, not one per repetition).
            func row(_ entity: String) -> (byName: [Bool], empty: Bool)? {
                guard let attributes = localOnly[entity], !attributes.isEmpty else { return nil }
                return (names.map { attributes.contains($0) }, attributes.contains(""))
            }
            var rows: [String: (byName: [Bool], empty: Bool)] = [:]
            if !localOnly.isEmpty {
                for name in Set(names) { rows[name] = row(name) }
            }
            skipped = names.map { rows[$0] }
            skippedForNoEntity = row("")
        }

        /// Name `index`, length-prefixed ("" for an index out of range).
        func write(_ index: Int32, into w: inout CanonicalBytes) {
            let i = Int(index)
            guard ends.indices.contains(i) else { return w.u8(0) }
            let start = i == 0 ? 0 : ends[i - 1]
            encoded.withUnsafeBytes { w.raw(UnsafeRawBufferPointer(rebasing: $0[start..<ends[i]])) }
        }

        func rank(_ index: Int32) -> Int {
            ranks.indices.contains(Int(index)) ? ranks[Int(index)] : 0
        }

        /// Whether a field named `name` is left out of an event of `entity`.
        func skips(_ name: Int32, entity: Int32) -> Bool {
            let found = skipped.indices.contains(Int(entity)) ? skipped[Int(entity)] : skippedForNoEntity
            guard let found else { return false }
            return found.byName.indices.contains(Int(name)) ? found.byName[Int(name)] : found.empty
        }
    }

    private func canonical(_ e: RawEvent, sequence: UInt64, names: NameTable, order: inout [(rank: Int, field: Int)],
                           into w: inout CanonicalBytes) {
        w.u8(1)
        w.id(replica)
        w.u64(sequence)
        w.u64(e.hlc)
        w.u8(e.kind.rawValue)
        switch e.kind {
        case .insert, .update:
            names.write(e.entity, into: &w)
            w.id(e.object)
            let start = Int(e.start)
            let end = min(fields.count, start + Int(e.count))
            // One field (most updates): written as it is.
            if end == start + 1, !names.skips(fields[start].name, entity: e.entity) {
                w.u8(1)
                names.write(fields[start].name, into: &w)
                w.value(fields[start].value)
                return
            }
            order.removeAll(keepingCapacity: true)
            // Each field with its name's rank, sorted by (rank, place): the order of a stable sort
            // by rank. (A closure reading `fields` here captured the whole transaction, copied
            // for every event: most of a diff's time.)
            for field in start..<max(start, end) where !names.skips(fields[field].name, entity: e.entity) {
                order.append((names.rank(fields[field].name), field))
            }
            if order.count > 1 { order.sort { ($0.rank, $0.field) < ($1.rank, $1.field) } }
            w.varint(UInt64(order.count))
            for (_, field) in order {
                names.write(fields[field].name, into: &w)
                w.value(fields[field].value)
            }
        case .delete:
            names.write(e.entity, into: &w)
            w.id(e.object)
        case .add, .remove:
            names.write(e.entity, into: &w)
            w.id(e.object)
            names.write(e.relationship, into: &w)
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
            if schemaJSON.indices.contains(Int(e.start)) { schemaJSON[Int(e.start)].withUnsafeBytes { w.lengthPrefixed($0) } }
        case .withheld:
            break
        }
    }
}
