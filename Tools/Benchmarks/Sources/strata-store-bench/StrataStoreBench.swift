// strata-store-bench: measures the Strata store — commit throughput, cold open by full replay,
// cold open from a snapshot, resident memory per object, and what automatic compaction costs a
// committer and buys the next open — in one run, and prints a markdown table. Opens are measured
// in fresh processes (this executable re-run with `--open-only`).
//
//     swift run -c release --package-path Tools/Benchmarks strata-store-bench [--quick] [--dir PATH] …
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog

#if canImport(Glibc)
import Glibc
#endif

struct Settings {
    var quick = false
    var parent: String?
    var keep = false
    var only: Set<String> = Settings.optional
    static let optional: Set<String> = ["commit", "replay", "snapshot", "autocompact"]

    // 1. commit throughput: every combination of these, each on a fresh store.
    let transactionSizes = [1, 256]
    let durabilities: [(name: String, value: Durability)] = [("buffered", .buffered), ("groupCommit", .groupCommit)]
    /// The concurrent writer count (`--writers`); 1 writer always runs too.
    var writers = 16
    var commitSeconds: Double { quick ? 0.2 : 2 }
    var warmupSeconds: Double { quick ? 0.05 : 0.3 }

    /// Events per transaction when building the stores to open.
    let perTransaction = 256
    // 2. the replay store: objects inserted, then single-field updates spread over them.
    var replayObjects: Int { quick ? 10_000 : 100_000 }
    var replayUpdates: Int { quick ? 90_000 : 900_000 }
    // 3./4. the snapshot store: objects, compact(), then a tail of updates.
    var snapshotObjects: Int { quick ? 100_000 : 1_000_000 }
    var tailUpdates: Int { quick ? 1_000 : 10_000 }
    /// Fresh-process opens per store (`--open-runs`); the median counts.
    var openRuns: Int? = nil
    var effectiveOpenRuns: Int { openRuns ?? (quick ? 1 : 3) }
    // 5. automatic compaction: single-insert commits into fresh stores with the default policy and
    // with `.disabled`, in rounds of one store per side (ABBA order with 2 rounds), one writer.
    var autoCompactionCommits: Int? = nil
    var effectiveAutoCompactionCommits: Int { autoCompactionCommits ?? (quick ? 150_000 : 300_000) }
    var autoCompactionRounds: Int { quick ? 1 : 2 }
    /// Refuse to start with less free space than this where the data goes.
    var requiredFreeBytes: Double { quick ? 512 * 1_048_576 : 3 * 1_073_741_824 }
}

let usage = """
    usage: strata-store-bench [--quick] [--dir PATH] [--keep] [--only LIST] [--writers N] [--open-runs N]
                              [--auto-commits N]
           strata-store-bench --open-only STORE

      --quick         small counts and short rounds, for a smoke run (numbers are not meaningful)
      --dir PATH      make the run's fresh data directory inside PATH (must be on a real disk, not
                      tmpfs); default: <repo>/.build-bench-data, else $TMPDIR or /var/tmp
      --keep          leave the data directory (and the stores in it) in place
      --only LIST     comma-separated subset of commit,replay,snapshot,autocompact
      --writers N     concurrent writer tasks in the multi-writer commit rows (default 16)
      --open-runs N   fresh-process opens per store; the median counts (default 3, 1 with --quick)
      --auto-commits N
                      single-insert commits per store in the automatic-compaction rows 5a-5c
                      (default 300,000; 150,000 with --quick)
      --open-only STORE
                      open STORE in this process, run count("Item"), print the measurements as one
                      line of JSON and exit (what the benchmark runs in its child processes; also
                      the thing to put under perf)
    """

