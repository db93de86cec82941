import Foundation
package import StrataLog

/// The binary encoding of a transaction as one log entry (layout in the Strata format article).
///
/// Compact by construction: entity, attribute and relationship names are stored once per
/// transaction in a name table and referred to by index; integers are varints; HLCs are deltas
/// from the transaction's smallest one; sequence numbers are implied by order.
package enum EventCodec {
    package static let formatVersion: UInt8 = 1

    package enum Kind: UInt8, Sendable {
        case insert = 1, update, delete, add, remove, schema
        /// An event the server left out of a pull for a device's download mask: it keeps its
        /// sequence (and HLC) so that nothing after it is renumbered, and says nothing else. Only
        /// a server writes it, only into a pull's answer; a push holding one is refused.
        case withheld
    }

    package enum Tag: UInt8 {
        case null = 0, string, integer, double, boolFalse, boolTrue, date, bytes, uuid, reference, asset
    }

    package static func encode(_ transaction: TransactionRecord) -> [UInt8] {
        var encoder = TransactionEncoder(replica: transaction.replica, capacity: 64 * transaction.events.count)
        var ids: [String: UInt32] = [:]
        for event in transaction.events {
            encoder.append(event) { name in
                if let id = ids[name] { return id }
                let id = UInt32(ids.count)
                ids[name] = id
                return id
            }
        }
        return encoder.finish(firstSequence: transaction.events.first?.id.sequence ?? 0)
    }

    package static func writeValue(_ value: Value, into w: inout ByteWriter) {
        switch value {
        case .null: w.u8(Tag.null.rawValue)
        case .string(let v):
            w.u8(Tag.string.rawValue)
            w.string(v)
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
            withUnsafeBytes(of: v.uuid) { w.bytes.append(contentsOf: $0) }  // the UUID's 16 bytes in order
        case .reference(let v):
            w.u8(Tag.reference.rawValue)
            w.id(v)
        case .asset(let v):
            w.u8(Tag.asset.rawValue)
            v.write(into: &w)
        }
    }

    /// Decodes one log entry into a ``TransactionRecord``. `position` is only for the error
    /// message.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` naming the position and byte offset.
    package static func decode(_ bytes: [UInt8], position: UInt64?) throws -> TransactionRecord {
        let raw = try decodeRaw(bytes, position: position)
        var events: [Event] = []
        events.reserveCapacity(raw.events.count)
        for (index, e) in raw.events.enumerated() {
            let change: Change
            switch e.kind {
            case .insert, .update:
                var fields: [String: Value] = [:]
                fields.reserveCapacity(Int(e.count))
                for field in raw.fields[Int(e.start)..<Int(e.start + e.count)] { fields[raw.names[Int(field.name)]] = field.value }
                change = e.kind == .insert
                    ? .insert(entity: raw.names[Int(e.entity)], object: e.object, fields: fields)
                    : .update(entity: raw.names[Int(e.entity)], object: e.object, fields: fields)
            case .delete:
                change = .delete(entity: raw.names[Int(e.entity)], object: e.object)
            case .add:
                change = .add(entity: raw.names[Int(e.entity)], object: e.object, relationship: raw.names[Int(e.relationship)], target: e.target)
            case .remove:
                let adds = raw.adds[Int(e.start)..<Int(e.start + e.count)].map { EventID(replica: raw.replicas[Int($0.replica)], sequence: $0.sequence) }
                change = .remove(entity: raw.names[Int(e.entity)], object: e.object, relationship: raw.names[Int(e.relationship)], target: e.target, adds: adds)
            case .schema:
                change = .schema(raw.schemas[Int(e.start)])
            case .withheld:
                change = .withheld
            }
            events.append(Event(id: EventID(replica: raw.replica, sequence: raw.firstSequence + UInt64(index)), hlc: HLC(rawValue: e.hlc), change: change))
        }
        return TransactionRecord(replica: raw.replica, events: events)
    }

    /// Decodes one log entry into its tables and events without building a dictionary or a
    /// string per field: what replay applies directly.
    package static func decodeRaw(_ bytes: [UInt8], position: UInt64?) throws -> DecodedTransaction {
        try bytes.withUnsafeBytes { raw in
            var d = TransactionDecoder(r: ByteReader(raw), position: position)
            return try d.decode()
        }
    }

    package static func readValue(_ r: inout ByteReader, code: StoreError.Code = .corruptEvent, position: UInt64?) throws -> Value {
        func corrupt(_ what: String, _ offset: Int) -> StoreError {
            StoreError(code, "\(what) at byte \(offset)", position: position)
        }
        guard let tagByte = r.u8(), let tag = Tag(rawValue: tagByte) else { throw corrupt("unknown value tag", r.offset) }
        switch tag {
        case .null: return .null
        case .string:
            guard let b = r.lengthPrefixed() else { throw corrupt("truncated string", r.offset) }
            return .string(String(decoding: b, as: UTF8.self))
        case .integer:
            guard let v = r.svarint() else { throw corrupt("truncated integer", r.offset) }
            return .integer(v)
        case .double:
            guard let v = r.u64() else { throw corrupt("truncated double", r.offset) }
            return .double(Double(bitPattern: v))
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .date:
            guard let v = r.svarint() else { throw corrupt("truncated date", r.offset) }
            return .date(v)
        case .bytes:
            guard let b = r.lengthPrefixed() else { throw corrupt("truncated bytes", r.offset) }
            return .bytes(Data(b))
        case .uuid:
            guard let b = r.bytes(16) else { throw corrupt("truncated UUID", r.offset) }
            return .uuid(ObjectID(bytes: b).uuid)
        case .reference:
            guard let b = r.bytes(16) else { throw corrupt("truncated reference", r.offset) }
            return .reference(ObjectID(bytes: b))
        case .asset:
            switch Asset.read(&r) {
            case .success(let asset): return .asset(asset)
            case .failure(let problem): throw corrupt(problem.message, r.offset)
            }
        }
    }
}

