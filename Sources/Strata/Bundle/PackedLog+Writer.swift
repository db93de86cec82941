import StrataCore
import StrataLog

extension PackedLog {
    /// Packs a log as ``LogCopy`` walks it; ``finish()`` gives the bytes.
    struct Writer: LogCopySink {
        private var logID: [UInt8] = Array(repeating: 0, count: 16)
        private var segments: [(first: UInt64, created: Int64, records: Int)] = []
        private var snapshots: [(position: UInt64, created: Int64, length: Int)] = []
        private var snapshotPayloads: [[UInt8]] = []
        private var expectedPosition: UInt64 = 0

        private var structure = ByteWriter()
        private var objects = BitWriter()
        private var values = BitWriter()
        private var literals = ByteWriter()

        private var objectTable = PackTable<UInt128>()
        private var replicaTable = PackTable<UInt128>()
        /// By the name's bytes: `String` equality would make canonically equivalent names
        /// (é precomposed and decomposed) one entry, and unpack one as the other.
        private var nameTable: [[UInt8]: Int] = [:]
        /// Entry and snapshot bytes, as the reader will count them.
        private var unpackedBytes: UInt64 = 0
        /// Per tag: values up to 23 bytes by their bytes in place, longer ones in a dictionary;
        /// one numbering for both.
        private var shortValues = Array(repeating: PackTable<ShortValue>(), count: PackedLog.tabled.count)
        private var longValues: [[[UInt8]: Int]] = Array(repeating: [:], count: PackedLog.tabled.count)
        private var valueCounts = Array(repeating: 0, count: PackedLog.tabled.count)
        private var nextSequence: [ReplicaID: UInt64] = [:]
        private var previousTimestamp: Int64 = 0
        private var previousHLC: UInt64 = 0

        private var check = EntryBuilder()
        private var scratch = ByteWriter()
        /// Entries packed as transactions and kept whole (for a test of the fallback).
        private(set) var packedEntries = 0
        private(set) var wholeEntries = 0

        /// Every entry whole (no tables): for a log that would otherwise unpack to more than a
        /// reader takes from its packed size (``PackedLog/maxUnpacked(packedBytes:)``).
        let wholeOnly: Bool
        /// Entry and snapshot bytes the packed log unpacks to.
        var unpacked: UInt64 { unpackedBytes }

        init(wholeOnly: Bool = false) {
            self.wholeOnly = wholeOnly
        }

        mutating func segment(logID: LogID, firstPosition: LogPosition, created: LogTimestamp) throws {
            if segments.isEmpty {
                self.logID = logID.bytes
            } else {
                guard firstPosition == expectedPosition else {
                    throw LogError(.positionMismatch, "a segment starts at position \(firstPosition), expected \(expectedPosition)")
                }
            }
            segments.append((firstPosition, created, 0))
            expectedPosition = firstPosition
        }

        mutating func record(firstPosition: LogPosition, entries: [LogEntry]) throws {
            guard !segments.isEmpty, firstPosition == expectedPosition, !entries.isEmpty else {
                throw LogError(.positionMismatch, "a record at position \(firstPosition), expected \(expectedPosition)")
            }
            segments[segments.count - 1].records += 1
            expectedPosition += UInt64(entries.count)
            structure.varint(UInt64(entries.count))
            for entry in entries {
                unpackedBytes += UInt64(entry.payload.count)
                structure.zigzag(UInt64(bitPattern: entry.timestamp) &- UInt64(bitPattern: previousTimestamp))
                previousTimestamp = entry.timestamp
                if !wholeOnly, let decoded = try? EventCodec.decodeRaw(entry.payload, position: nil), Self.fitsLimits(decoded),
                   EntryBuilder.rebuild(decoded, into: &check) == entry.payload {
                    structure.u8(PackedLog.packedTransaction)
                    try pack(decoded)
                    packedEntries += 1
                } else {
                    structure.u8(PackedLog.rawEntry)
                    literals.lengthPrefixed(entry.payload)
                    wholeEntries += 1
                }
            }
        }

        mutating func snapshot(position: LogPosition, created: LogTimestamp, payload: [UInt8]) throws {
            unpackedBytes += UInt64(payload.count)
            snapshots.append((position, created, payload.count))
            snapshotPayloads.append(payload)
        }

        /// The packed log.
        mutating func finish() -> [UInt8] {
            // Snapshots in position order (a log lists them newest first).
            let order = snapshots.indices.sorted { snapshots[$0].position < snapshots[$1].position }
            snapshots = order.map { snapshots[$0] }
            for i in order { literals.raw(snapshotPayloads[i]) }
            snapshotPayloads = []
            var w = ByteWriter()
            w.raw(PackedLog.magic)
            w.u16(PackedLog.version)
            w.u16(0)
            w.raw(logID)
            w.u64(unpackedBytes)
            w.varint(UInt64(segments.count))
            for s in segments {
                w.varint(s.first)
                w.svarint(s.created)
                w.varint(UInt64(s.records))
            }
            w.varint(UInt64(snapshots.count))
            for s in snapshots {
                w.varint(s.position)
                w.svarint(s.created)
                w.varint(UInt64(s.length))
            }
            let streams = [structure.bytes, objects.finish(), values.finish(), literals.bytes].map(PackStream.encode)
            for stream in streams { w.raw(stream.table) }
            for stream in streams { w.raw(stream.data) }
            return w.bytes
        }

        // MARK: - One transaction

