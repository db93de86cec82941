import Foundation
import Testing
@testable import StrataLog

@Suite("Segments roll over, reopen and keep positions contiguous")
struct SegmentTests {
    @Test("Rollover across many segments, reopen and continue, positions contiguous", arguments: [Durability.buffered, .groupCommit])
    func rolloverAndReopen(durability: Durability) async throws {
        let dir = TemporaryDirectory()
        var options = LogOptions(durability: durability)
        options.segmentSize = 4096
        options.indexInterval = 512
        var expected: [[UInt8]] = []
        for round in 0..<3 {
            let log = try SegmentLog.open(at: dir.path, options: options)
            #expect(log.endPosition == LogPosition(expected.count))
            for r in 0..<40 {
                let record = (0..<(1 + r % 5)).map { tagged(round * 100 + r, $0, size: 60 + r * 3) }
                let result = try await log.append(record.map { LogEntry($0) })
                #expect(result.positions.lowerBound == LogPosition(expected.count))
                expected += record
            }
            try await log.close()
        }
        let log = try SegmentLog.open(at: dir.path, options: options)
        let segments = log.segments()
        #expect(segments.count >= 5)
        for (a, b) in zip(segments, segments.dropFirst()) { #expect(a.endPosition == b.firstPosition) }
        #expect(segments.last?.isActive == true)
        #expect(try allEntries(log).map(\.payload) == expected)
        #expect(try allEntries(log).map(\.position) == (0..<LogPosition(expected.count)).map { $0 })
        // Every position can be read from directly (the sparse index finds the record).
        for position in stride(from: 0, to: expected.count, by: 7) {
            let entries = try log.entries(from: LogPosition(position), limit: 1)
            #expect(entries.first?.payload == expected[position])
        }
        // Every sealed segment got an index file.
        for segment in segments.dropLast() {
            #expect(FileManager.default.fileExists(atPath: dir.sub(segment.name.replacingOccurrences(of: ".seg", with: ".idx"))))
        }
    }

    @Test("A missing or damaged index is rebuilt, never trusted", arguments: [OpenVerification.full, .tail])
    func indexRebuilt(verification: OpenVerification) async throws {
        let dir = TemporaryDirectory()
        var options = bufferedOptions(segmentSize: 4096)
        options.indexInterval = 512
        let log = try SegmentLog.open(at: dir.path, options: options)
        for r in 0..<100 { try await log.append([LogEntry(tagged(r, 0, size: 200))]) }
        try await log.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".idx") }.sorted()
        try #require(names.count >= 4)
        // Delete one index, damage another, and make a third lie about the segment (valid
        // checksum, wrong points) by swapping it with its neighbour's.
        try FileManager.default.removeItem(atPath: dir.sub(names[0]))
        var damaged = try readFile(dir.sub(names[1]))
        damaged[damaged.count - 3] ^= 0xFF
        try writeFile(dir.sub(names[1]), damaged)
        try writeFile(dir.sub(names[2]), try readFile(dir.sub(names[3])))

        options.verification = verification
        let reopened = try SegmentLog.open(at: dir.path, options: options)
        #expect(Set(reopened.recovery.rebuiltIndexes).isSuperset(of: [names[0], names[1], names[2]]))
        let entries = try allEntries(reopened)
        #expect(entries.count == 100)
        for (r, entry) in entries.enumerated() { #expect(entry.payload == tagged(r, 0, size: 200)) }
        for position in 0..<100 {
            #expect(try reopened.entries(from: LogPosition(position), limit: 1).first?.payload == tagged(position, 0, size: 200))
        }
    }

    @Test("With tail verification a sealed segment with a valid index is not scanned; damage there shows when read")
    func tailVerificationDefersChecks() async throws {
        let dir = TemporaryDirectory()
        let options = bufferedOptions(segmentSize: 4096)
        let log = try SegmentLog.open(at: dir.path, options: options)
        for r in 0..<60 { try await log.append([LogEntry(tagged(r, 0, size: 200))]) }
        try await log.close()
        let first = firstSegmentPath(dir.path)
        var bytes = try readFile(first)
        bytes[48 + 100] ^= 0x01  // inside the first record's payload
        try writeFile(first, bytes)

        var tail = options
        tail.verification = .tail
        let opened = try SegmentLog.open(at: dir.path, options: tail)
        #expect(opened.recovery.verifiedSegments == 1)
        do {
            _ = try allEntries(opened)
            Issue.record("read damaged bytes without an error")
        } catch let error as LogError {
            #expect(error.code == .corruptRecord)
            #expect(error.file == first)
            #expect(error.offset == 48)
        }
        // The default (full) verification refuses to open it at all.
        #expect(throws: LogError.self) { try SegmentLog.open(at: dir.path, options: options) }
    }

    @Test("Segment files from another log, misnamed or missing are refused with the file named")
    func foreignAndMissingSegments() async throws {
        let a = TemporaryDirectory()
        let b = TemporaryDirectory()
        let options = bufferedOptions(segmentSize: 4096)
        for dir in [a, b] {
            let log = try SegmentLog.open(at: dir.path, options: options)
            for r in 0..<40 { try await log.append([LogEntry(tagged(r, 0, size: 200))]) }
            try await log.close()
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: a.path).filter { $0.hasSuffix(".seg") }.sorted()
        // A segment of log B dropped into log A.
        let copy = TemporaryDirectory()
        try copyDirectory(a.path, to: copy.path)
        try writeFile(copy.sub(names[1]), try readFile(b.sub(names[1])))
        expectOpenFails(copy.path, options, code: .badSegmentHeader, file: copy.sub(names[1]))
        // A hole in the middle.
        try copyDirectory(a.path, to: copy.path)
        try FileManager.default.removeItem(atPath: copy.sub(names[1]))
        expectOpenFails(copy.path, options, code: .positionMismatch, file: copy.sub(names[2]))
        // The last segment renamed to another position.
        try copyDirectory(a.path, to: copy.path)
        try FileManager.default.moveItem(atPath: copy.sub(names[names.count - 1]), toPath: copy.sub("00000000000000099999.seg"))
        expectOpenFails(copy.path, options, code: .positionMismatch, file: copy.sub("00000000000000099999.seg"))
    }
}

func expectOpenFails(_ path: String, _ options: LogOptions, code: LogError.Code, file: String, offset: Int64? = nil,
                     sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try SegmentLog.open(at: path, options: options)
        Issue.record("open succeeded; expected \(code) in \(file)", sourceLocation: sourceLocation)
    } catch let error as LogError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.file == file, "\(error)", sourceLocation: sourceLocation)
        if let offset { #expect(error.offset == offset, "\(error)", sourceLocation: sourceLocation) }
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}
