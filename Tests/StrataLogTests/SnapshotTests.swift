import Foundation
import Testing
@testable import StrataLog

@Suite("Snapshot files and segment retirement")
struct SnapshotTests {
    @Test("A snapshot round-trips, is found as the newest, and retires the segments it covers")
    func snapshotAndRetire() async throws {
        let dir = TemporaryDirectory()
        let options = bufferedOptions(segmentSize: 4096)
        let log = try SegmentLog.open(at: dir.path, options: options)
        for r in 0..<100 { try await log.append([LogEntry(tagged(r, 0, size: 150))]) }
        var rng = SeededGenerator(seed: 8)
        let payload = (0..<(9 << 20)).map { i in i % 64 == 0 ? UInt8.random(in: 0...255, using: &rng) : UInt8(i % 251) }  // spans 3 chunks
        let older = try log.writeSnapshot([1, 2, 3], position: 20)
        let newer = try log.writeSnapshot(payload, position: 60)
        #expect(try log.snapshots().map(\.position) == [60, 20])
        let latest = try #require(try log.latestValidSnapshot().snapshot)
        #expect(latest.info == newer)
        #expect(latest.payload == payload)
        #expect(latest.storedSize < payload.count)

        let before = log.segments()
        let retired = try log.retireSegments(coveredBy: newer)
        #expect(!retired.isEmpty)
        #expect(retired == before.filter { $0.endPosition <= 60 }.map(\.name))
        #expect(log.startPosition > 0 && log.startPosition <= 60)
        for name in retired { #expect(!FileManager.default.fileExists(atPath: dir.sub(name))) }
        #expect(throws: LogError.self) { try log.entries(from: 0) }
        try await log.close()

        // Reopen: the log starts where retirement left it; the snapshot plus the tail has it all.
        let reopened = try SegmentLog.open(at: dir.path, options: options)
        let start = reopened.startPosition
        #expect(start == log.segments().first?.firstPosition ?? start)
        let tail = try reopened.entries(from: 60)
        #expect(tail.map(\.payload) == (60..<100).map { tagged($0, 0, size: 150) })
        #expect(try reopened.readSnapshot(older).payload == [1, 2, 3])
        try reopened.pruneSnapshots(keeping: 1)
        #expect(try reopened.snapshots() == [newer])
    }

    @Test("A damaged newest snapshot falls back to an older one, never to wrong data")
    func damagedSnapshotFallsBack() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        try await log.append(payloads: (0..<10).map { [UInt8($0)] })
        _ = try log.writeSnapshot(Array("old".utf8), position: 5)
        let newest = try log.writeSnapshot(Array(repeating: 7, count: 5000), position: 10)
        let original = try readFile(newest.path)
        for offset in stride(from: 0, to: original.count, by: 3) {
            var bytes = original
            bytes[offset] ^= 0x20
            try writeFile(newest.path, bytes)
            let (snapshot, skipped) = try log.latestValidSnapshot()
            #expect(snapshot?.payload == Array("old".utf8), "flip at \(offset)")
            #expect(skipped.first?.code == .badSnapshot)
            #expect(skipped.first?.file == newest.path)
        }
        // Truncated too.
        try writeFile(newest.path, Array(original.prefix(original.count - 10)))
        #expect(try log.latestValidSnapshot().snapshot?.payload == Array("old".utf8))
        // A snapshot that does not verify cannot be used to retire segments.
        #expect(throws: LogError.self) { try log.retireSegments(coveredBy: newest) }
    }

    @Test("A snapshot from another log, or past the end, is refused")
    func foreignSnapshot() async throws {
        let a = TemporaryDirectory()
        let b = TemporaryDirectory()
        let logA = try SegmentLog.open(at: a.path, options: bufferedOptions())
        let logB = try SegmentLog.open(at: b.path, options: bufferedOptions())
        try await logA.append(payloads: [[1], [2]])
        try await logB.append(payloads: [[1], [2]])
        let info = try logB.writeSnapshot([9], position: 2)
        try FileManager.default.copyItem(atPath: info.path, toPath: a.sub(info.name))
        let (snapshot, skipped) = try logA.latestValidSnapshot()
        #expect(snapshot == nil)
        #expect(skipped.first?.message.contains("another log") == true)
        do {
            try logA.writeSnapshot([1], position: 3)
            Issue.record("snapshot past the end accepted")
        } catch let error as LogError {
            #expect(error.code == .positionOutOfRange)
        }
    }
}
