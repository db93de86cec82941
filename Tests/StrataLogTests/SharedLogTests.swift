import Foundation
import Testing
@testable import StrataLog

/// A log opened for several writer processes (`LogSharing.processes`), seen from one of them: the
/// torn record a killed process leaves, following without the lock, retiring when alone. (Several
/// real processes: Tests/StrataTests/SharedStoreProcessTests.swift.)
@Suite("A log shared by writer processes")
struct SharedLogTests {
    static func sharedOptions(segmentSize: Int = 64 << 20) -> LogOptions {
        var options = LogOptions(durability: .groupCommit)
        options.sharing = .processes
        options.segmentSize = segmentSize
        return options
    }

    @Test("bytes a process killed mid-append left are not a record to a follower, and the next append cuts them off")
    func tornRecordOfAnotherProcess() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: Self.sharedOptions())
        try await log.append([LogEntry(tagged(0, 0)), LogEntry(tagged(0, 1))])
        let segment = firstSegmentPath(dir.path)
        let whole = try readFile(segment)
        // Another process's append, cut short by SIGKILL: the first half of a record.
        let torn: [UInt8] = Array(whole[SegmentHeader.size..<(SegmentHeader.size + (whole.count - SegmentHeader.size) / 2)])
        try writeFile(segment, whole + torn)

        // Following without the lock: maybe a record still being written; nothing is returned or cut.
        let followed = try log.withTurn(appending: false) { $0.appendedByOthers.count }
        #expect(followed == 0)
        #expect(try readFile(segment).count == whole.count + torn.count)

        // The next append holds the lock: nobody is writing, so the bytes are a dead process's.
        let result = try await log.append([LogEntry(tagged(1, 0))])
        #expect(result.positions == 2..<3)
        try await log.close()
        let reopened = try SegmentLog.open(at: dir.path, options: Self.sharedOptions())
        #expect(reopened.recovery.tornTail == nil, "the append already cut the torn bytes off")
        #expect(try reopened.entries(from: 0).map(\.payload) == [tagged(0, 0), tagged(0, 1), tagged(1, 0)])
        try await reopened.close()
    }

    @Test("a shared log alone retires segments a snapshot covers, and writes snapshots under the commit lock")
    func retiresWhenAlone() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: Self.sharedOptions(segmentSize: 4096))
        for record in 0..<40 { try await log.append([LogEntry(tagged(record, 0, size: 600))]) }
        #expect(log.segments().count > 3)
        let snapshot = try log.writeSnapshot(Array("state".utf8), position: log.endPosition)
        let retired = try log.retireSegments(coveredBy: snapshot)
        #expect(!retired.isEmpty, "alone, the process retires what the snapshot covers")
        #expect(log.whileAlone { true } == true)
        try await log.append([LogEntry(tagged(40, 0))])
        try await log.close()
    }

    @Test("withTurn is refused on an exclusive log, and appending in a following turn is refused")
    func turnsNeedASharedLog() async throws {
        let dir = TemporaryDirectory()
        let exclusive = try SegmentLog.open(at: dir.sub("exclusive"), options: LogOptions(durability: .groupCommit))
        #expect(throws: LogError.self) { try exclusive.withTurn(appending: true) { _ in 0 } }
        try await exclusive.close()
        let shared = try SegmentLog.open(at: dir.sub("shared"), options: Self.sharedOptions())
        #expect(throws: LogError.self) {
            try shared.withTurn(appending: false) { turn in try turn.append([LogEntry(tagged(0, 0))]) { _ in } }
        }
        try await shared.close()
    }
}
