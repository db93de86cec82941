import Foundation
import StrataLog

/// The binary encoding of a transaction as one log entry (layout in the Strata format article).
///
/// Compact by construction: entity, attribute and relationship names are stored once per
/// transaction in a name table and referred to by index; integers are varints; HLCs are deltas
/// from the transaction's smallest one; sequence numbers are implied by order.
enum EventCodec {
    static let formatVersion: UInt8 = 1

    enum Kind: UInt8 {
        case insert = 1, update, delete, add, remove, schema
    }

    enum Tag: UInt8 {
        case null = 0, string, integer, double, boolFalse, boolTrue, date, bytes, uuid, reference
    }

    static func encode(_ transaction: TransactionRecord) -> [UInt8] {
        var names: [String] = []
        var nameIndex: [String: Int] = [:]
        func name(_ n: String) -> Int {
            if let i = nameIndex[n] { return i }
            nameIndex[n] = names.count
            names.append(n)
            return names.count - 1
        }
        var replicas: [ReplicaID] = [transaction.replica]
        var replicaIndex: [ReplicaID: Int] = [transaction.replica: 0]
        func replica(_ r: ReplicaID) -> Int {
            if let i = replicaIndex[r] { return i }
            replicaIndex[r] = replicas.count
            replicas.append(r)
            return replicas.count - 1
        }
        let base = transaction.events.map(\.hlc.rawValue).min() ?? 0
        var body = ByteWriter(capacity: 64 * transaction.events.count)
        for event in transaction.events {
            switch event.change {
            case .insert(let entity, let object, let fields), .update(let entity, let object, let fields):
                if case .insert = event.change { body.u8(Kind.insert.rawValue) } else { body.u8(Kind.update.rawValue) }
                body.varint(event.hlc.rawValue - base)
                body.varint(UInt64(name(entity)))
                body.raw(object.bytes)
                body.varint(UInt64(fields.count))
                for key in fields.keys.sorted() {
                    body.varint(UInt64(name(key)))
                    writeValue(fields[key] ?? .null, into: &body)
                }
            case .delete(let entity, let object):
                body.u8(Kind.delete.rawValue)
                body.varint(event.hlc.rawValue - base)
                body.varint(UInt64(name(entity)))
                body.raw(object.bytes)
            case .add(let entity, let object, let relationship, let target):
                body.u8(Kind.add.rawValue)
                body.varint(event.hlc.rawValue - base)
                body.varint(UInt64(name(entity)))
                body.raw(object.bytes)
                body.varint(UInt64(name(relationship)))
                body.raw(target.bytes)
            case .remove(let entity, let object, let relationship, let target, let adds):
                body.u8(Kind.remove.rawValue)
                body.varint(event.hlc.rawValue - base)
                body.varint(UInt64(name(entity)))
                body.raw(object.bytes)
                body.varint(UInt64(name(relationship)))
                body.raw(target.bytes)
                body.varint(UInt64(adds.count))
                for add in adds.sorted() {
                    body.varint(UInt64(replica(add.replica)))
                    body.varint(add.sequence)
                }
            case .schema(let schema):
                body.u8(Kind.schema.rawValue)
                body.varint(event.hlc.rawValue - base)
                body.lengthPrefixed(Array(schema.jsonData()))
            }
        }
        var w = ByteWriter(capacity: body.bytes.count + 64 + names.count * 8)
        w.u8(formatVersion)
        w.raw(transaction.replica.bytes)
        w.varint(transaction.events.first?.id.sequence ?? 0)
        w.varint(UInt64(transaction.events.count))
        w.u64(base)
        w.varint(UInt64(names.count))
        for n in names { w.lengthPrefixed(Array(n.utf8)) }
        w.varint(UInt64(replicas.count - 1))
        for r in replicas.dropFirst() { w.raw(r.bytes) }
        w.raw(body.bytes)
        return w.bytes
    }

