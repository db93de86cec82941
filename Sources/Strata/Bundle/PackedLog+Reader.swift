import StrataCore
import StrataLog

extension PackedLog {
    /// Unpacks `bytes` into `sink`, checking everything on the way: a packed log from anyone is
    /// refused with the reason and the place (``PackError``), never trusted.
    static func unpack<Sink: LogCopySink>(_ bytes: [UInt8], into sink: inout Sink) throws {
        var reader = try Reader(bytes)
        try reader.run(into: &sink)
    }

    struct Reader {
        private var segments: [(first: UInt64, created: Int64, records: Int)] = []
        private var snapshots: [(position: UInt64, created: Int64, length: Int)] = []
        private let logID: LogID
        /// What the header says the log unpacks to, and what is left of it.
        private let declared: UInt64
        private var left: UInt64
        private var structure: PackStreamReader
        private var objects: PackStreamReader
        private var values: PackStreamReader
        private var literals: PackStreamReader

        private var objectTable: [ObjectID] = []
        private var replicaTable: [ReplicaID] = []
        private var nameTable: [[UInt8]] = []
        /// Per tag, every value's encoded payload back to back, and where each starts (one
        /// buffer per tag, not an array per value: a million values were a million retains).
        private var valueBytes: [[UInt8]] = Array(repeating: [], count: PackedLog.tabled.count)
        private var valueStarts: [[Int]] = Array(repeating: [0], count: PackedLog.tabled.count)
        private var nextSequence: [ReplicaID: UInt64] = [:]
        private var previousTimestamp: Int64 = 0
        private var previousHLC: UInt64 = 0
        private var builder = EntryBuilder()

        init(_ bytes: [UInt8]) throws {
            func bad(_ why: String, _ at: Int) -> PackError { PackError(message: "\(why) (at byte \(at))") }
            let header: (logID: [UInt8], declared: UInt64, segments: [(UInt64, Int64, Int)], snapshots: [(UInt64, Int64, Int)], tables: [[PackStreamReader.Chunk]])
            header = try bytes.withUnsafeBytes { raw in
                var r = ByteReader(raw)
                guard let magic = r.bytes(8), Array(magic) == PackedLog.magic else { throw bad("not a packed log (no STRATALP)", 0) }
                guard let version = r.u16(), let reserved = r.u16() else { throw bad("truncated header", r.offset) }
                guard version == PackedLog.version else { throw bad("packed log version \(version); this reader knows version \(PackedLog.version)", 8) }
                guard reserved == 0 else { throw bad("reserved bits set", 10) }
                guard let id = r.bytes(16), let declared = r.u64() else { throw bad("truncated header", r.offset) }
                // A small file may not unpack to a huge log (see `maxExpansion`).
                let allowed = PackedLog.maxUnpacked(packedBytes: bytes.count)
                guard declared <= allowed else { throw bad("it claims to unpack to \(declared) bytes; a packed log of \(bytes.count) bytes unpacks to at most \(allowed)", 28) }
                // Each count is bounded by the bytes left (every item takes at least 3), so a
                // claim cannot make the reader allocate more than the file justifies.
                guard let segmentCount = r.varint(), segmentCount <= UInt64(r.remaining / 3) else { throw bad("bad segment count", r.offset) }
                var segments: [(UInt64, Int64, Int)] = []
                for i in 0..<Int(segmentCount) {
                    let at = r.offset
                    guard let first = r.varint(), let created = r.svarint(), let records = r.varint(), records <= UInt64(UInt32.max) else { throw bad("truncated segment \(i)", at) }
                    segments.append((first, created, Int(records)))
                }
                guard let snapshotCount = r.varint(), snapshotCount <= UInt64(r.remaining / 3) else { throw bad("bad snapshot count", r.offset) }
                var snapshots: [(UInt64, Int64, Int)] = []
                for i in 0..<Int(snapshotCount) {
                    let at = r.offset
                    guard let position = r.varint(), let created = r.svarint(), let length = r.varint(), length <= declared else { throw bad("bad snapshot \(i)", at) }
                    guard snapshots.last.map({ position > $0.0 }) ?? true, segments.first.map({ position >= $0.0 }) ?? false else {
                        throw bad("snapshot \(i) at position \(position) is not after the last one, or before the log", at)
                    }
                    snapshots.append((position, created, Int(length)))
                }
                var tables: [[PackStreamReader.Chunk]] = []
                var chunkOffset = 0
                var chunkLengths: [(raw: Int, stored: Int)] = []
                for stream in PackStream.allCases {
                    guard let count = r.varint(), count <= UInt64(r.remaining / 2) else { throw bad("bad chunk count of the \(stream) stream", r.offset) }
                    var chunks: [(raw: Int, stored: Int)] = []
                    for _ in 0..<count {
                        let at = r.offset
                        guard let rawLength = r.varint(), let stored = r.varint(), rawLength >= 1, rawLength <= UInt64(PackStream.maxChunk), stored >= 1, stored <= rawLength else {
                            throw bad("a chunk of the \(stream) stream with bad lengths", at)
                        }
                        chunks.append((Int(rawLength), Int(stored)))
                    }
                    chunkLengths.append(contentsOf: chunks)
                    tables.append(chunks.map { PackStreamReader.Chunk(range: 0..<$0.stored, rawLength: $0.raw) })
                }
                let dataStart = r.offset
                let total = chunkLengths.reduce(0) { $0 + $1.stored }
                guard total == r.remaining else { throw bad("the chunks take \(total) bytes but \(r.remaining) follow the header", dataStart) }
                chunkOffset = dataStart
                for s in tables.indices {
                    for c in tables[s].indices {
                        let length = tables[s][c].range.count
                        tables[s][c].range = chunkOffset..<(chunkOffset + length)
                        chunkOffset += length
                    }
                }
                return (Array(id), declared, segments, snapshots, tables)
            }
            guard let id = LogID(bytes: header.logID) else { throw bad("no log ID", 12) }
            logID = id
            declared = header.declared
            left = header.declared
            segments = header.segments.map { (first: $0.0, created: $0.1, records: $0.2) }
            snapshots = header.snapshots.map { (position: $0.0, created: $0.1, length: $0.2) }
            structure = PackStreamReader(stream: .structure, file: bytes, chunks: header.tables[0])
            objects = PackStreamReader(stream: .objects, file: bytes, chunks: header.tables[1])
            values = PackStreamReader(stream: .values, file: bytes, chunks: header.tables[2])
            literals = PackStreamReader(stream: .literals, file: bytes, chunks: header.tables[3])
        }

