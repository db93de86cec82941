import Crypto
import StrataLog

extension Projection {
    /// A canonical SHA-256 of everything readers can see, excluding local-only attributes: every
    /// existing object (by ID) with its entity, its visible fields with the event that set each,
    /// and its to-many sets. Two stores that applied the same events have the same digest.
    func digest() -> String {
        var hasher = SHA256()
        var w = ByteWriter(capacity: 1 << 16)
        func flush() {
            hasher.update(data: w.bytes)
            w.bytes.removeAll(keepingCapacity: true)
        }
        for id in allObjectIDs() {
            guard let record = records[id] else { continue }
            let entityName = entityName(of: record)
            let entity = schema.entity(entityName)
            w.raw(id.bytes)
            w.lengthPrefixed(Array(entityName.utf8))
            var fields: [(String, Value, Ref)] = []
            for slot in record.fields {
                let name = names[Int(slot.key)]
                if entity?.attribute(name)?.isLocalOnly == true { continue }
                if let visible = visibleValue(record, key: slot.key) { fields.append((name, visible.value, visible.ref)) }
            }
            fields.sort { $0.0 < $1.0 }
            w.varint(UInt64(fields.count))
            for (name, value, ref) in fields {
                w.lengthPrefixed(Array(name.utf8))
                EventCodec.writeValue(value, into: &w)
                w.raw(replicas[Int(ref.replica)].bytes)
                w.varint(ref.sequence)
            }
            let setKeys = Set(record.sets.map(\.key)).map { ($0, names[Int($0)]) }.sorted { $0.1 < $1.1 }
            for (key, name) in setKeys {
                let members = visibleMembers(record, key: key)
                guard !members.isEmpty else { continue }
                w.lengthPrefixed(Array(name.utf8))
                w.varint(UInt64(members.count))
                for member in members { w.raw(member.bytes) }
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