/// Writes a transaction's encoding event by event, as a transaction makes them: what
/// ``EventCodec/encode(_:)`` is made of, and what a store's transaction appends its events to, so
/// that committing needs no second pass over them.
///
/// Names are identified by the caller's numbers (a store's interned name IDs) and get their index
/// in the name table on first use, so the table comes out in order of first appearance. The HLC of
/// each event is written at the end, as a delta from the smallest.
package struct TransactionEncoder {
    package let replica: ReplicaID
    private var names: [String] = []
    private var nameBytes = 0
    /// Caller's name ID → index in `names` + 1 (0: not yet in the table).
    private var nameSlots: [UInt32] = []
    /// The replica table (index 0 is the authoring replica).
    private var replicas: [ReplicaID]
    private var replicaIndex: [ReplicaID: Int] = [:]
    /// The events' bytes after their kind and HLC.
    private var body: ByteWriter
    private var heads: [(kind: EventCodec.Kind, hlc: UInt64, start: Int)] = []

    package init(replica: ReplicaID, capacity: Int = 0) {
        self.replica = replica
        replicas = [replica]
        body = ByteWriter(capacity: capacity)
    }

    package var eventCount: Int { heads.count }

    /// The index of the name with ID `id` in the name table (`name` is read only on first use).
    package mutating func name(_ id: UInt32, _ name: @autoclosure () -> String) -> UInt64 {
        let slot = Int(id)
        if slot < nameSlots.count {
            let index = nameSlots[slot]
            if index != 0 { return UInt64(index - 1) }
        } else {
            nameSlots.append(contentsOf: repeatElement(0, count: slot + 1 - nameSlots.count))
        }
        let text = name()
        names.append(text)
        nameBytes += text.utf8.count + 2
        nameSlots[slot] = UInt32(names.count)
        return UInt64(names.count - 1)
    }

    private mutating func replicaIndex(_ r: ReplicaID) -> Int {
        if r == replica { return 0 }
        if let i = replicaIndex[r] { return i }
        replicaIndex[r] = replicas.count
        replicas.append(r)
        return replicas.count - 1
    }

    /// Starts an event: its kind and HLC (written by ``finish(firstSequence:)``).
    package mutating func begin(_ kind: EventCodec.Kind, hlc: UInt64) {
        heads.append((kind, hlc, body.bytes.count))
    }

    /// An insert's entity and object and its field count; the fields follow with ``field(_:_:_:)``
    /// in the order of their names (as Swift's `String` sorts them).
    package mutating func insert(hlc: UInt64, entity: UInt32, _ entityName: @autoclosure () -> String, object: ObjectID, fieldCount: Int) {
        begin(.insert, hlc: hlc)
        body.varint(name(entity, entityName()))
        body.id(object)
        body.varint(UInt64(fieldCount))
    }

    package mutating func field(_ key: UInt32, _ keyName: @autoclosure () -> String, _ value: Value) {
        body.varint(name(key, keyName()))
        EventCodec.writeValue(value, into: &body)
    }

    /// Appends any event; `id` gives each name's ID.
    package mutating func append(_ event: Event, id: (String) -> UInt32) {
        let hlc = event.hlc.rawValue
        switch event.change {
        case .insert(let entity, let object, let fields), .update(let entity, let object, let fields):
            if case .insert = event.change { begin(.insert, hlc: hlc) } else { begin(.update, hlc: hlc) }
            body.varint(name(id(entity), entity))
            body.id(object)
            body.varint(UInt64(fields.count))
            for (key, value) in fields.sorted(by: { $0.key < $1.key }) { field(id(key), key, value) }
        case .delete(let entity, let object):
            begin(.delete, hlc: hlc)
            body.varint(name(id(entity), entity))
            body.id(object)
        case .add(let entity, let object, let relationship, let target):
            begin(.add, hlc: hlc)
            body.varint(name(id(entity), entity))
            body.id(object)
            body.varint(name(id(relationship), relationship))
            body.id(target)
        case .remove(let entity, let object, let relationship, let target, let adds):
            begin(.remove, hlc: hlc)
            body.varint(name(id(entity), entity))
            body.id(object)
            body.varint(name(id(relationship), relationship))
            body.id(target)
            body.varint(UInt64(adds.count))
            for add in adds.sorted() {
                body.varint(UInt64(replicaIndex(add.replica)))
                body.varint(add.sequence)
            }
        case .schema(let schema):
            begin(.schema, hlc: hlc)
            body.lengthPrefixed(schema.jsonData())
        case .withheld:
            begin(.withheld, hlc: hlc)
        }
    }

    /// The encoding (its events' sequences start at `firstSequence`; 0 when there are none).
    package func finish(firstSequence: UInt64) -> [UInt8] {
        var base = UInt64.max
        for head in heads where head.hlc < base { base = head.hlc }
        if heads.isEmpty { base = 0 }
        var w = ByteWriter(capacity: 48 + nameBytes + 16 * replicas.count + 11 * heads.count + body.bytes.count)
        w.u8(EventCodec.formatVersion)
        w.id(replica)
        w.varint(firstSequence)
        w.varint(UInt64(heads.count))
        w.u64(base)
        w.varint(UInt64(names.count))
        for n in names { w.string(n) }
        w.varint(UInt64(replicas.count - 1))
        for r in replicas.dropFirst() { w.id(r) }
        body.bytes.withUnsafeBufferPointer { bytes in
            for (i, head) in heads.enumerated() {
                w.u8(head.kind.rawValue)
                w.varint(head.hlc - base)
                let end = i + 1 < heads.count ? heads[i + 1].start : bytes.count
                w.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[head.start..<end]))
            }
        }
        return w.bytes
    }
}