        mutating func run<Sink: LogCopySink>(into sink: inout Sink) throws {
            var position: UInt64 = 0
            for (i, segment) in segments.enumerated() {
                if i == 0 { position = segment.first }
                guard segment.first == position else { throw structure.fail("segment \(i) starts at position \(segment.first), not where the last one ended (\(position))") }
                try sink.segment(logID: logID, firstPosition: segment.first, created: segment.created)
                for _ in 0..<segment.records {
                    let count = try structure.count(atMost: Int(UInt32.max), "an entry count")
                    guard count >= 1 else { throw structure.fail("a record of no entries at position \(position)") }
                    guard position <= UInt64.max - UInt64(count) else { throw structure.fail("positions past 2^64 at position \(position)") }
                    var entries: [LogEntry] = []
                    for k in 0..<count {
                        let timestamp = Int64(bitPattern: UInt64(bitPattern: previousTimestamp) &+ UInt64(bitPattern: try structure.svarint()))
                        previousTimestamp = timestamp
                        let payload: [UInt8]
                        do {
                            payload = try entry()
                            try take(payload.count)
                        } catch let error as PackError {
                            throw PackError(message: "log position \(position + UInt64(k)): " + error.message)
                        }
                        entries.append(LogEntry(payload, timestamp: timestamp))
                    }
                    try sink.record(firstPosition: position, entries: entries)
                    position += UInt64(count)
                }
            }
            for snapshot in snapshots {
                guard snapshot.position <= position else { throw literals.fail("a snapshot at position \(snapshot.position), past the log's end \(position)") }
                try take(snapshot.length)
                try sink.snapshot(position: snapshot.position, created: snapshot.created, payload: try literals.bytes(snapshot.length))
            }
            for stream in [structure, objects, values, literals] { try stream.finish() }
            guard left == 0 else { throw structure.fail("the log unpacked to \(declared - left) bytes, not the \(declared) its header says") }
        }

        /// Counts `n` bytes of output against what the header declared.
        private mutating func take(_ n: Int) throws {
            guard UInt64(n) <= left else { throw structure.fail("more than the \(declared) bytes the header says the log unpacks to") }
            left -= UInt64(n)
        }

