import Foundation
package import StrataLog

/// The binary form of a projection in a snapshot file's payload (layout in the Strata format
/// article): name and replica tables, applied sequences, schema events, then every object record
/// with its registers, sets and provenance — enough to continue exactly as a full replay would.
package enum ProjectionCodec {
    package static let version: UInt8 = 1

    package static func encode(_ p: Projection) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + p.records.count * 96)
        writeHeader(p, recordCount: p.records.count, &w)
        for (id, record) in p.records.sorted(by: { $0.key < $1.key }) { writeRecord(id, record, &w) }
        return w.bytes
    }

    /// The projection with each record as `keeping` gives it (`nil`: left out), in ID order —
    /// what a download mask makes of a snapshot.
    package static func encode(_ p: Projection, keeping: (ObjectID, ObjectRecord) -> ObjectRecord?) -> [UInt8] {
        let kept = p.records.sorted(by: { $0.key < $1.key }).compactMap { id, record in keeping(id, record).map { (id, $0) } }
        var w = ByteWriter(capacity: 64 + kept.count * 96)
        writeHeader(p, recordCount: kept.count, &w)
        for (id, record) in kept { writeRecord(id, record, &w) }
        return w.bytes
    }

    /// Everything before the objects, then the count of objects that follow (in ID order).
    static func writeHeader(_ p: Projection, recordCount: Int, _ w: inout ByteWriter) {
        w.u8(version)
        w.varint(UInt64(p.names.count))
        for name in p.names { w.lengthPrefixed(Array(name.utf8)) }
        w.varint(UInt64(p.replicas.count))
        for replica in p.replicas { w.raw(replica.bytes) }
        w.u64(p.maxHLC)
        w.varint(p.eventCount)
        let applied = p.applied.enumerated().filter { !$0.element.isEmpty }
        w.varint(UInt64(applied.count))
        for (replica, set) in applied {
            w.varint(UInt64(replica))
            w.varint(set.contiguous)
            w.varint(UInt64(set.above.count))
            for sequence in set.above.sorted() { w.varint(sequence) }
        }
        w.varint(UInt64(p.schemaEvents.count))
        for (ref, schema) in p.schemaEvents {
            writeRef(ref, &w)
            w.lengthPrefixed(Array(schema.jsonData()))
        }
        w.varint(UInt64(recordCount))
    }

    /// One object record (its name and replica indexes are the projection's).
    static func writeRecord(_ id: ObjectID, _ record: ObjectRecord, _ w: inout ByteWriter) {
        w.raw(id.bytes)
        w.varint(UInt64(record.entity))
        w.u8((record.inserted.isNone ? 0 : 1) | (record.deleted.isNone ? 0 : 2))
        if !record.inserted.isNone { writeRef(record.inserted, &w) }
        if !record.deleted.isNone { writeRef(record.deleted, &w) }
        w.varint(UInt64(record.fields.count))
        for slot in record.fields {
            w.varint(UInt64(slot.key))
            EventCodec.writeValue(slot.value, into: &w)
            writeRef(slot.ref, &w)
        }
        w.varint(UInt64(record.sets.count))
        for member in record.sets {
            w.varint(UInt64(member.key))
            w.raw(member.target.bytes)
            w.varint(UInt64(member.adds.count))
            for add in member.adds { writeRef(add, &w) }
            w.varint(UInt64(member.removedAdds.count))
            for removed in member.removedAdds {
                w.varint(UInt64(removed.replica))
                w.varint(removed.sequence)
            }
        }
    }

    package static func writeRef(_ ref: Ref, _ w: inout ByteWriter) {
        w.u64(ref.hlc)
        w.varint(ref.sequence)
        w.varint(UInt64(ref.replica))
    }

    /// - Throws: ``StoreError/Code/corruptSnapshot`` with the byte offset.
    package static func decode(_ bytes: [UInt8], into projection: Projection) throws {
        try bytes.withUnsafeBytes { raw in
            var d = SnapshotDecoder(r: ByteReader(raw))
            try d.decode(into: projection)
        }
    }
}

/// What a snapshot payload holds before its objects.
struct SnapshotHeader {
    var names: [String]
    var replicas: [ReplicaID]
    var applied: [AppliedSet]
    var schemaEvents: [(ref: Ref, schema: Schema)]
    var maxHLC: UInt64
    var eventCount: UInt64
    var recordCount: Int
    /// The byte offset of the first object record.
    var recordsOffset: Int
}

/// The snapshot payload reader. A struct with methods rather than nested functions: closures
/// capturing the mutable reader would box it and pay a dynamic exclusivity check per byte read.
struct SnapshotDecoder {
    var r: ByteReader
    var names: [String] = []
    var replicas: [ReplicaID] = []

    init(r: ByteReader) { self.r = r }

    func corrupt(_ what: String) -> StoreError {
        StoreError(.corruptSnapshot, "\(what) at byte \(r.offset) of the snapshot payload")
    }

    mutating func count(_ perItem: Int = 1) throws -> Int {
        guard let n = r.varint(), n <= UInt64(r.remaining / max(perItem, 1)) else { throw corrupt("bad count") }
        return Int(n)
    }

    mutating func name() throws -> UInt32 {
        guard let i = r.varint(), i < UInt64(names.count) else { throw corrupt("bad name index") }
        return UInt32(i)
    }

    mutating func replica() throws -> UInt32 {
        guard let i = r.varint(), i < UInt64(replicas.count) else { throw corrupt("bad replica index") }
        return UInt32(i)
    }

