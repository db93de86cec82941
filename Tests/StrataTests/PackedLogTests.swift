import Foundation
@testable import Strata
@testable import StrataCore
import StrataLog
import StrataTestSupport
import Testing

/// A debug bundle's packed log (format 2): a log packed and unpacked again is the same log —
/// segments, records, positions, timestamps, every entry byte for byte, snapshots — and packed
/// bytes from anyone are refused with a reason, never a crash.
@Suite("Packed logs")
struct PackedLogTests {
    /// A log of several segments: the seeded random transactions of the fingerprint goldens
    /// (every kind of event and value), entries a pack keeps whole, records of 1–5 entries with
    /// timestamps that go back and forth, and two snapshots.
    static func makeLog(at directory: String, seed: UInt64) async throws -> (entries: Int, whole: Int) {
        var rng = SeededGenerator(seed: seed)
        var payloads = try FingerprintGoldenTests.transactions(seed: seed).map { $0.encoded() }
        // Redacted-looking strings: the 8-byte literal form only for exactly `h:` + 16 lower-case hex.
        let replica = ReplicaID(rawValue: UInt128(seed) << 8 | 0xAB)
        for (i, text) in ["h:0123456789abcdef", "h:0123456789ABCDEF", "h:0123456789abcde", "h:0123456789abcdeg", "h:", ""].enumerated() {
            payloads.append(TransactionRecord(replica: replica, events: [Event(id: EventID(replica: replica, sequence: UInt64(i + 1)), hlc: HLC(rawValue: 99),
                                                                               change: .update(entity: "Note", object: ObjectID(rawValue: 5), fields: ["title": .string(text)]))]).encoded())
        }
        // Canonically equivalent names (é precomposed, then decomposed): equal as Swift strings,
        // two names in a log.
        for (i, name) in ["Caf\u{E9}", "Cafe\u{301}"].enumerated() {
            payloads.append(TransactionRecord(replica: replica, events: [Event(id: EventID(replica: replica, sequence: UInt64(20 + i)), hlc: HLC(rawValue: 99),
                                                                               change: .update(entity: name, object: ObjectID(rawValue: 5), fields: [name: .integer(1)]))]).encoded())
        }
        // Kept whole: an empty entry, bytes that are no transaction, an adoption record, a name
        // that is not UTF-8 (decoding would change it), a base HLC that is not the smallest.
        var whole: [[UInt8]] = [[], (0..<300).map { _ in UInt8(truncatingIfNeeded: rng.next()) }]
        whole.append(AdoptionRecord(contentHash: String(repeating: "ab", count: 32), size: 12, stateDigest: String(repeating: "cd", count: 32),
                                    newestHLC: HLC(rawValue: 7), origin: "zone alice/notes").encoded())
        var badName = TransactionRecord(replica: replica, events: [Event(id: EventID(replica: replica, sequence: 50), hlc: HLC(rawValue: 5),
                                                                         change: .delete(entity: "Zz", object: ObjectID(rawValue: 9)))]).encoded()
        let nameAt = try #require(badName.firstIndex(of: UInt8(ascii: "Z")))
        badName[nameAt] = 0xFF
        whole.append(badName)
        var base = TransactionRecord(replica: replica, events: [Event(id: EventID(replica: replica, sequence: 60), hlc: HLC(rawValue: 300),
                                                                      change: .delete(entity: "Note", object: ObjectID(rawValue: 9)))]).encoded()
        base[1 + 16 + 1 + 1] = 0  // base 256 below the event's 300 (0x12C): the delta is 44, not 0
        base[1 + 16 + 1 + 1 + 8 + 1 + 1 + 4 + 1 + 1] = 44
        #expect((try? EventCodec.decodeRaw(base, position: nil))?.events.first?.hlc == 300, "the test's entry decodes: \(Hex.encode(base))")
        whole.append(base)
        for (i, entry) in whole.enumerated() { payloads.insert(entry, at: min(payloads.count, 7 + 13 * i)) }

        var options = LogOptions()
        options.segmentSize = 4096
        let log = try SegmentLog.open(at: directory, options: options)
        var timestamp: Int64 = 1_800_000_000_000_000
        var index = 0
        while index < payloads.count {
            let count = min(payloads.count - index, 1 + Int(rng.next() % 5))
            var entries: [LogEntry] = []
            for payload in payloads[index..<(index + count)] {
                timestamp += Int64(rng.next() % 2000) - 500
                entries.append(LogEntry(payload, timestamp: timestamp))
            }
            _ = try await log.append(entries)
            index += count
            if index > payloads.count / 3, try log.snapshots().isEmpty { _ = try log.writeSnapshot(Array("state one".utf8), position: log.endPosition) }
        }
        _ = try log.writeSnapshot((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) }, position: log.endPosition)
        try await log.close()
        return (payloads.count, whole.count)
    }

    /// Everything a reader sees of a log directory: its segment files, its records (position,
    /// and each entry's timestamp and bytes), its snapshots.
    static func dump(_ directory: String) throws -> [String] {
        var lines = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".seg") }.sorted()
        _ = try SegmentLog.verify(at: directory, progress: nil) { record in
            lines.append("record " + record.entries.map { "\($0.position)@\($0.timestamp):\(Hex.encode($0.payload))" }.joined(separator: " "))
        }
        let identity = try SegmentLog.identity(at: directory)
        for info in identity.snapshots { lines.append("snapshot \(info.position) \(Hex.encode(try SegmentLog.readSnapshot(info, logID: identity.logID).payload))") }
        return lines
    }

    static func pack(_ directory: String, wholeOnly: Bool = false) throws -> (bytes: [UInt8], writer: PackedLog.Writer) {
        var writer = PackedLog.Writer(wholeOnly: wholeOnly)
        _ = try LogCopy.copy(from: directory, into: &writer, entry: { $0.payload }, snapshot: { $0.payload })
        return (writer.finish(), writer)
    }

    @Test("A packed log unpacks to the same log: segments, records, positions, timestamps, entries byte for byte, snapshots")
    func roundTrip() async throws {
        let seeds: [UInt64] = [1, 2, 3, UInt64.random(in: 4...UInt64.max)]
        for seed in seeds {
            let dir = TemporaryDirectory()
            let made = try await Self.makeLog(at: dir.sub("log"), seed: seed)
            let (bytes, writer) = try Self.pack(dir.sub("log"))
            #expect(writer.wholeEntries == made.whole, "seed \(seed): \(writer.wholeEntries) entries kept whole, expected \(made.whole)")
            #expect(writer.packedEntries == made.entries - made.whole, "seed \(seed)")
            var out = try LogCopy.DirectoryWriter(destination: dir.sub("unpacked"))
            try PackedLog.unpack(bytes, into: &out)
            let original = try Self.dump(dir.sub("log"))
            let unpacked = try Self.dump(dir.sub("unpacked"))
            #expect(original.filter { $0.hasSuffix(".seg") }.count > 2, "seed \(seed): several segments")
            #expect(original.count == unpacked.count, "seed \(seed)")
            for (a, b) in zip(original, unpacked) where a != b {
                Issue.record("seed \(seed): \(a.prefix(200)) became \(b.prefix(200))")
                break
            }
            // Every entry whole (what a bundle falls back to for a log that packs too well to be
            // trusted): the same log again.
            let (whole, wholeWriter) = try Self.pack(dir.sub("log"), wholeOnly: true)
            #expect(wholeWriter.packedEntries == 0 && wholeWriter.wholeEntries == made.entries && wholeWriter.unpacked == writer.unpacked)
            var wholeOut = try LogCopy.DirectoryWriter(destination: dir.sub("unpacked-whole"))
            try PackedLog.unpack(whole, into: &wholeOut)
            #expect(try Self.dump(dir.sub("unpacked-whole")) == original, "seed \(seed): every entry whole")
            // The log reads as a log: the store's own reader takes every transaction.
            #expect(try SegmentLog.identity(at: dir.sub("unpacked")).logID == SegmentLog.identity(at: dir.sub("log")).logID)
        }
    }

    /// Collects what an unpack produces, in memory (the hostile cases run thousands of times).
    struct Collector: LogCopySink {
        var count = 0
        mutating func segment(logID: LogID, firstPosition: LogPosition, created: LogTimestamp) throws { count += 1 }
        mutating func record(firstPosition: LogPosition, entries: [LogEntry]) throws { count += entries.count }
        mutating func snapshot(position: LogPosition, created: LogTimestamp, payload: [UInt8]) throws { count += 1 }
    }

    @Test("Packed bytes cut short, flipped or claiming too much are refused with the reason, never a crash or a huge allocation")
    func hostileBytes() async throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        let dir = TemporaryDirectory()
        _ = try await Self.makeLog(at: dir.sub("log"), seed: seed)
        let (good, _) = try Self.pack(dir.sub("log"))
        var sink = Collector()
        try PackedLog.unpack(good, into: &sink)
        // Cut anywhere: refused (a packed log has no optional tail).
        for cut in stride(from: 0, to: good.count, by: max(1, good.count / 200)) {
            var sink = Collector()
            #expect(throws: PackError.self, "seed \(seed): cut at \(cut)") { try PackedLog.unpack(Array(good[..<cut]), into: &sink) }
        }
        // A byte flipped anywhere: refused, or read as some other log (a bundle's checksum is what
        // catches damage; the reader's job is never to crash or trust a claim).
        var rng = SeededGenerator(seed: seed)
        var refusedCount = 0
        for _ in 0..<600 {
            var bad = good
            let at = Int(rng.next() % UInt64(bad.count))
            bad[at] ^= UInt8(truncatingIfNeeded: 1 << (rng.next() % 8))
            var sink = Collector()
            do { try PackedLog.unpack(bad, into: &sink) } catch is PackError { refusedCount += 1 } catch is LogError { refusedCount += 1 }
        }
        #expect(refusedCount > 100, "seed \(seed): only \(refusedCount) of 600 flipped copies refused (a flip in a literal — an ID, a string — reads as another value)")
        // An unpacked size one off what the entries and snapshots add up to, either way.
        for delta in [Int64(1), -1] {
            var wrong = good
            let declared = (0..<8).reduce(UInt64(0)) { $0 | UInt64(good[28 + $1]) << (8 * UInt64($1)) }
            withUnsafeBytes(of: (UInt64(bitPattern: Int64(bitPattern: declared) + delta)).littleEndian) { for i in 0..<8 { wrong[28 + i] = $0[i] } }
            var sink = Collector()
            #expect(throws: PackError.self, "seed \(seed): unpacked size off by \(delta)") { try PackedLog.unpack(wrong, into: &sink) }
        }
        // Claims: a chunk that says it unpacks to more than a chunk may, a count of 2^62 segments.
        func refused(_ bytes: [UInt8], _ expected: String) {
            var sink = Collector()
            do {
                try PackedLog.unpack(bytes, into: &sink)
                Issue.record("accepted: \(expected)")
            } catch let error as PackError {
                #expect(error.message.contains(expected), "\(error.message)")
            } catch {
                Issue.record("\(error)")
            }
        }
        refused(Array("STRATALQ".utf8) + good[8...], "not a packed log")
        var version = good
        version[8] = 2
        refused(version, "packed log version 2")
        var header = ByteWriter()
        header.raw(PackedLog.magic)
        header.u16(1)
        header.u16(0)
        header.raw([UInt8](repeating: 1, count: 16))
        var claims = header
        claims.u64(1 << 40)
        refused(claims.bytes + [0, 0, 0, 0, 0, 0], "claims to unpack to")
        header.u64(1000)
        var huge = header
        huge.varint(1 << 62)
        refused(huge.bytes + [0, 0, 0], "bad segment count")
        var bigChunk = header
        bigChunk.varint(0)  // no segments
        bigChunk.varint(0)  // no snapshots
        bigChunk.varint(1)
        bigChunk.varint(UInt64(PackStream.maxChunk) + 1)
        bigChunk.varint(10)
        refused(bigChunk.bytes + [0, 0, 0] + [UInt8](repeating: 0, count: 10), "bad lengths")
        var leftover = header
        leftover.varint(0)
        leftover.varint(0)
        leftover.varint(1)  // a structure stream of one byte that no record reads
        leftover.varint(1)
        leftover.varint(1)
        refused(leftover.bytes + [0, 0, 0] + [7], "left over")
        // A reference to an object the table does not hold yet.
        var reference = header
        reference.varint(1)
        reference.varint(0)
        reference.svarint(0)
        reference.varint(1)  // one segment of one record
        reference.varint(0)  // no snapshots
        var structure = ByteWriter()
        structure.varint(1)  // one entry
        structure.svarint(0)
        structure.u8(PackedLog.packedTransaction)
        structure.varint(0)  // a new replica
        structure.svarint(0)
        structure.varint(2)  // two events
        structure.varint(1)  // one name, new
        structure.varint(0)
        structure.varint(0)  // no other replicas
        structure.u8(EventCodec.Kind.add.rawValue)  // two new objects (references of 0 and 1 bits)
        structure.svarint(1)
        structure.varint(0)
        structure.varint(0)
        structure.u8(EventCodec.Kind.delete.rawValue)  // then object 2 of 2 (a reference of 2 bits: 3)
        structure.svarint(1)
        structure.varint(0)
        var literals = ByteWriter()
        literals.raw([UInt8](repeating: 2, count: 16))
        literals.string("Note")
        literals.raw([UInt8](repeating: 3, count: 32))
        let streams = [structure.bytes, [0b110], [], literals.bytes].map(PackStream.encode)
        refused(reference.bytes + streams.flatMap(\.table) + streams.flatMap(\.data), "object 2 of 2")
    }
}