        /// The bytes an entry being built may still grow to: no more than a log entry may hold,
        /// nor than the header has left.
        private var entryRoom: Int { Int(min(UInt64(PackedLog.maxEntryBytes), left)) }

        private func checkRoom() throws {
            guard builder.size <= entryRoom else { throw structure.fail("an entry larger than \(entryRoom) bytes") }
        }

        // MARK: - One entry

        private mutating func entry() throws -> [UInt8] {
            let kind = try structure.u8()
            switch kind {
            case PackedLog.rawEntry:
                return try literals.bytes(try literals.count(atMost: entryRoom, "an entry's length"))
            case PackedLog.packedTransaction:
                return try transaction()
            default:
                throw structure.fail("unknown entry kind \(kind)")
            }
        }

        private mutating func replica() throws -> ReplicaID {
            let ref = try structure.varint()
            if ref == 0 {
                guard replicaTable.count < PackedLog.maxTable else { throw structure.fail("more than \(PackedLog.maxTable) replicas") }
                let id = ReplicaID(rawValue: try literals.id128())
                replicaTable.append(id)
                return id
            }
            guard ref <= UInt64(replicaTable.count) else { throw structure.fail("replica \(ref - 1) of \(replicaTable.count)") }
            return replicaTable[Int(ref - 1)]
        }

        private mutating func object() throws -> ObjectID {
            let ref = try objects.bits(referenceWidth(objectTable.count))
            if ref == 0 {
                guard objectTable.count < PackedLog.maxTable else { throw objects.fail("more than \(PackedLog.maxTable) objects") }
                let id = ObjectID(rawValue: try literals.id128())
                objectTable.append(id)
                return id
            }
            guard ref <= UInt64(objectTable.count) else { throw objects.fail("object \(ref - 1) of \(objectTable.count)") }
            return objectTable[Int(ref - 1)]
        }