    mutating func ref() throws -> Ref {
        guard let hlc = r.u64(), let sequence = r.varint(), sequence >= 1, sequence <= Ref.maxSequence else {
            throw corrupt("bad event reference")
        }
        return Ref(hlc: hlc, sequence: sequence, replica: try replica())
    }

    /// Everything before the objects: version, name and replica tables, max HLC, events applied,
    /// applied sets, schema events.
    mutating func header() throws -> SnapshotHeader {
        guard r.u8() == ProjectionCodec.version else { throw corrupt("unknown projection snapshot version") }
        // Names and replicas are tables that references index into, and the projection looks them
        // up by value: a repeated one is damage (or a hostile upload), never something to trap on.
        var seenNames = Set<String>()
        for _ in 0..<(try count()) {
            guard let n = r.lengthPrefixed() else { throw corrupt("truncated name") }
            let name = String(decoding: n, as: UTF8.self)
            guard seenNames.insert(name).inserted else { throw corrupt("repeated name \"\(name)\"") }
            names.append(name)
        }
        var seenReplicas = Set<ReplicaID>()
        for _ in 0..<(try count(16)) {
            guard let b = r.bytes(16) else { throw corrupt("truncated replica") }
            let replica = ReplicaID(bytes: b)
            guard seenReplicas.insert(replica).inserted else { throw corrupt("repeated replica \(replica)") }
            replicas.append(replica)
        }
        guard let maxHLC = r.u64(), let eventCount = r.varint() else { throw corrupt("truncated header") }
        var applied = [AppliedSet](repeating: AppliedSet(), count: replicas.count)
        for _ in 0..<(try count(2)) {
            let replicaIndex = try replica()
            guard let contiguous = r.varint() else { throw corrupt("truncated applied set") }
            var set = AppliedSet(contiguous: contiguous, above: [])
            for _ in 0..<(try count()) {
                guard let sequence = r.varint() else { throw corrupt("truncated applied set") }
                set.above.insert(sequence)
            }
            applied[Int(replicaIndex)] = set
        }
        var schemaEvents: [(ref: Ref, schema: Schema)] = []
        for _ in 0..<(try count(9)) {
            let at = try ref()
            guard let json = r.lengthPrefixed(), let schema = try? JSONDecoder().decode(Schema.self, from: Data(json)) else {
                throw corrupt("bad schema")
            }
            schemaEvents.append((at, schema))
        }
        let recordCount = try count(19)
        return SnapshotHeader(names: names, replicas: replicas, applied: applied, schemaEvents: schemaEvents,
                              maxHLC: maxHLC, eventCount: eventCount, recordCount: recordCount, recordsOffset: r.offset)
    }

    /// One object record (the reader at its ID).
    mutating func record() throws -> (ObjectID, ObjectRecord) {
        guard let idBytes = r.bytes(16) else { throw corrupt("truncated record") }
        let id = ObjectID(bytes: idBytes)
        var record = ObjectRecord(entity: try name())
        guard let flags = r.u8(), flags & ~3 == 0 else { throw corrupt("bad record flags") }
        if flags & 1 != 0 { record.inserted = try ref() }
        if flags & 2 != 0 { record.deleted = try ref() }
        let fieldCount = try count(3)
        record.fields.reserveCapacity(fieldCount)
        for _ in 0..<fieldCount {
            let key = try name()
            let value = try EventCodec.readValue(&r, code: .corruptSnapshot, position: nil)
            record.fields.append(FieldSlot(key: key, value: value, ref: try ref()))
        }
        for _ in 0..<(try count(18)) {
            let key = try name()
            guard let target = r.bytes(16) else { throw corrupt("truncated set member") }
            var member = SetMember(key: key, target: ObjectID(bytes: target), adds: [], removedAdds: [])
            for _ in 0..<(try count(10)) { member.adds.append(try ref()) }
            for _ in 0..<(try count(2)) {
                let replicaIndex = try replica()
                guard let sequence = r.varint() else { throw corrupt("truncated removal") }
                member.removedAdds.append(AddKey(replica: replicaIndex, sequence: sequence))
            }
            record.sets.append(member)
        }
        return (id, record)
    }

    mutating func decode(into projection: Projection) throws {
        let header = try header()
        var records = RecordTable()
        records.reserveCapacity(header.recordCount)
        // The reverse indexes are built in the same pass; the entities' members after it.
        var referrers: [ObjectID: Set<Projection.Referrer>] = [:]
        var memberships: [ObjectID: Set<Projection.Referrer>] = [:]
        for _ in 0..<header.recordCount {
            let (id, record) = try record()
            for slot in record.fields {
                if case .reference(let target) = slot.value { referrers[target, default: []].insert(.init(source: id, key: slot.key)) }
            }
            for member in record.sets { memberships[member.target, default: []].insert(.init(source: id, key: member.key)) }
            let place = records.slot(of: id)
            guard place.position == nil else { throw corrupt("object \(id) has two records") }
            records.insert(id, record, at: place)
        }
        guard r.remaining == 0 else { throw corrupt("\(r.remaining) trailing bytes") }
        projection.load(names: header.names, replicas: header.replicas, records: records, applied: header.applied,
                        schemaEvents: header.schemaEvents, maxHLC: header.maxHLC, eventCount: header.eventCount,
                        members: EntityMembers.build(from: records), referrers: referrers, memberships: memberships)
    }
}