@main
struct StrataStoreBench {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--open-only": await OpenChild.run(arguments.value(of: argument, "a store path"))
            case "--quick": settings.quick = true
            case "--keep": settings.keep = true
            case "--dir": settings.parent = arguments.value(of: argument, "a path")
            case "--only": settings.only = arguments.names(of: argument, from: Settings.optional)
            case "--writers": settings.writers = arguments.number(of: argument)
            case "--open-runs": settings.openRuns = arguments.number(of: argument)
            case "--auto-commits": settings.autoCompactionCommits = arguments.number(of: argument)
            case "-h", "--help":
                print(usage)
                return
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        let (place, free) = DataPlace.prepare(parent: settings.parent, prefix: "strata-store-bench", requiredFreeBytes: settings.requiredFreeBytes)
        do {
            try await run(settings, place, freeBytes: free)
        } catch {
            if !settings.keep { place.remove() }
            fail("benchmark failed: \(error)", status: 1)
        }
        if settings.keep { note("kept \(place.run)") } else { place.remove() }
    }

    static func run(_ settings: Settings, _ place: DataPlace, freeBytes: Double?) async throws {
        let started = Date()
        var report = Report()

        // 1. Commit throughput.
        if settings.only.contains("commit") {
            let values = itemValues(count: 4096, seed: 1)
            var letter = UInt8(ascii: "a")
            for durability in settings.durabilities {
                for size in settings.transactionSizes {
                    for writers in [1, settings.writers] {
                        let name = "commit-\(durability.name)-\(size)-\(writers)"
                        note("commit: \(size) event(s)/transaction, \(durability.name), \(writers) writer(s), \(fixed(settings.commitSeconds, 1)) s…")
                        let store = try await openStore(place.path(name), durability.value)
                        _ = try await commitLoad(store, eventsPerTransaction: size, writers: writers,
                                                 until: monotonicNanos() + UInt64(settings.warmupSeconds * 1e9),
                                                 values: values, seed: 0)
                        let sample = try await commitLoad(store, eventsPerTransaction: size, writers: writers,
                                                          until: monotonicNanos() + UInt64(settings.commitSeconds * 1e9),
                                                          values: values, seed: 1_000_003)
                        try await store.close()
                        if !settings.keep { try? FileManager.default.removeItem(atPath: place.path(name)) }
                        let latencies = sample.sortedLatencies()
                        note("  \(rate(sample.operationsPerSecond)) transactions/s, \(rate(sample.eventsPerSecond)) events/s")
                        report.add("1\(Character(Unicode.Scalar(letter))). commit, \(size) insert\(size == 1 ? "" : "s")/tx, \(durability.name), \(writers) writer\(writers == 1 ? "" : "s")",
                                   "\(rate(sample.operationsPerSecond)) tx/s ≙ \(rate(sample.eventsPerSecond)) events/s; commit latency p50 \(latency(percentile(latencies, 50))), p99 \(latency(percentile(latencies, 99))) (\(grouped(sample.operations)) tx in \(fixed(sample.seconds, 2)) s)",
                                   "— (informational)", "—")
                        letter += 1
                    }
                }
            }
        }

        // Build the stores that the fresh processes open.
        let emptyPath = place.path("empty")
        let replayPath = place.path("replay")
        let snapshotPath = place.path("snapshot")
        var replayBuild: BuildReport?
        var snapshotBuild: BuildReport?
        if settings.only.contains("replay") {
            let events = settings.replayObjects + settings.replayUpdates
            note("building the replay store: \(grouped(settings.replayObjects)) inserts + \(grouped(settings.replayUpdates)) updates, \(settings.perTransaction)/tx, buffered…")
            let build = try await buildReplayStore(at: replayPath, objects: settings.replayObjects, updates: settings.replayUpdates,
                                                   perTransaction: settings.perTransaction)
            note("  \(rate(build.write.eventsPerSecond)) events/s (\(grouped(events)) events in \(fixed(build.write.seconds, 2)) s), \(bytes(Double(build.diskBytes))) on disk")
            replayBuild = build
        }
        if settings.only.contains("snapshot") {
            note("building the snapshot store: \(grouped(settings.snapshotObjects)) inserts, \(settings.perTransaction)/tx, buffered, compact(), \(grouped(settings.tailUpdates)) updates…")
            let build = try await buildSnapshotStore(at: snapshotPath, objects: settings.snapshotObjects, tailUpdates: settings.tailUpdates,
                                                     perTransaction: settings.perTransaction)
            note("  inserts \(rate(build.write.eventsPerSecond)) events/s, compact \(fixed(build.compactSeconds ?? 0, 2)) s, \(bytes(Double(build.diskBytes))) on disk")
            snapshotBuild = build
            try await buildEmptyStore(at: emptyPath)
        }

        // The fresh-process opens, interleaved so that drift hits every store alike.
        var replayProbes = ProbeSet()
        var snapshotProbes = ProbeSet()
        var emptyProbes = ProbeSet()
        if replayBuild != nil || snapshotBuild != nil {
            note("cold opens in fresh processes: \(settings.effectiveOpenRuns) round(s)…")
            for round in 0..<settings.effectiveOpenRuns {
                if snapshotBuild != nil { emptyProbes.runs.append(try OpenChild.probe(emptyPath)) }
                if replayBuild != nil { replayProbes.runs.append(try OpenChild.probe(replayPath)) }
                if snapshotBuild != nil { snapshotProbes.runs.append(try OpenChild.probe(snapshotPath)) }
                note("  round \(round + 1): "
                     + [replayProbes.runs.last.map { "replay \(fixed($0.openSeconds, 3)) s" },
                        snapshotProbes.runs.last.map { "snapshot \(fixed($0.openSeconds, 3)) s" },
                        emptyProbes.runs.last.map { "empty \(fixed($0.openSeconds, 3)) s" }].compactMap { $0 }.joined(separator: ", "))
            }
        }

        // 2. Cold open by full replay.
        if let build = replayBuild {
            let events = settings.replayObjects + settings.replayUpdates
            report.add("2a. build: \(grouped(settings.replayObjects)) inserts + \(grouped(settings.replayUpdates)) single-field updates, \(settings.perTransaction) events/tx, buffered (incl. close)",
                       "\(rate(build.write.eventsPerSecond)) events/s (\(grouped(events)) events, \(grouped(build.write.operations)) tx in \(fixed(build.write.seconds, 2)) s); \(bytes(Double(build.diskBytes))) on disk",
                       "— (informational)", "—")
            let probe = replayProbes.median
            guard probe.snapshotPosition == nil, probe.replayedEvents >= events, probe.count == settings.replayObjects else {
                throw BenchError("the replay store opened with snapshot \(String(describing: probe.snapshotPosition)), \(probe.replayedEvents) events replayed, count \(probe.count); expected no snapshot, \(events)+ events, \(settings.replayObjects) objects")
            }
            let perSecond = Double(probe.replayedEvents) / probe.openSeconds
            report.add("2b. cold open, full replay of \(grouped(probe.replayedEvents)) events (fresh process)",
                       "\(rate(perSecond)) events/s: open \(fixed(probe.openSeconds, 3)) s (median of \(replayProbes.openTimes)), \(grouped(probe.replayedTransactions)) tx; process \(fixed(probe.processSeconds ?? 0, 3)) s; count(\"Item\") = \(grouped(probe.count)) in \(fixed(probe.querySeconds * 1000, 1)) ms; RSS after open \(bytes(Double(probe.rssAfterOpen))), peak \(bytes(Double(probe.peakRSS)))",
                       "≥ 1M events/s",
                       verdict(perSecond / 1e6, goal: 1, unit: "× goal"))
        }

        // 3. Cold open from a snapshot plus a tail; 4. resident memory per object.
        if let build = snapshotBuild {
            report.add("3a. build: \(grouped(settings.snapshotObjects)) inserts, \(settings.perTransaction) events/tx, buffered (incl. flush)",
                       "\(rate(build.write.eventsPerSecond)) events/s (\(grouped(build.write.events)) events in \(fixed(build.write.seconds, 2)) s)",
                       "— (informational)", "—")
            report.add("3b. compact() of \(grouped(settings.snapshotObjects)) objects, then \(grouped(settings.tailUpdates)) updates (buffered, incl. close)",
                       "compact \(fixed(build.compactSeconds ?? 0, 2)) s, snapshot \(build.snapshotBytes.map { bytes(Double($0)) } ?? "?") (\(build.snapshotBytes.map { fixed(Double($0) / Double(settings.snapshotObjects), 1) } ?? "?") B/object); tail \(rate(build.tail.eventsPerSecond)) events/s; store \(bytes(Double(build.diskBytes))) on disk",
                       "— (informational)", "—")
            let probe = snapshotProbes.median
            guard probe.snapshotPosition != nil, probe.count == settings.snapshotObjects else {
                throw BenchError("the snapshot store opened with snapshot \(String(describing: probe.snapshotPosition)), count \(probe.count); expected a snapshot and \(settings.snapshotObjects) objects")
            }
            report.add("3c. cold open, snapshot of \(grouped(settings.snapshotObjects)) objects + \(grouped(probe.replayedEvents))-event tail (fresh process)",
                       "open \(fixed(probe.openSeconds, 3)) s (median of \(snapshotProbes.openTimes)); snapshot at position \(probe.snapshotPosition!), \(grouped(probe.replayedEvents)) events / \(grouped(probe.replayedTransactions)) tx replayed; process \(fixed(probe.processSeconds ?? 0, 3)) s; count(\"Item\") = \(grouped(probe.count)) in \(fixed(probe.querySeconds * 1000, 1)) ms",
                       "≤ 1 s",
                       verdictAtMost(probe.openSeconds, goal: 1))

            let rss = snapshotProbes.medianOf(\.rssAfterOpen)
            let emptyRSS = emptyProbes.medianOf(\.rssAfterOpen)
            let perObject = Double(rss - emptyRSS) / Double(settings.snapshotObjects)
            let inProcess = Double(snapshotProbes.medianOf { $0.rssAfterOpen - $0.rssBeforeOpen }) / Double(settings.snapshotObjects)
            let peak = snapshotProbes.medianOf(\.peakRSS)
            let afterQuery = snapshotProbes.medianOf(\.rssAfterQuery)
            report.add("4. resident memory per object (3c's VmRSS after open − an empty store's) / \(grouped(settings.snapshotObjects))",
                       "\(fixed(perObject, 0)) B/object: VmRSS \(bytes(Double(rss))) vs \(bytes(Double(emptyRSS))) for an empty store (medians); in-process delta \(fixed(inProcess, 0)) B/object; peak (VmHWM) \(bytes(Double(peak))) ≙ \(fixed(Double(peak - emptyRSS) / Double(settings.snapshotObjects), 0)) B/object; after count() \(bytes(Double(afterQuery)))",
                       "≤ 400 B/object",
                       verdictAtMost(perObject, goal: 400))
        }

        // 5. Automatic compaction: the default policy against `.disabled`, side by side.
        if settings.only.contains("autocompact") {
            try await autoCompactionRows(settings, place, into: &report)
        }

        report.machine = "**Machine:** \(Machine.cores) cores"
            + (Machine.cpuModel.map { " (\($0))" } ?? "")
            + ", " + (Machine.memoryBytes.map { bytes($0) + " RAM" } ?? "RAM unknown")
            + ", data on \(place.fileSystem)" + (freeBytes.map { " (\(bytes($0)) free)" } ?? "")
            + ", \(timestamp(started))"
            + (settings.quick ? " — **--quick run: numbers are not meaningful**" : "")
        print(report.render())
    }

    /// Rows 5a-5c: single-insert commits into fresh stores, one with the default automatic
    /// compaction and one with `.disabled`, then fresh-process opens of both.
    static func autoCompactionRows(_ settings: Settings, _ place: DataPlace, into report: inout Report) async throws {
        let commits = settings.effectiveAutoCompactionCommits
        let values = itemValues(count: 4096, seed: 5)
        var automatic = AutoCompactionSide(policy: .default)
        var disabled = AutoCompactionSide(policy: .disabled)
        // ABBA: drift over the run hits both sides alike. Each side waits for its own compaction
        // before the other starts, so the two never share the CPU.
        var order: [Bool] = []  // true: the default policy
        for round in 0..<settings.autoCompactionRounds { order += round % 2 == 0 ? [true, false] : [false, true] }
        for (index, isDefault) in order.enumerated() {
            let round = index / 2 + 1
            let name = isDefault ? "autocompact-default-\(round)" : "autocompact-disabled-\(round)"
            note("auto-compaction: \(grouped(commits)) single-insert commits, buffered, 1 writer, \(isDefault ? "default policy" : ".disabled") (round \(round))…")
            if isDefault {
                try await autoCompactionRound(&automatic, path: place.path(name), commits: commits, values: values)
            } else {
                try await autoCompactionRound(&disabled, path: place.path(name), commits: commits, values: values)
            }
            let side = isDefault ? automatic : disabled
            note("  \(rate(side.sample.operationsPerSecond)) commits/s so far; \(side.compactions) automatic compaction(s), drain \(fixed(seconds(side.drainNanos), 2)) s, \(grouped(side.eventsPastSnapshot.last ?? 0)) events past the snapshot")
        }

        // The first round's stores in fresh processes, interleaved.
        let automaticPath = automatic.paths[0]
        let disabledPath = disabled.paths[0]
        var automaticProbes = ProbeSet()
        var disabledProbes = ProbeSet()
        note("auto-compaction: cold opens of the resulting stores, \(settings.effectiveOpenRuns) round(s)…")
        for round in 0..<settings.effectiveOpenRuns {
            automaticProbes.runs.append(try OpenChild.probe(automaticPath))
            disabledProbes.runs.append(try OpenChild.probe(disabledPath))
            note("  round \(round + 1): auto-compacted \(fixed(automaticProbes.runs.last!.openSeconds, 3)) s, not compacted \(fixed(disabledProbes.runs.last!.openSeconds, 3)) s")
        }
        if !settings.keep {
            for path in automatic.paths + disabled.paths { try? FileManager.default.removeItem(atPath: path) }
        }

        func describe(_ side: AutoCompactionSide) -> (text: String, sorted: [UInt64]) {
            let sorted = side.sample.sortedLatencies()
            // The stalls the percentiles do not show: a commit that waited for a compaction
            // encoding the projection under the store's lock.
            let slow = sorted.filter { $0 >= 10_000_000 }
            let text = "\(rate(side.sample.operationsPerSecond)) commits/s (\(grouped(side.sample.operations)) in \(fixed(side.sample.seconds, 2)) s); "
                + "latency p50 \(latency(percentile(sorted, 50))), p99 \(latency(percentile(sorted, 99))), p99.9 \(latency(percentile(sorted, 99.9))), max \(latency(sorted.last ?? 0)); "
                + "\(slow.count) commit\(slow.count == 1 ? "" : "s") of ≥ 10 ms, \(fixed(seconds(slow.reduce(0, +)), 2)) s together"
            return (text, sorted)
        }
        let perStore = "\(grouped(commits)) single-insert commits per store, buffered, 1 writer, \(settings.autoCompactionRounds == 1 ? "1 store" : "\(settings.autoCompactionRounds) stores (ABBA order)")"
        let (automaticText, automaticSorted) = describe(automatic)
        let (disabledText, disabledSorted) = describe(disabled)
        let pastSnapshot = automatic.eventsPastSnapshot.map(grouped).joined(separator: ", ")
        let policy = AutoCompaction.default
        report.add("5a. automatic compaction, default policy (compact past \(grouped(policy.eventsSinceSnapshot ?? 0)) events or \(bytes(Double(policy.bytesSinceSnapshot ?? 0))) since the newest snapshot): \(perStore)",
                   automaticText + "; \(automatic.compactionsDuringCommits) automatic compaction(s) finished during the commits, \(automatic.compactionsAfterCommits) after them (waited \(fixed(seconds(automatic.drainNanos), 2)) s); events past the newest snapshot at the end: \(pastSnapshot)",
                   "— (informational)",
                   "÷ 5b: throughput \(fixed(automatic.sample.operationsPerSecond / disabled.sample.operationsPerSecond, 2))×, "
                   + "p50 \(fixed(ratio(percentile(automaticSorted, 50), percentile(disabledSorted, 50)), 2))×, "
                   + "p99 \(fixed(ratio(percentile(automaticSorted, 99), percentile(disabledSorted, 99)), 2))×, "
                   + "max \(fixed(ratio(automaticSorted.last ?? 0, disabledSorted.last ?? 0), 1))×")
        report.add("5b. automatic compaction `.disabled`: \(perStore)",
                   disabledText + "; \(disabled.compactions) compactions",
                   "— (baseline for 5a)", "—")

        let a = automaticProbes.median
        let d = disabledProbes.median
        guard a.count == commits, d.count == commits, d.snapshotPosition == nil,
              (a.snapshotPosition != nil) == (automatic.compactions > 0) else {
            throw BenchError("row 5's stores opened with \(a.count) and \(d.count) objects (expected \(commits)), snapshots \(String(describing: a.snapshotPosition)) and \(String(describing: d.snapshotPosition)) (expected one only after \(automatic.compactions) automatic compaction(s))")
        }
        func opened(_ probe: OpenProbe) -> String {
            (probe.snapshotPosition.map { "snapshot at position \(grouped(Int($0))) + \(grouped(probe.replayedEvents)) events replayed" } ?? "full replay of \(grouped(probe.replayedEvents)) events")
        }
        report.add("5c. cold open of 5a's and 5b's first store (fresh process)",
                   "auto-compacted: open \(fixed(a.openSeconds, 3)) s (median of \(automaticProbes.openTimes)), \(opened(a)), RSS after open \(bytes(Double(a.rssAfterOpen))), peak \(bytes(Double(a.peakRSS))), \(bytes(Double(automatic.diskBytes))) on disk; "
                   + "not compacted: open \(fixed(d.openSeconds, 3)) s (median of \(disabledProbes.openTimes)), \(opened(d)), RSS after open \(bytes(Double(d.rssAfterOpen))), peak \(bytes(Double(d.peakRSS))), \(bytes(Double(disabled.diskBytes))) on disk",
                   "— (informational)",
                   "auto-compacted ÷ not: open \(fixed(a.openSeconds / d.openSeconds, 2))×, on disk \(fixed(Double(automatic.diskBytes) / Double(max(1, disabled.diskBytes)), 2))×")
    }

    static func ratio(_ a: UInt64, _ b: UInt64) -> Double { b == 0 ? 0 : Double(a) / Double(b) }

    /// For goals that are upper bounds: shows the value against the bound.
    static func verdictAtMost(_ value: Double, goal: Double) -> String {
        "\(fixed(value / goal, 2))× the bound — " + (value <= goal ? "PASS" : "**MISS**")
    }
}