extension ByteWriter {
    /// A 128-bit identifier's 16 big-endian bytes (``Identifier128/bytes``), without building them.
    package mutating func id<ID: Identifier128>(_ id: ID) {
        let raw = id.rawValue
        u64(UInt64(truncatingIfNeeded: raw >> 64).byteSwapped)
        u64(UInt64(truncatingIfNeeded: raw).byteSwapped)
    }

    /// A string's UTF-8 bytes, length-prefixed (as `lengthPrefixed(Array(s.utf8))`).
    package mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { lengthPrefixed($0) }
    }
}

/// A transaction decoded into tables: names and replicas by index, fields and adds in shared
/// arrays that events point into.
package struct DecodedTransaction: Sendable {
    package var replica: ReplicaID
    package var firstSequence: UInt64
    package var names: [String] = []
    /// Index 0 is the authoring replica.
    package var replicas: [ReplicaID] = []
    package var events: [RawEvent] = []
    package var fields: [RawField] = []
    package var adds: [RawAdd] = []
    package var schemas: [Schema] = []
    /// Each schema's JSON as stored (``schemas`` in the same order): what its fingerprint is of.
    package var schemaJSON: [[UInt8]] = []

    package init(replica: ReplicaID, firstSequence: UInt64) {
        self.replica = replica
        self.firstSequence = firstSequence
    }
}

package struct RawEvent: Sendable {
    package var kind: EventCodec.Kind
    package var hlc: UInt64
    package var entity: Int32 = 0
    package var object = ObjectID(rawValue: 0)
    package var relationship: Int32 = 0
    package var target = ObjectID(rawValue: 0)
    /// Into `fields` (insert, update), `adds` (remove) or `schemas` (schema).
    package var start: Int32 = 0
    package var count: Int32 = 0
}