    static func writeValue(_ value: Value, into w: inout ByteWriter) {
        switch value {
        case .null: w.u8(Tag.null.rawValue)
        case .string(let v):
            w.u8(Tag.string.rawValue)
            w.lengthPrefixed(Array(v.utf8))
        case .integer(let v):
            w.u8(Tag.integer.rawValue)
            w.svarint(v)
        case .double(let v):
            w.u8(Tag.double.rawValue)
            w.u64(v.bitPattern)
        case .bool(let v): w.u8(v ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
        case .date(let v):
            w.u8(Tag.date.rawValue)
            w.svarint(v)
        case .bytes(let v):
            w.u8(Tag.bytes.rawValue)
            w.lengthPrefixed(v)
        case .uuid(let v):
            w.u8(Tag.uuid.rawValue)
            w.raw(ObjectID(uuid: v).bytes)
        case .reference(let v):
            w.u8(Tag.reference.rawValue)
            w.raw(v.bytes)
        }
    }

    /// Decodes one log entry. `position` is only for the error message.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` naming the position and byte offset.
    static func decode(_ bytes: [UInt8], position: UInt64?) throws -> TransactionRecord {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            func corrupt(_ what: String) -> StoreError {
                StoreError(.corruptEvent, "\(what) at byte \(r.offset) of the entry", position: position)
            }
            guard let version = r.u8() else { throw corrupt("empty entry") }
            guard version == formatVersion else { throw corrupt("unknown event format version \(version)") }
            guard let replicaBytes = r.bytes(16), let first = r.varint(), let count = r.varint(), let base = r.u64(),
                  let nameCount = r.varint(), nameCount <= UInt64(r.remaining)
            else { throw corrupt("truncated transaction header") }
            let replica = ReplicaID(bytes: replicaBytes)
            var names: [String] = []
            names.reserveCapacity(Int(nameCount))
            for _ in 0..<nameCount {
                guard let n = r.lengthPrefixed() else { throw corrupt("truncated name table") }
                names.append(String(decoding: n, as: UTF8.self))
            }
            guard let extraReplicas = r.varint(), extraReplicas <= UInt64(r.remaining / 16) else { throw corrupt("bad replica table") }
            var replicas = [replica]
            for _ in 0..<extraReplicas {
                guard let b = r.bytes(16) else { throw corrupt("truncated replica table") }
                replicas.append(ReplicaID(bytes: b))
            }
            guard count <= UInt64(r.remaining) else { throw corrupt("event count \(count) exceeds the entry") }
            func name() throws -> String {
                guard let i = r.varint(), i < UInt64(names.count) else { throw corrupt("bad name index") }
                return names[Int(i)]
            }
            func id() throws -> ObjectID {
                guard let b = r.bytes(16) else { throw corrupt("truncated object ID") }
                return ObjectID(bytes: b)
            }
            var events: [Event] = []
            events.reserveCapacity(Int(count))
            for index in 0..<count {
                guard let kindByte = r.u8(), let kind = Kind(rawValue: kindByte) else { throw corrupt("unknown event kind") }
                guard let delta = r.varint(), delta <= UInt64.max - base else { throw corrupt("bad timestamp") }
                let change: Change
                switch kind {
                case .insert, .update:
                    let entity = try name()
                    let object = try id()
                    guard let fieldCount = r.varint(), fieldCount <= UInt64(r.remaining) else { throw corrupt("bad field count") }
                    var fields: [String: Value] = [:]
                    fields.reserveCapacity(Int(fieldCount))
                    for _ in 0..<fieldCount {
                        let key = try name()
                        fields[key] = try readValue(&r, corrupt)
                    }
                    change = kind == .insert ? .insert(entity: entity, object: object, fields: fields) : .update(entity: entity, object: object, fields: fields)
                case .delete:
                    change = .delete(entity: try name(), object: try id())
                case .add:
                    change = .add(entity: try name(), object: try id(), relationship: try name(), target: try id())
                case .remove:
                    let entity = try name()
                    let object = try id()
                    let relationship = try name()
                    let target = try id()
                    guard let addCount = r.varint(), addCount <= UInt64(r.remaining) else { throw corrupt("bad add count") }
                    var adds: [EventID] = []
                    for _ in 0..<addCount {
                        guard let ri = r.varint(), ri < UInt64(replicas.count), let seq = r.varint() else { throw corrupt("bad add reference") }
                        adds.append(EventID(replica: replicas[Int(ri)], sequence: seq))
                    }
                    change = .remove(entity: entity, object: object, relationship: relationship, target: target, adds: adds)
                case .schema:
                    guard let json = r.lengthPrefixed() else { throw corrupt("truncated schema") }
                    guard let schema = try? JSONDecoder().decode(Schema.self, from: Data(json)) else { throw corrupt("schema JSON does not decode") }
                    change = .schema(schema)
                }
                events.append(Event(id: EventID(replica: replica, sequence: first + index), hlc: HLC(rawValue: base + delta), change: change))
            }
            guard r.remaining == 0 else { throw corrupt("\(r.remaining) trailing bytes") }
            return TransactionRecord(replica: replica, events: events)
        }
    }

    static func readValue(_ r: inout ByteReader, _ corrupt: (String) -> StoreError) throws -> Value {
        guard let tagByte = r.u8(), let tag = Tag(rawValue: tagByte) else { throw corrupt("unknown value tag") }
        switch tag {
        case .null: return .null
        case .string:
            guard let b = r.lengthPrefixed() else { throw corrupt("truncated string") }
            return .string(String(decoding: b, as: UTF8.self))
        case .integer:
            guard let v = r.svarint() else { throw corrupt("truncated integer") }
            return .integer(v)
        case .double:
            guard let v = r.u64() else { throw corrupt("truncated double") }
            return .double(Double(bitPattern: v))
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .date:
            guard let v = r.svarint() else { throw corrupt("truncated date") }
            return .date(v)
        case .bytes:
            guard let b = r.lengthPrefixed() else { throw corrupt("truncated bytes") }
            return .bytes(Data(b))
        case .uuid:
            guard let b = r.bytes(16) else { throw corrupt("truncated UUID") }
            return .uuid(ObjectID(bytes: b).uuid)
        case .reference:
            guard let b = r.bytes(16) else { throw corrupt("truncated reference") }
            return .reference(ObjectID(bytes: b))
        }
    }
}
