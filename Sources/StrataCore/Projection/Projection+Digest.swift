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
        // Per name and replica, once: their bytes, their rank in name order (fields are hashed in
        // the order of their names: comparing two ranks is cheaper than two strings), and which
        // attributes are local-only per entity (a digest visits every field of every object).
        let nameBytes = names.map { Array($0.utf8) }
        var nameRank = [UInt32](repeating: 0, count: names.count)
        for (rank, index) in names.indices.sorted(by: { names[$0] < names[$1] }).enumerated() {
            nameRank[index] = UInt32(rank)
        }
        let replicaBytes = replicas.map(\.bytes)
        // Per entity (by name index), the keys of its local-only attributes, found once. An
        // attribute's first declaration decides, as `Entity.attribute(_:)` does (a schema read
        // from a log may declare a name twice); only the entity's own attributes are visited.
        var localOnly: [[UInt32]?] = Array(repeating: nil, count: names.count)
        func localOnlyKeys(of entity: UInt32) -> [UInt32] {
            if let known = localOnly[Int(entity)] { return known }
            var seen: Set<String> = []
            var keys: [UInt32] = []
            for attribute in schema.entity(names[Int(entity)])?.attributes ?? [] where seen.insert(attribute.name).inserted {
                if attribute.isLocalOnly, let key = nameID(attribute.name) { keys.append(key) }
            }
            localOnly[Int(entity)] = keys
            return keys
        }
        var fields: [(key: UInt32, value: Value, ref: Ref)] = []
        // A local copy of the table (one retain): the walk reads its buffer in place, and should
        // anything in the body ever write `records`, that write copies instead of freeing it.
        let records = self.records
        records.forEachInIDOrder(where: exists) { id, record in
            w.id(id)
            w.lengthPrefixed(nameBytes[Int(record.entity)])
            fields.removeAll(keepingCapacity: true)
            let hidden = localOnlyKeys(of: record.entity)
            for slot in record.fields where hidden.isEmpty || !hidden.contains(slot.key) {
                if let visible = visibleValue(record, key: slot.key) { fields.append((slot.key, visible.value, visible.ref)) }
            }
            if fields.count > 1 { fields.sort { nameRank[Int($0.key)] < nameRank[Int($1.key)] } }
            w.varint(UInt64(fields.count))
            for field in fields {
                w.lengthPrefixed(nameBytes[Int(field.key)])
                EventCodec.writeValue(field.value, into: &w)
                w.raw(replicaBytes[Int(field.ref.replica)])
                w.varint(field.ref.sequence)
            }
            if !record.sets.isEmpty {
                let setKeys = Set(record.sets.map(\.key)).sorted { nameRank[Int($0)] < nameRank[Int($1)] }
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
