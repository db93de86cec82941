// Cold opens in a fresh process. The parent re-runs this executable as
// `strata-store-bench --open-only PATH`; the child opens the store, runs one query, prints one
// line of JSON (the `OpenProbe`) on stdout and exits. A fresh process has a fresh heap, so its
// resident set is the store's, not what earlier workloads left behind.
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog

/// What the child measured.
struct OpenProbe: Codable {
    /// Wall time of `Store.open(at:schema:options:)`, in the child.
    var openSeconds: Double
    var replayedEvents: Int
    var replayedTransactions: Int
    /// `openReport.snapshot?.position` (nil: no snapshot, a full replay).
    var snapshotPosition: UInt64?
    /// `count("Item")` after the open, and how long it took.
    var count: Int
    var querySeconds: Double
    /// VmRSS before the open, right after it, and after the query; VmHWM at the end.
    var rssBeforeOpen: Int
    var rssAfterOpen: Int
    var rssAfterQuery: Int
    var peakRSS: Int
    /// Measured by the parent: the child's whole life, from spawn to exit.
    var processSeconds: Double?
}

enum OpenChild {
    /// The child's `main`: never returns.
    static func run(_ path: String) async -> Never {
        do {
            // No automatic compaction: an open that replayed past the threshold would compact
            // afterwards, so the replay store would open from a snapshot from the second run on,
            // and close() would wait for that compaction. It does not change what the open itself
            // does: it loads the newest snapshot, if any, and replays the log past it.
            var options = StoreOptions(durability: .buffered)
            options.autoCompaction = .disabled
            let before = ProcessMemory.current()
            let start = monotonicNanos()
            let store = try await Store.open(at: path, schema: benchSchema, options: options)
            let opened = monotonicNanos()
            let afterOpen = ProcessMemory.current()
            let count = store.count("Item")
            let queried = monotonicNanos()
            let afterQuery = ProcessMemory.current()
            let report = store.openReport
            let probe = OpenProbe(openSeconds: seconds(opened - start),
                                  replayedEvents: report.replayedEvents,
                                  replayedTransactions: report.replayedTransactions,
                                  snapshotPosition: report.snapshot?.position,
                                  count: count, querySeconds: seconds(queried - opened),
                                  rssBeforeOpen: before.rss, rssAfterOpen: afterOpen.rss,
                                  rssAfterQuery: afterQuery.rss, peakRSS: ProcessMemory.current().peak)
            try await store.close()
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            print(String(decoding: try encoder.encode(probe), as: UTF8.self))
            exit(0)
        } catch {
            fail("open-only \(path): \(error)", status: 1)
        }
    }

    /// Runs the child on `path` and returns what it printed.
    static func probe(_ path: String) throws -> OpenProbe {
        var (probe, seconds) = try ChildRun.json(OpenProbe.self, arguments: ["--open-only", path])
        probe.processSeconds = seconds
        return probe
    }
}

/// Several probes of one store: the median run (by open time) speaks for them.
struct ProbeSet {
    var runs: [OpenProbe] = []

    var median: OpenProbe { runs.sorted { $0.openSeconds < $1.openSeconds }[runs.count / 2] }
    var openTimes: String { runs.map { fixed($0.openSeconds, 3) }.joined(separator: ", ") + " s" }
    func medianOf(_ value: (OpenProbe) -> Int) -> Int { runs.map(value).sorted()[runs.count / 2] }
}