package struct RawField: Sendable {
    package var name: Int32
    package var value: Value
}

package struct RawAdd: Sendable {
    package var replica: Int32
    package var sequence: UInt64
}

/// Reads a transaction entry. A struct with methods rather than nested functions: closures
/// capturing the mutable reader would box it and pay a dynamic exclusivity check per read.
private struct TransactionDecoder {
    var r: ByteReader
    let position: UInt64?
    var nameCount = 0

    func corrupt(_ what: String) -> StoreError {
        StoreError(.corruptEvent, "\(what) at byte \(r.offset) of the entry", position: position)
    }

    mutating func name() throws -> Int32 {
        guard let i = r.varint(), i < UInt64(nameCount) else { throw corrupt("bad name index") }
        return Int32(i)
    }

    mutating func id() throws -> ObjectID {
        guard let b = r.bytes(16) else { throw corrupt("truncated object ID") }
        return ObjectID(bytes: b)
    }

    mutating func decode() throws -> DecodedTransaction {
        guard let version = r.u8() else { throw corrupt("empty entry") }
        guard version == EventCodec.formatVersion else { throw corrupt("unknown event format version \(version)") }
        guard let replicaBytes = r.bytes(16), let first = r.varint(), let count = r.varint(), let base = r.u64(),
              let names = r.varint(), names <= UInt64(r.remaining)
        else { throw corrupt("truncated transaction header") }
        guard first >= 1, count <= UInt64(r.remaining), first <= Ref.maxSequence - count else {
            throw corrupt("sequence numbers \(first)+\(count) out of range")
        }
        var t = DecodedTransaction(replica: ReplicaID(bytes: replicaBytes), firstSequence: first)
        t.names.reserveCapacity(Int(names))
        for _ in 0..<names {
            guard let n = r.lengthPrefixed() else { throw corrupt("truncated name table") }
            t.names.append(String(decoding: n, as: UTF8.self))
        }
        nameCount = t.names.count
        guard let extraReplicas = r.varint(), extraReplicas <= UInt64(r.remaining / 16) else { throw corrupt("bad replica table") }
        t.replicas = [t.replica]
        for _ in 0..<extraReplicas {
            guard let b = r.bytes(16) else { throw corrupt("truncated replica table") }
            t.replicas.append(ReplicaID(bytes: b))
        }
        t.events.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let kindByte = r.u8(), let kind = EventCodec.Kind(rawValue: kindByte) else { throw corrupt("unknown event kind") }
            guard let delta = r.varint(), delta <= UInt64.max - base else { throw corrupt("bad timestamp") }
            var e = RawEvent(kind: kind, hlc: base + delta)
            switch kind {
            case .insert, .update:
                e.entity = try name()
                e.object = try id()
                guard let fieldCount = r.varint(), fieldCount <= UInt64(r.remaining) else { throw corrupt("bad field count") }
                e.start = Int32(t.fields.count)
                e.count = Int32(fieldCount)
                for _ in 0..<fieldCount {
                    let key = try name()
                    t.fields.append(RawField(name: key, value: try EventCodec.readValue(&r, position: position)))
                }
            case .delete:
                e.entity = try name()
                e.object = try id()
            case .add:
                e.entity = try name()
                e.object = try id()
                e.relationship = try name()
                e.target = try id()
            case .remove:
                e.entity = try name()
                e.object = try id()
                e.relationship = try name()
                e.target = try id()
                guard let addCount = r.varint(), addCount <= UInt64(r.remaining) else { throw corrupt("bad add count") }
                e.start = Int32(t.adds.count)
                e.count = Int32(addCount)
                for _ in 0..<addCount {
                    guard let ri = r.varint(), ri < UInt64(t.replicas.count), let seq = r.varint() else { throw corrupt("bad add reference") }
                    t.adds.append(RawAdd(replica: Int32(ri), sequence: seq))
                }
            case .schema:
                guard let json = r.lengthPrefixed() else { throw corrupt("truncated schema") }
                guard let schema = try? JSONDecoder().decode(Schema.self, from: Data(json)) else { throw corrupt("schema JSON does not decode") }
                e.start = Int32(t.schemas.count)
                t.schemas.append(schema)
                t.schemaJSON.append(Array(json))
            case .withheld:
                break
            }
            t.events.append(e)
        }
        guard r.remaining == 0 else { throw corrupt("\(r.remaining) trailing bytes") }
        return t
    }
}
