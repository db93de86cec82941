import ArgumentParser
import Strata

/// `strata verify LOG [--repair]`: checks every record of a segment log; exit 1 with the first
/// problem's file and byte offset. (The full store-level verify comes with the CLI issue.)
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every record, position and snapshot of a log directory."
    )

    @Argument(help: "The log directory.")
    var directory: String

    @Flag(help: "Truncate the log at the first bad record (copies of what is cut are kept).")
    var repair = false

    @Flag(help: "Do not ask before repairing.")
    var yes = false

    func run() throws {
        let report: VerifyReport
        do {
            report = try SegmentLog.verify(at: directory)
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        print("\(report.segments) segments, \(report.records) records, \(report.entries) entries, positions \(report.startPosition ?? 0)..<\(report.endPosition ?? 0)")
        if let tail = report.tornTail {
            print("torn tail in \(tail.segment) at byte \(tail.offset) (\(tail.droppedBytes) bytes; truncated on next open): \(tail.reason)")
        }
        for name in report.staleIndexes { print("stale index for \(name) (rebuilt on next open)") }
        for (info, problem) in report.snapshots {
            print("snapshot \(info.name): \(problem.map { "BAD: \($0)" } ?? "ok")")
        }
        guard let problem = report.problems.first else {
            if report.isHealthy { print("ok") } else { throw ExitCode(1) }
            return
        }
        print("problem: \(problem)")
        guard repair else { throw ExitCode(1) }
        if !yes {
            print("Truncate the log at \(problem.file ?? "?") byte \(problem.offset ?? 0)? [y/N] ", terminator: "")
            guard readLine()?.lowercased().hasPrefix("y") == true else { throw ExitCode(1) }
        }
        let salvage = try SegmentLog.salvage(at: directory)
        print("repaired: truncated \(salvage.truncatedSegment ?? "-") at byte \(salvage.truncatedAt.map(String.init) ?? "-"), removed \(salvage.removedSegments.count) segment(s), dropped \(salvage.droppedRecords) verifiable record(s) / \(salvage.droppedEntries) entries / \(salvage.droppedBytes) bytes; copies in \(salvage.quarantine ?? "-"); log now ends at position \(salvage.endPosition)")
    }
}
