import ArgumentParser
import Foundation
import Strata

/// `strata demo`: the main job. For now it exercises the segment log end to end: concurrent
/// group-committed appends across several segments, a snapshot, a reopen, a read-back and a
/// verification. Later issues turn it into the multi-device sync demo.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Write a log and two device stores; show recovery, convergence and compaction."
    )

    @Option(help: "Keep the log in this directory instead of a temporary one.")
    var keep: String?

    func run() async throws {
        let directory = keep ?? NSTemporaryDirectory() + "strata-demo-\(UUID().uuidString)"
        defer { if keep == nil { try? FileManager.default.removeItem(atPath: directory) } }

        var options = LogOptions(durability: .groupCommit)
        options.segmentSize = 16 << 10
        print("Log directory: \(directory)")

        // 1. Four writers append concurrently; group commit shares fsyncs between them.
        let log = try SegmentLog.open(at: directory + "/log", options: options)
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for n in 0..<50 {
                        let entries = (0..<3).map { i in
                            LogEntry(Array("{\"writer\":\(writer),\"note\":\(n),\"part\":\(i),\"text\":\"the quick brown fox\"}".utf8))
                        }
                        try await log.append(entries)
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - started
        print("Appended 600 entries in 200 durable records from 4 writers in \(elapsed.formatted(.units(allowed: [.milliseconds])))")

        // 2. A snapshot of "everything so far" lets the oldest segments go.
        let end = log.endPosition
        let snapshot = try log.writeSnapshot(Array("state as of position \(end)".utf8), position: end)
        let retired = try log.retireSegments(coveredBy: snapshot)
        print("Snapshot \(snapshot.name) covers positions below \(end); retired \(retired.count) segment(s)")
        try await log.append([LogEntry(Array("after the snapshot".utf8))])
        try await log.close()

        // 3. Reopen: recovery checks every record, then show what the log holds.
        let reopened = try SegmentLog.open(at: directory + "/log", options: options)
        print("\nReopened log \(reopened.logID): positions \(reopened.startPosition)..<\(reopened.endPosition)")
        print("Segment                    first      end   records    bytes")
        for segment in reopened.segments() {
            print(segment.name.padding(toLength: 25, withPad: " ", startingAt: 0),
                  String(segment.firstPosition).leftPadded(8), String(segment.endPosition).leftPadded(8),
                  String(segment.recordCount).leftPadded(9), String(segment.byteSize).leftPadded(8))
        }
        if let latest = try reopened.latestValidSnapshot().snapshot {
            print("Newest snapshot: position \(latest.info.position), payload \"\(String(decoding: latest.payload, as: UTF8.self))\"")
        }
        let tail = try reopened.entries(from: reopened.endPosition - 3)
        print("Last entries:")
        for entry in tail {
            print("  #\(entry.position): \(String(decoding: entry.payload, as: UTF8.self))")
        }
        try await reopened.close()

        let report = try SegmentLog.verify(at: directory + "/log")
        let ratio = report.storedBytes > 0 ? Double(report.payloadBytes) / Double(report.storedBytes) : 0
        print("Verify: \(report.records) records, \(report.entries) entries, \(report.storedBytes) bytes on disk for \(report.payloadBytes) bytes of payload (\(String(format: "%.2f", ratio))x); \(report.isHealthy ? "healthy" : "PROBLEMS: \(report.problems)")")

        try await DemoStores.run(in: directory)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
