import Foundation
import Testing
@testable import StrataLog

/// A small single-segment log and the facts the recovery tests check against.
struct SmallLog {
    let directory: TemporaryDirectory
    let bytes: [UInt8]
    let recordOffsets: [Int64]
    let recordEntries: [[StoredEntry]]

    static func make(records: Int = 4) async throws -> SmallLog {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.sub("log"), options: bufferedOptions())
        for r in 0..<records {
            // Mix codecs: odd records are repetitive enough to be compressed.
            let entries = (0..<(1 + r % 3)).map { LogEntry(r % 2 == 1 ? [UInt8](repeating: UInt8(r), count: 120) : tagged(r, $0, size: 12), timestamp: Int64(r)) }
            try await log.append(entries)
        }
        var cursor = try log.records(from: 0)
        var offsets: [Int64] = []
        var entries: [[StoredEntry]] = []
        while let record = try cursor.next() {
            offsets.append(record.offset)
            entries.append(record.entries)
        }
        try await log.close()
        return SmallLog(directory: dir, bytes: try readFile(firstSegmentPath(dir.sub("log"))), recordOffsets: offsets, recordEntries: entries)
    }

    /// The index of the record containing byte `offset`, or `nil` inside the segment header.
    func record(containing offset: Int) -> Int? {
        guard offset >= SegmentHeader.size else { return nil }
        return recordOffsets.lastIndex { $0 <= Int64(offset) }
    }

    /// Writes `bytes` as the log's only segment in a fresh directory under `scratch`.
    func install(_ bytes: [UInt8], in scratch: String) throws -> String {
        try? FileManager.default.removeItem(atPath: scratch)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        try writeFile(firstSegmentPath(scratch), bytes)
        return scratch
    }
}

@Suite("Recovery on open")
struct RecoveryTests {
    @Test("Truncating the last record at every byte offset opens with exactly the complete records")
    func truncationAtEveryOffset() async throws {
        let small = try await SmallLog.make()
        let last = Int(small.recordOffsets.last!)
        let complete = small.recordEntries.dropLast().flatMap { $0 }
        for cut in last...small.bytes.count {
            let dir = try small.install(Array(small.bytes[0..<cut]), in: small.directory.sub("cut"))
            let log = try SegmentLog.open(at: dir, options: bufferedOptions())
            let expected = cut == small.bytes.count ? small.recordEntries.flatMap { $0 } : complete
            #expect(try allEntries(log) == expected, "cut at \(cut)")
            #expect(log.recovery.tornTail?.offset == (cut == last || cut == small.bytes.count ? nil : Int64(last)), "cut at \(cut)")
            // The log goes on from there, and the next open sees the new record after the old ones.
            try await log.append([LogEntry([7, 7, 7], timestamp: 99)])
            try await log.close()
            let reopened = try SegmentLog.open(at: dir, options: bufferedOptions())
            #expect(try allEntries(reopened).map(\.payload) == expected.map(\.payload) + [[7, 7, 7]], "cut at \(cut)")
            #expect(reopened.recovery.tornTail == nil)
        }
    }

    @Test("Zero-filled and garbage tails are truncated back to the last complete record")
    func zeroAndGarbageTails() async throws {
        let small = try await SmallLog.make()
        var rng = SeededGenerator(seed: 99)
        let tails: [[UInt8]] = [
            [UInt8](repeating: 0, count: 4096),
            (0..<3000).map { _ in UInt8.random(in: 0...255, using: &rng) },
            [UInt8](repeating: 0xFF, count: 100),
        ]
        for tail in tails {
            let dir = try small.install(small.bytes + tail, in: small.directory.sub("tail"))
            let log = try SegmentLog.open(at: dir, options: bufferedOptions())
            #expect(try allEntries(log) == small.recordEntries.flatMap { $0 })
            #expect(log.recovery.tornTail?.offset == Int64(small.bytes.count))
            #expect(try readFile(firstSegmentPath(dir)).count == small.bytes.count)
        }
    }

    @Test("A flipped bit at every byte is detected and the reader never returns wrong data")
    func bitFlipAtEveryByte() async throws {
        let small = try await SmallLog.make()
        let all = small.recordEntries.flatMap { $0 }
        let lastRecord = small.recordOffsets.count - 1
        for offset in 0..<small.bytes.count {
            var bytes = small.bytes
            bytes[offset] ^= UInt8(1 << (offset % 8))
            let dir = try small.install(bytes, in: small.directory.sub("flip"))
            let path = firstSegmentPath(dir)
            do {
                let log = try SegmentLog.open(at: dir, options: bufferedOptions())
                // Only damage to the final record may open: it is indistinguishable from a torn
                // append, and the log then holds exactly the records before it.
                let record = small.record(containing: offset)
                #expect(record == lastRecord, "flip at \(offset) opened")
                #expect(try allEntries(log) == Array(all.prefix(all.count - small.recordEntries[lastRecord].count)), "flip at \(offset)")
            } catch let error as LogError {
                if let record = small.record(containing: offset) {
                    #expect(record < lastRecord, "flip at \(offset): \(error)")
                    #expect(error.code == .corruptRecord, "flip at \(offset): \(error)")
                    #expect(error.offset == small.recordOffsets[record], "flip at \(offset): \(error)")
                } else {
                    #expect(error.code == .badSegmentHeader, "flip at \(offset): \(error)")
                }
                #expect(error.file == path)
            }
        }
    }

