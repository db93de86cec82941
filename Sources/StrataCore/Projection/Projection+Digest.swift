import StrataLog

extension Projection {
    /// A canonical SHA-256 of everything readers can see, excluding local-only attributes: every
    /// existing object (by ID) with its entity, its visible fields with the event that set each,
    /// and its to-many sets. Two stores that applied the same events have the same digest.
    package func digest() -> String {
        var hasher = SHA256Hasher()
        var w = ByteWriter(capacity: 1 << 16)
        func flush() {
            hasher.update(data: w.bytes)
            w.bytes.removeAll(keepingCapacity: true)
        }
        // Per name and replica, once: their bytes, and which attributes are local-only per entity
        // (a digest visits every field of every object).
        let nameBytes = names.map { Array($0.utf8) }
        let replicaBytes = replicas.map(\.bytes)
        var localOnly: [UInt64: Bool] = [:]
        func isLocalOnly(entity: UInt32, key: UInt32) -> Bool {
            let slot = UInt64(entity) << 32 | UInt64(key)
            if let known = localOnly[slot] { return known }
            let answer = schema.entity(names[Int(entity)])?.attribute(names[Int(key)])?.isLocalOnly == true
            localOnly[slot] = answer
            return answer
        }
        var fields: [(key: UInt32, value: Value, ref: Ref)] = []
        for id in allObjectIDs() {
            guard let record = records[id] else { continue }
            w.id(id)
            w.lengthPrefixed(nameBytes[Int(record.entity)])
            fields.removeAll(keepingCapacity: true)
            for slot in record.fields where !isLocalOnly(entity: record.entity, key: slot.key) {
                if let visible = visibleValue(record, key: slot.key) { fields.append((slot.key, visible.value, visible.ref)) }
            }
            if fields.count > 1 { fields.sort { names[Int($0.key)] < names[Int($1.key)] } }
            w.varint(UInt64(fields.count))
            for field in fields {
                w.lengthPrefixed(nameBytes[Int(field.key)])
                EventCodec.writeValue(field.value, into: &w)
                w.raw(replicaBytes[Int(field.ref.replica)])
                w.varint(field.ref.sequence)
            }
            if !record.sets.isEmpty {
                let setKeys = Set(record.sets.map(\.key)).sorted { names[Int($0)] < names[Int($1)] }
                for key in setKeys {
                    let members = visibleMembers(record, key: key)
                    guard !members.isEmpty else { continue }
                    w.lengthPrefixed(nameBytes[Int(key)])
                    w.varint(UInt64(members.count))
                    for member in members { w.id(member) }
                }
            }
            if w.bytes.count > 60_000 { flush() }
        }
        flush()
        return hasher.finalize().map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}