        /// Whether the reader's per-transaction limits take it (else it is kept whole).
        static func fitsLimits(_ t: DecodedTransaction) -> Bool {
            t.events.count <= PackedLog.maxEvents && t.names.count <= PackedLog.maxNames && t.replicas.count <= PackedLog.maxEvents
                && t.names.allSatisfy { $0.utf8.count <= PackedLog.maxNameBytes }
                && t.events.allSatisfy { $0.count <= Int32(PackedLog.maxEvents) }
        }

        /// A table the reader would refuse to grow: the store is too large to bundle.
        private static func full(_ count: Int, _ limit: Int, _ what: String) throws {
            guard count < limit else { throw StoreError(.invalidArgument, "the store has more than \(limit) distinct \(what): too many to bundle") }
        }

        private mutating func replica(_ id: ReplicaID) throws {
            try Self.full(replicaTable.count, PackedLog.maxTable, "replicas")
            if let index = replicaTable.index(of: id.rawValue, orInsert: replicaTable.count) {
                structure.varint(UInt64(index + 1))
            } else {
                structure.varint(0)
                literals.id(id)
            }
        }

        private mutating func object(_ id: ObjectID) throws {
            try Self.full(objectTable.count, PackedLog.maxTable, "objects")
            let width = referenceWidth(objectTable.count)
            if let index = objectTable.index(of: id.rawValue, orInsert: objectTable.count) {
                objects.write(UInt64(index + 1), width: width)
            } else {
                objects.write(0, width: width)
                literals.id(id)
            }
        }

        private mutating func value(_ value: Value) throws {
            scratch.bytes.removeAll(keepingCapacity: true)
            EventCodec.writeValue(value, into: &scratch)
            let tag = scratch.bytes[0]
            structure.u8(tag)
            if case .reference(let target) = value { return try object(target) }
            guard let table = PackedLog.table(of: tag) else {
                // Null and bools are their tag; an asset is stored whole.
                if tag == EventCodec.Tag.asset.rawValue { literals.lengthPrefixed(scratch.bytes[1...]) }
                return
            }
            let payload = scratch.bytes[1...]
            try Self.full(valueCounts[table], PackedLog.maxTable, "values of one type")
            let width = referenceWidth(valueCounts[table])
            let found: Int?
            if let short = ShortValue(payload) {
                found = shortValues[table].index(of: short, orInsert: valueCounts[table])
            } else {
                found = longValues[table][Array(payload)]
                if found == nil { longValues[table][Array(payload)] = valueCounts[table] }
            }
            if let found {
                values.write(UInt64(found + 1), width: width)
                return
            }
            values.write(0, width: width)
            valueCounts[table] += 1
            switch value {
            case .string(let s):
                if let hash = Self.redactedHash(s) {
                    literals.varint(0)
                    literals.raw(hash)
                } else {
                    literals.varint(UInt64(s.utf8.count) + 1)
                    literals.raw(s.utf8)
                }
            default:
                literals.raw(payload)  // the value's own encoding: svarint, u64, length-prefixed bytes, 16 bytes
            }
        }

        /// The 8 bytes of a redacted string (`h:` and 16 lower-case hex digits), which the
        /// literals hold instead of its 18 characters.
        static func redactedHash(_ s: String) -> [UInt8]? {
            let utf8 = Array(s.utf8)
            guard utf8.count == 18, utf8[0] == UInt8(ascii: "h"), utf8[1] == UInt8(ascii: ":") else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(8)
            for i in stride(from: 2, to: 18, by: 2) {
                guard let high = Self.nibble(utf8[i]), let low = Self.nibble(utf8[i + 1]) else { return nil }
                out.append(high << 4 | low)
            }
            return out
        }

        private static func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }

        private mutating func pack(_ t: DecodedTransaction) throws {
            try replica(t.replica)
            structure.zigzag(t.firstSequence &- (nextSequence[t.replica] ?? 1))
            nextSequence[t.replica] = t.firstSequence &+ UInt64(t.events.count)
            structure.varint(UInt64(t.events.count))
            structure.varint(UInt64(t.names.count))
            for name in t.names {
                let bytes = Array(name.utf8)
                if let index = nameTable[bytes] {
                    structure.varint(UInt64(index + 1))
                } else {
                    try Self.full(nameTable.count, PackedLog.maxNames, "names")
                    structure.varint(0)
                    literals.lengthPrefixed(bytes)
                    nameTable[bytes] = nameTable.count
                }
            }
            structure.varint(UInt64(t.replicas.count - 1))
            for r in t.replicas.dropFirst() { try replica(r) }
            for e in t.events {
                structure.u8(e.kind.rawValue)
                structure.zigzag(e.hlc &- previousHLC)
                previousHLC = e.hlc
                switch e.kind {
                case .insert, .update:
                    structure.varint(UInt64(e.entity))
                    try object(e.object)
                    structure.varint(UInt64(e.count))
                    for field in t.fields[Int(e.start)..<Int(e.start + e.count)] {
                        structure.varint(UInt64(field.name))
                        try value(field.value)
                    }
                case .delete:
                    structure.varint(UInt64(e.entity))
                    try object(e.object)
                case .add, .remove:
                    structure.varint(UInt64(e.entity))
                    try object(e.object)
                    structure.varint(UInt64(e.relationship))
                    try object(e.target)
                    if e.kind == .remove {
                        structure.varint(UInt64(e.count))
                        for add in t.adds[Int(e.start)..<Int(e.start + e.count)] {
                            structure.varint(UInt64(add.replica))
                            structure.varint(add.sequence)
                        }
                    }
                case .schema:
                    literals.lengthPrefixed(t.schemaJSON[Int(e.start)])
                case .withheld:
                    break
                }
            }
        }
    }
}
