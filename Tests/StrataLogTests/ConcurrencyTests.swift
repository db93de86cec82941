import Foundation
import Synchronization
import Testing
@testable import StrataLog

@Suite("Concurrent appenders and readers")
struct ConcurrencyTests {
    @Test("Concurrent appenders get unique contiguous positions and every acknowledged record is readable", arguments: [Durability.groupCommit, .fsyncPerRecord, .buffered])
    func concurrentAppenders(durability: Durability) async throws {
        let dir = TemporaryDirectory()
        var options = LogOptions(durability: durability)
        options.segmentSize = 8192
        let log = try SegmentLog.open(at: dir.path, options: options)
        let writers = 16
        let perWriter = 40
        let results = try await withThrowingTaskGroup(of: [(Int, Int, Range<LogPosition>)].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var mine: [(Int, Int, Range<LogPosition>)] = []
                    for n in 0..<perWriter {
                        let count = 1 + n % 3
                        let result = try await log.append((0..<count).map { LogEntry(tagged(writer * 1000 + n, $0, size: 40)) })
                        mine.append((writer, n, result.positions))
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let ranges = results.map(\.2).sorted { $0.lowerBound < $1.lowerBound }
        #expect(ranges.first?.lowerBound == 0)
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.upperBound == b.lowerBound) }
        try await log.close()

        let reopened = try SegmentLog.open(at: dir.path, options: options)
        let entries = try allEntries(reopened)
        #expect(entries.count == ranges.last?.upperBound.asInt)
        for (writer, n, positions) in results {
            for (i, position) in positions.enumerated() {
                #expect(entries[Int(position)].payload == tagged(writer * 1000 + n, i, size: 40))
            }
        }
    }

    @Test("Readers running during appends never see a partial record", arguments: [Durability.buffered, .groupCommit])
    func readersDuringAppends(durability: Durability) async throws {
        let dir = TemporaryDirectory()
        var options = LogOptions(durability: durability)
        options.segmentSize = 16 << 10
        let log = try SegmentLog.open(at: dir.path, options: options)
        let progress = ReaderProgress()
        // Each record r holds r % 7 + 1 entries, all tagged with r: a reader can tell a whole
        // record from a partial one.
        // The appender goes on until the readers have read the log many times while it grew.
        async let appended: Int = {
            var rng = SeededGenerator(seed: 3)
            var r = 0
            while r < 400 || (progress.reads.load(ordering: .relaxed) < 50 && r < 50_000) {
                let count = r % 7 + 1
                try await log.append((0..<count).map { LogEntry(tagged(r, $0, size: Int.random(in: 10...300, using: &rng))) })
                r += 1
                await Task.yield()
            }
            progress.done.store(true, ordering: .sequentiallyConsistent)
            return r
        }()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    while !progress.done.load(ordering: .sequentiallyConsistent) {
                        var cursor = try log.records(from: 0)
                        var expected = 0
                        while let record = try cursor.next() {
                            let r = expected
                            #expect(record.entries.count == r % 7 + 1, "record \(r) partially visible")
                            for (i, entry) in record.entries.enumerated() {
                                #expect(entry.payload.starts(with: Array("r\(r)e\(i)|".utf8)))
                            }
                            expected += 1
                        }
                        progress.reads.add(1, ordering: .relaxed)
                        await Task.yield()
                    }
                }
            }
            try await group.waitForAll()
        }
        let records = try await appended
        #expect(progress.reads.load(ordering: .relaxed) >= 50)
        #expect(try allEntries(log).count == (0..<records).reduce(0) { $0 + $1 % 7 + 1 })
    }

    @Test("A failed fsync is fatal to the appender until the log is reopened")
    func fsyncFailureIsFatal() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: LogOptions(durability: .groupCommit))
        try await log.append(payloads: [[1]])
        FaultInjection.failSyncs(under: dir.path, errno: EIO)
        defer { FaultInjection.clear(dir.path) }
        do {
            try await log.append(payloads: [[2]])
            Issue.record("append succeeded although its fsync failed")
        } catch let error as LogError {
            #expect(error.code == .appenderFailed)
            #expect(error.errno == EIO)
        }
        FaultInjection.clear(dir.path)
        // Even with a healthy disk again, this log object refuses: the failed fsync may have
        // dropped pages, so only a reopen (which re-reads the file) can tell what is there.
        do {
            try await log.append(payloads: [[3]])
            Issue.record("append accepted after a failed fsync")
        } catch let error as LogError {
            #expect(error.code == .appenderFailed)
        }
        // Closing a failed log releases it (without a final sync) for the reopen.
        try await log.close()
        let reopened = try SegmentLog.open(at: dir.path, options: LogOptions(durability: .groupCommit))
        #expect(try allEntries(reopened).first?.payload == [1])
        try await reopened.append(payloads: [[4]])
        #expect(try allEntries(reopened).last?.payload == [4])
    }
}

/// Shared between the appending task and the reader tasks.
final class ReaderProgress: Sendable {
    let done = Atomic<Bool>(false)
    let reads = Atomic<Int>(0)
}

extension LogPosition {
    var asInt: Int { Int(self) }
}

@Suite("One writer per log")
struct LockTests {
    @Test("A second open of the same log is refused until the first is closed")
    func secondOpenRefused() async throws {
        let dir = TemporaryDirectory()
        let first = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        try await first.append(payloads: [[1]])
        do {
            _ = try SegmentLog.open(at: dir.path, options: bufferedOptions())
            Issue.record("two writers opened one log")
        } catch let error as LogError {
            #expect(error.code == .locked)
        }
        #expect(throws: LogError.self) { try SegmentLog.salvage(at: dir.path) }
        try await first.close()
        let second = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        #expect(try allEntries(second).map(\.payload) == [[1]])
    }
}

@Suite("Submitting without waiting")
struct SubmitTests {
    @Test("Completions of submitted records arrive once each, in position order", arguments: [Durability.groupCommit, .fsyncPerRecord, .buffered])
    func completionsInOrder(durability: Durability) async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: LogOptions(durability: durability))
        let seen = CompletionLog()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for n in 0..<25 {
                        try log.submit([LogEntry(tagged(writer, n))]) { result in
                            if case .success(let appended) = result { seen.positions.withLock { $0.append(appended.positions.lowerBound) } }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        try await log.close()  // waits for every queued record
        #expect(seen.positions.withLock { $0 } == (0..<200).map { LogPosition($0) })
    }
}

final class CompletionLog: Sendable {
    let positions = Mutex<[LogPosition]>([])
}