    @Test("Mid-log corruption fails the open with the file and offset; salvage truncates there")
    func midLogCorruptionAndSalvage() async throws {
        let dir = TemporaryDirectory()
        let options = bufferedOptions(segmentSize: 4096)
        let log = try SegmentLog.open(at: dir.path, options: options)
        for r in 0..<60 { try await log.append([LogEntry(tagged(r, 0, size: 180)), LogEntry(tagged(r, 1, size: 20))]) }
        let segments = log.segments()
        try await log.close()
        #expect(segments.count >= 4)
        // Damage the third record of the second segment.
        let victim = segments[1]
        let path = dir.sub(victim.name)
        let reopenedForOffsets = try SegmentLog.open(at: dir.path, options: options)
        var cursor = try reopenedForOffsets.records(from: victim.firstPosition)
        _ = try cursor.next(); _ = try cursor.next()
        let target = try #require(try cursor.next())
        try await reopenedForOffsets.close()
        var bytes = try readFile(path)
        bytes[Int(target.offset) + 70] ^= 0x10
        try writeFile(path, bytes)

        expectOpenFails(dir.path, options, code: .corruptRecord, file: path, offset: target.offset)
        let report = try SegmentLog.verify(at: dir.path)
        #expect(report.problems.first?.file == path)
        #expect(report.problems.first?.offset == target.offset)

        let salvage = try SegmentLog.salvage(at: dir.path)
        #expect(salvage.truncatedSegment == victim.name)
        #expect(salvage.truncatedAt == target.offset)
        #expect(salvage.removedSegments.count == segments.count - 2)
        #expect(salvage.endPosition == target.firstPosition)
        // The damaged record's own entries cannot be trusted; every later record still verified.
        #expect(salvage.droppedEntries == 120 - Int(target.firstPosition) - 2)
        #expect(salvage.droppedPositions == target.firstPosition..<120)
        let quarantine = try #require(salvage.quarantine)
        #expect(try FileManager.default.contentsOfDirectory(atPath: quarantine).count == segments.count - 1)

        let salvaged = try SegmentLog.open(at: dir.path, options: options)
        let entries = try allEntries(salvaged)
        #expect(entries.count == Int(target.firstPosition))
        for (i, entry) in entries.enumerated() { #expect(entry.payload == tagged(i / 2, i % 2, size: i % 2 == 0 ? 180 : 20)) }
        try await salvaged.append([LogEntry([1])])
        #expect(salvaged.endPosition == target.firstPosition + 1)
    }

    @Test("A damaged segment header is an error, not a torn tail")
    func damagedHeader() async throws {
        let small = try await SmallLog.make()
        var bytes = small.bytes
        bytes[20] ^= 1  // inside the log ID
        let dir = try small.install(bytes, in: small.directory.sub("header"))
        expectOpenFails(dir, bufferedOptions(), code: .badSegmentHeader, file: firstSegmentPath(dir), offset: 8)
        let shortDir = try small.install(Array(small.bytes[0..<30]), in: small.directory.sub("short"))
        expectOpenFails(shortDir, bufferedOptions(), code: .badSegmentHeader, file: firstSegmentPath(shortDir))
    }

    @Test("Salvage of a log whose first segment header is damaged keeps the log's identity")
    func salvageDamagedFirstHeader() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: bufferedOptions(segmentSize: 4096))
        for r in 0..<40 { try await log.append([LogEntry(tagged(r, 0, size: 200))]) }
        let id = log.logID
        try await log.close()
        var bytes = try readFile(firstSegmentPath(dir.path))
        bytes[3] ^= 0x40  // the magic
        try writeFile(firstSegmentPath(dir.path), bytes)
        let salvage = try SegmentLog.salvage(at: dir.path)
        #expect(salvage.truncatedSegment == nil)
        #expect(salvage.endPosition == 0)
        let reopened = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        #expect(reopened.logID == id)
        #expect(reopened.endPosition == 0)
    }

    @Test("Opening without create refuses an empty directory instead of making a new log")
    func noCreateInEmptyDirectory() throws {
        let dir = TemporaryDirectory()
        var options = bufferedOptions()
        options.create = false
        do {
            _ = try SegmentLog.open(at: dir.path, options: options)
            Issue.record("a new log was created")
        } catch let error as LogError {
            #expect(error.code == .notFound)
        }
    }
}
