import StrataCore
import StrataLog

/// A transaction entry written byte for byte as ``EventCodec`` lays it out (the event format
/// article), from its parts: what a packed log's reader builds each entry with, and what its
/// writer checks an entry against before packing it (an entry that does not come out the same,
/// such as one with a name that is not valid UTF-8, is kept whole instead).
struct EntryBuilder {
    var replica = ReplicaID(rawValue: 0)
    var firstSequence: UInt64 = 0
    var names = ByteWriter()
    var nameCount = 0
    var replicas: [ReplicaID] = []
    /// The events' bytes after their kind and HLC.
    var body = ByteWriter()
    var heads: [(kind: UInt8, hlc: UInt64, start: Int)] = []

    mutating func reset(replica: ReplicaID, firstSequence: UInt64) {
        self.replica = replica
        self.firstSequence = firstSequence
        names.bytes.removeAll(keepingCapacity: true)
        nameCount = 0
        replicas.removeAll(keepingCapacity: true)
        body.bytes.removeAll(keepingCapacity: true)
        heads.removeAll(keepingCapacity: true)
    }

    /// Bytes the entry holds for certain so far (its header and the events' kinds and HLCs
    /// come on top).
    var size: Int { names.bytes.count + 16 * replicas.count + body.bytes.count }

    mutating func name(_ utf8: some Collection<UInt8>) {
        names.lengthPrefixed(utf8)
        nameCount += 1
    }

    mutating func begin(kind: UInt8, hlc: UInt64) {
        heads.append((kind, hlc, body.bytes.count))
    }

    /// The entry: the smallest HLC is the base the others are deltas from (0 without events).
    func finish() -> [UInt8] {
        var base = UInt64.max
        for head in heads where head.hlc < base { base = head.hlc }
        if heads.isEmpty { base = 0 }
        var w = ByteWriter(capacity: 40 + names.bytes.count + 16 * replicas.count + 11 * heads.count + body.bytes.count)
        w.u8(EventCodec.formatVersion)
        w.id(replica)
        w.varint(firstSequence)
        w.varint(UInt64(heads.count))
        w.u64(base)
        w.varint(UInt64(nameCount))
        w.raw(names.bytes)
        w.varint(UInt64(replicas.count))
        for r in replicas { w.id(r) }
        body.bytes.withUnsafeBufferPointer { bytes in
            for (i, head) in heads.enumerated() {
                w.u8(head.kind)
                w.varint(head.hlc - base)
                let end = i + 1 < heads.count ? heads[i + 1].start : bytes.count
                w.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[head.start..<end]))
            }
        }
        return w.bytes
    }

    /// The entry a decoded transaction encodes to when written back from its parts, as they are
    /// (names and replicas in their tables' order, fields and adds in theirs).
    static func rebuild(_ t: DecodedTransaction, into b: inout EntryBuilder) -> [UInt8] {
        b.reset(replica: t.replica, firstSequence: t.firstSequence)
        for name in t.names { b.name(Array(name.utf8)) }
        b.replicas.append(contentsOf: t.replicas.dropFirst())
        for e in t.events {
            b.begin(kind: e.kind.rawValue, hlc: e.hlc)
            switch e.kind {
            case .insert, .update:
                b.body.varint(UInt64(e.entity))
                b.body.id(e.object)
                b.body.varint(UInt64(e.count))
                for field in t.fields[Int(e.start)..<Int(e.start + e.count)] {
                    b.body.varint(UInt64(field.name))
                    EventCodec.writeValue(field.value, into: &b.body)
                }
            case .delete:
                b.body.varint(UInt64(e.entity))
                b.body.id(e.object)
            case .add, .remove:
                b.body.varint(UInt64(e.entity))
                b.body.id(e.object)
                b.body.varint(UInt64(e.relationship))
                b.body.id(e.target)
                if e.kind == .remove {
                    b.body.varint(UInt64(e.count))
                    for add in t.adds[Int(e.start)..<Int(e.start + e.count)] {
                        b.body.varint(UInt64(add.replica))
                        b.body.varint(add.sequence)
                    }
                }
            case .schema:
                b.body.lengthPrefixed(t.schemaJSON[Int(e.start)])
            case .withheld:
                break
            }
        }
        return b.finish()
    }
}
