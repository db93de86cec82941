import Foundation
import Testing
@testable import StrataLog

@Suite("Entries round-trip through the log")
struct RoundTripTests {
    @Test("CRC-32C matches the Castagnoli check value")
    func crcCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        // Incremental checksumming equals one pass.
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let whole = CRC32C.checksum(bytes)
        let split = bytes.withUnsafeBytes { raw in
            CRC32C.update(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[..<333])), UnsafeRawBufferPointer(rebasing: raw[333...]))
        }
        #expect(whole == split)
        // The CPU instruction (when used) and the tables agree on every length and alignment.
        for start in 0..<9 {
            for length in [0, 1, 7, 8, 9, 63, 64, 65, 500, 991 - start] {
                bytes.withUnsafeBytes { raw in
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
                    #expect(CRC32C.update(0x1234_5678, slice) == CRC32C.softwareUpdate(0x1234_5678, slice))
                }
            }
        }
    }

    @Test("Entries of every size come back byte for byte, with positions and timestamps", arguments: [Durability.buffered, .fsyncPerRecord, .groupCommit])
    func entriesOfManySizes(durability: Durability) async throws {
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: 11)
        let random = (0..<(1 << 20) + 17).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let records: [[LogEntry]] = [
            [LogEntry([], timestamp: 5)],
            [LogEntry([1], timestamp: 6), LogEntry([2, 3], timestamp: 4)],
            [LogEntry(random, timestamp: 7)],                                    // 1 MiB+ incompressible
            [LogEntry([UInt8](repeating: 9, count: 3 << 20), timestamp: 8)],     // 3 MiB repetitive
            (0..<500).map { LogEntry(tagged(4, $0, size: 150), timestamp: 1_000 + Int64($0)) },
            [LogEntry(Array(random[0..<100]), timestamp: -5)],                   // before 1970
        ]
        var options = LogOptions(durability: durability)
        options.segmentSize = 2 << 20
        let log = try SegmentLog.open(at: dir.path, options: options)
        var expected: [StoredEntry] = []
        for record in records {
            let result = try await log.append(record)
            #expect(result.positions.lowerBound == LogPosition(expected.count))
            #expect(result.positions.count == record.count)
            for entry in record {
                expected.append(StoredEntry(position: LogPosition(expected.count), timestamp: entry.timestamp, payload: entry.payload))
            }
        }
        #expect(try allEntries(log) == expected)
        try await log.close()

        let reopened = try SegmentLog.open(at: dir.path, options: options)
        #expect(try allEntries(reopened) == expected)
        // Reading from the middle of a record returns exactly the entries from there on.
        #expect(try reopened.entries(from: 3) == Array(expected[3...]))
        #expect(try reopened.entries(from: 100, limit: 5) == Array(expected[100..<105]))
        #expect(try reopened.entries(from: reopened.endPosition).isEmpty)
    }

    @Test("Compression is used when it pays and skipped when it does not")
    func codecChoice() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        var rng = SeededGenerator(seed: 5)
        try await log.append([LogEntry([UInt8](repeating: 1, count: 10_000))])
        try await log.append([LogEntry((0..<10_000).map { _ in UInt8.random(in: 0...255, using: &rng) })])
        var cursor = try log.records(from: 0)
        let first = try #require(try cursor.next())
        let second = try #require(try cursor.next())
        #expect(first.codec == .lz4)
        #expect(first.storedSize < 1_000)
        #expect(second.codec == .raw)
        // Header, entry table (a 2-byte length varint and a 1-byte timestamp delta), the bytes.
        #expect(second.storedSize == 48 + 3 + 10_000)
    }

    @Test("Limits are enforced with a clear error and nothing is written")
    func limits() async throws {
        let dir = TemporaryDirectory()
        var options = bufferedOptions()
        options.maxEntrySize = 1_000
        options.maxRecordSize = 10_000
        let log = try SegmentLog.open(at: dir.path, options: options)
        await #expect(throws: LogError.self) { try await log.append([]) }
        do {
            try await log.append([LogEntry([UInt8](repeating: 0, count: 1_001))])
            Issue.record("an oversized entry was accepted")
        } catch let error as LogError {
            #expect(error.code == .entryTooLarge)
            #expect(error.message.contains("1001"))
        }
        do {
            try await log.append((0..<20).map { _ in LogEntry([UInt8](repeating: 0, count: 900)) })
            Issue.record("an oversized record was accepted")
        } catch let error as LogError {
            #expect(error.code == .recordTooLarge)
        }
        #expect(log.endPosition == 0)
        try await log.append([LogEntry([1])])
        #expect(log.endPosition == 1)
        // Invalid options are refused up front.
        var bad = LogOptions()
        bad.maxRecordSize = LogOptions.formatMaxRecordSize + 1
        #expect(throws: LogError.self) { try SegmentLog.open(at: dir.sub("other"), options: bad) }
    }

    @Test("Positions out of range and closed logs give typed errors")
    func positionErrors() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        try await log.append(payloads: [[1], [2]])
        #expect(throws: LogError.self) { try log.entries(from: 3) }
        try await log.close()
        do {
            try await log.append(payloads: [[3]])
            Issue.record("append after close succeeded")
        } catch let error as LogError {
            #expect(error.code == .closed)
        }
        var options = LogOptions()
        options.create = false
        do {
            _ = try SegmentLog.open(at: dir.sub("missing"), options: options)
            Issue.record("opened a missing log without create")
        } catch let error as LogError {
            #expect(error.code == .notFound)
        }
    }
}