        /// A value's tag and payload, appended to the entry's body.
        private mutating func value() throws {
            let tag = try structure.u8()
            guard let known = EventCodec.Tag(rawValue: tag) else { throw structure.fail("unknown value tag \(tag)") }
            builder.body.u8(tag)
            switch known {
            case .null, .boolFalse, .boolTrue:
                return
            case .reference:
                return builder.body.id(try object())
            case .asset:
                let length = try literals.count(atMost: PackedLog.maxAssetBytes, "an asset's length")
                let payload = try literals.bytes(length)
                // The asset's own reader checks it, as the event decoder would.
                let valid = payload.withUnsafeBytes { raw -> Bool in
                    var r = ByteReader(raw)
                    guard case .success = Asset.read(&r) else { return false }
                    return r.remaining == 0
                }
                guard valid else { throw literals.fail("an asset that does not read") }
                return builder.body.raw(payload)
            default:
                break
            }
            guard let table = PackedLog.table(of: tag) else { throw structure.fail("unknown value tag \(tag)") }
            let count = valueStarts[table].count - 1
            let ref = try values.bits(referenceWidth(count))
            if ref > 0 {
                guard ref <= UInt64(count) else { throw values.fail("value \(ref - 1) of \(count) (tag \(tag))") }
                let range = valueStarts[table][Int(ref - 1)]..<valueStarts[table][Int(ref)]
                valueBytes[table].withUnsafeBufferPointer { builder.body.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[range])) }
                return try checkRoom()
            }
            guard count < PackedLog.maxTable else { throw values.fail("more than \(PackedLog.maxTable) values of tag \(tag)") }
            var w = ByteWriter()
            switch known {
            case .string:
                let length = try literals.count(atMost: entryRoom + 1, "a string's length")
                if length == 0 {
                    let hash = try literals.bytes(8)
                    w.varint(18)
                    w.raw(Array("h:".utf8))
                    w.raw(Array(Hex.encode(hash).utf8))
                } else {
                    w.varint(UInt64(length - 1))
                    try literals.bytes(length - 1, into: &w)
                }
            case .integer, .date:
                w.svarint(try literals.svarint())
            case .double:
                try literals.bytes(8, into: &w)
            case .bytes:
                let length = try literals.count(atMost: entryRoom, "a bytes value's length")
                w.varint(UInt64(length))
                try literals.bytes(length, into: &w)
            case .uuid:
                try literals.bytes(16, into: &w)
            default:
                throw structure.fail("unknown value tag \(tag)")
            }
            valueBytes[table] += w.bytes
            valueStarts[table].append(valueBytes[table].count)
            builder.body.raw(w.bytes)
            try checkRoom()
        }

        private mutating func name(_ nameCount: Int) throws -> UInt64 {
            let index = try structure.varint()
            guard index < UInt64(nameCount) else { throw structure.fail("name \(index) of the transaction's \(nameCount)") }
            return index
        }

        private mutating func transaction() throws -> [UInt8] {
            let replica = try replica()
            let first = (nextSequence[replica] ?? 1) &+ UInt64(bitPattern: try structure.svarint())
            let eventCount = try structure.count(atMost: PackedLog.maxEvents, "an event count")
            guard first >= 1, first <= UInt64.max - UInt64(eventCount) else { throw structure.fail("sequences \(first)+\(eventCount) out of range") }
            nextSequence[replica] = first + UInt64(eventCount)
            builder.reset(replica: replica, firstSequence: first)
            let nameCount = try structure.count(atMost: PackedLog.maxNames, "a name count")
            for _ in 0..<nameCount {
                let ref = try structure.varint()
                if ref == 0 {
                    guard nameTable.count < PackedLog.maxNames else { throw structure.fail("more than \(PackedLog.maxNames) names") }
                    let length = try literals.count(atMost: PackedLog.maxNameBytes, "a name's length")
                    nameTable.append(try literals.bytes(length))
                    builder.name(nameTable[nameTable.count - 1])
                } else {
                    guard ref <= UInt64(nameTable.count) else { throw structure.fail("name \(ref - 1) of \(nameTable.count)") }
                    builder.name(nameTable[Int(ref - 1)])
                }
            }
            try checkRoom()
            let others = try structure.count(atMost: PackedLog.maxEvents, "a replica count")
            for _ in 0..<others { builder.replicas.append(try self.replica()) }
            for _ in 0..<eventCount {
                let kindByte = try structure.u8()
                guard let kind = EventCodec.Kind(rawValue: kindByte) else { throw structure.fail("unknown event kind \(kindByte)") }
                let hlc = previousHLC &+ UInt64(bitPattern: try structure.svarint())
                previousHLC = hlc
                builder.begin(kind: kindByte, hlc: hlc)
                switch kind {
                case .insert, .update:
                    builder.body.varint(try name(nameCount))
                    builder.body.id(try object())
                    let fields = try structure.count(atMost: PackedLog.maxEvents, "a field count")
                    builder.body.varint(UInt64(fields))
                    for _ in 0..<fields {
                        builder.body.varint(try name(nameCount))
                        try value()
                    }
                case .delete:
                    builder.body.varint(try name(nameCount))
                    builder.body.id(try object())
                case .add, .remove:
                    builder.body.varint(try name(nameCount))
                    builder.body.id(try object())
                    builder.body.varint(try name(nameCount))
                    builder.body.id(try object())
                    if kind == .remove {
                        let adds = try structure.count(atMost: PackedLog.maxEvents, "an add count")
                        builder.body.varint(UInt64(adds))
                        for _ in 0..<adds {
                            let index = try structure.varint()
                            guard index <= UInt64(others) else { throw structure.fail("replica \(index) of the transaction's \(others + 1)") }
                            builder.body.varint(index)
                            builder.body.varint(try structure.varint())
                        }
                    }
                case .schema:
                    let length = try literals.count(atMost: entryRoom, "a schema's length")
                    builder.body.varint(UInt64(length))
                    try literals.bytes(length, into: &builder.body)
                case .withheld:
                    break
                }
                try checkRoom()
            }
            return builder.finish()
        }
    }
}

extension PackedLog {
    /// Unpacks `bytes` in memory and counts the segments, entries and snapshots it holds: what
    /// the fuzz target `fuzz-packed-log` runs.
    static func check(_ bytes: [UInt8]) throws -> Int {
        var counter = Counter()
        try unpack(bytes, into: &counter)
        return counter.count
    }

    private struct Counter: LogCopySink {
        var count = 0
        mutating func segment(logID: LogID, firstPosition: LogPosition, created: LogTimestamp) throws { count += 1 }
        mutating func record(firstPosition: LogPosition, entries: [LogEntry]) throws { count += entries.count }
        mutating func snapshot(position: LogPosition, created: LogTimestamp, payload: [UInt8]) throws { count += 1 }
    }
}
