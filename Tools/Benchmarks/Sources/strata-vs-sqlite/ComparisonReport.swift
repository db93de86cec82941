// The markdown the run prints: the machine line, the goals with their ratios from this run, then
// the W1, W2 and W3 tables.
import BenchSupport
import Foundation

struct ComparisonReport {
    let corpus: Corpus
    let settings: Settings
    var machine = ""
    var sqlite: SQLiteSetup.Pragmas?
    var appendSides: [String] = []
    var append: [(batch: Int, writers: Int, results: [AppendResult])] = []
    var openBuild: ColdOpenBuild?
    /// Replay, snapshot, SQLite.
    var open: [ColdOpenRuns] = []
    var catchUp: CatchUpRows?

    init(corpus: Corpus, settings: Settings) {
        self.corpus = corpus
        self.settings = settings
    }

    func render() -> String {
        var out = machine + "\n\n"
        if let sqlite { out += "**SQLite side:** \(sqlite.summary). **Corpus:** \(grouped(corpus.count)) seeded JSON events of 100–200 B (mean \(fixed(corpus.meanBytes, 1)) B), the same bytes on every side.\n\n" }
        out += goals() + "\n"
        if !append.isEmpty { out += appendTable() + "\n" }
        if !open.isEmpty { out += openTable() + "\n" }
        if let catchUp { out += catchUpTable(catchUp) }
        return out
    }

    // MARK: goals

    private func result(batch: Int, writers: Int) -> [AppendResult]? {
        append.first { $0.batch == batch && $0.writers == writers }?.results
    }

    private func goals() -> String {
        var rows: [[String]] = []
        if let r = result(batch: 256, writers: 1) {
            let speed = r[0].sample.eventsPerSecond / r[2].sample.eventsPerSecond
            rows.append(["W1, 256 events/commit, one committer: events/s, Strata (fsyncPerRecord) ÷ SQLite",
                         "\(rate(r[0].sample.eventsPerSecond)) ÷ \(rate(r[2].sample.eventsPerSecond)) events/s", "≥ 2×",
                         at(least: speed, 2)])
            let size = r[0].bytesPerEvent / r[2].bytesPerEvent
            rows.append(["W1, 256 events/commit: bytes on disk per event, Strata ÷ SQLite",
                         "\(fixed(r[0].bytesPerEvent, 1)) ÷ \(fixed(r[2].bytesPerEvent, 1)) B/event", "≤ 0.5×",
                         at(most: size, 0.5)])
        }
        if let r = result(batch: 1, writers: settings.committers) {
            let speed = r[1].sample.eventsPerSecond / r[2].sample.eventsPerSecond
            rows.append(["W1, \(settings.committers) concurrent committers of one event: events/s, Strata (groupCommit) ÷ SQLite",
                         "\(rate(r[1].sample.eventsPerSecond)) ÷ \(rate(r[2].sample.eventsPerSecond)) events/s", "≥ 5×",
                         at(least: speed, 5)])
        }
        if open.count == 3 {
            let snapshot = open[1].median.answerSeconds
            let sqlite = open[2].median.answerSeconds
            rows.append(["W2, cold open + query: Strata from snapshot ÷ SQLite loading the table",
                         "\(fixed(snapshot, 3)) ÷ \(fixed(sqlite, 3)) s", "≤ 1.0×", at(most: snapshot / sqlite, 1)])
        }
        if let catchUp {
            let best = catchUp.rows.compactMap(CatchUpRows.eventsPerSecond).max()
            rows.append(["W3, catch-up of 1M events over loopback HTTP (strata-sync-bench, best pull limit)",
                         best.map { "\(rate($0)) events/s" } ?? "?", "≥ 300k events/s",
                         best.map { at(least: $0 / 300_000, 1) } ?? "?"])
        }
        return table(["goal", "this run", "target", "ratio — verdict"], rows)
    }

    private func at(least value: Double, _ goal: Double) -> String {
        "\(fixed(value, 2))× — " + (value >= goal ? "PASS" : "**MISS**")
    }

    private func at(most value: Double, _ goal: Double) -> String {
        "\(fixed(value, 2))× — " + (value <= goal ? "PASS" : "**MISS**")
    }

    // MARK: W1

    private func appendTable() -> String {
        var rows: [[String]] = []
        for (batch, writers, results) in append {
            let what = writers == 1 ? "\(grouped(batch)) event\(batch == 1 ? "" : "s")/commit" : "\(writers) committers × 1 event"
            for (side, result) in zip(appendSides, results) {
                let sorted = result.sample.sortedLatencies()
                rows.append([what, side, rate(result.sample.eventsPerSecond), rate(result.sample.operationsPerSecond),
                             latency(percentile(sorted, 50)), latency(percentile(sorted, 99)),
                             "\(fixed(result.bytesPerEvent, 1)) B (\(bytes(Double(result.diskBytes))) for \(grouped(result.eventsWritten)))"])
            }
        }
        let timing = "\(settings.rounds) rounds of \(fixed(settings.roundSeconds, 2)) s per side, the sides taking turns, after a \(fixed(settings.warmupSeconds, 2)) s warm-up each"
        return "### W1: durable append\n\n" + "Fresh store per side and row; \(timing). Latency is per commit, from the call until it returns durable.\n\n"
            + table(["commit", "side", "events/s", "commits/s", "p50", "p99", "on disk per event (total)"], rows)
    }

    // MARK: W2

    private func openTable() -> String {
        let names = ["Strata, full replay (no snapshot)", "Strata, snapshot + tail", "SQLite, table of objects → in-memory objects"]
        let disk = openBuild.map { [$0.replayBytes, $0.snapshotStoreBytes, $0.sqliteBytes] } ?? [0, 0, 0]
        var rows: [[String]] = []
        for (index, runs) in open.enumerated() {
            let p = runs.median
            let what = index == 2 ? "—" : (p.fromSnapshot ? "snapshot + \(grouped(p.replayedEvents)) events" : "\(grouped(p.replayedEvents)) events")
            rows.append([names[index], "**\(fixed(p.answerSeconds, 3)) s** (runs: \(runs.times))", fixed(p.openSeconds, 3) + " s",
                         fixed(p.querySeconds * 1000, 1) + " ms", fixed(p.processSeconds ?? 0, 3) + " s",
                         bytes(Double(p.peakRSS)), bytes(Double(p.rssAfterQuery)), bytes(Double(disk[index])), what])
        }
        var out = "### W2: cold open\n\n"
        if let b = openBuild {
            let plan = settings.plan
            out += "\(grouped(plan.objects)) objects; history of \(grouped(plan.objects)) inserts + \(grouped(plan.updates)) body updates (\(plan.perTransaction) events/transaction, built at \(rate(b.historySample.eventsPerSecond)) events/s, buffered) + a tail of \(grouped(plan.tail)) updates. Snapshot store: `compact()` before the tail took \(fixed(b.compactSeconds, 2)) s, snapshot file \(bytes(Double(b.snapshotBytes))). SQLite table written in \(fixed(b.sqliteSeconds, 2)) s. Query: `count` of objects (\(grouped(b.expectedObjects))) and how many bodies contain `\"level\":\"error\"` (\(grouped(b.expectedErrors))); every side gave both answers. Fresh process per open, \(settings.openRuns) run(s) per store interleaved, the median shown; the files are in the page cache.\n\n"
        }
        return out + table(["store", "open + query (median)", "open", "query", "process life", "peak RSS", "RSS after query", "on disk", "replayed"], rows)
    }

    // MARK: W3

    private func catchUpTable(_ c: CatchUpRows) -> String {
        var out = "### W3: catch-up over loopback HTTP (strata-sync-bench)\n\n"
        if !c.machine.isEmpty { out += "From the same script run: " + c.machine.replacingOccurrences(of: "**Machine:** ", with: "") + "\n\n" }
        return out + table(["workload", "result", "goal", "ratio/verdict"], c.rows)
    }

    private func table(_ header: [String], _ rows: [[String]]) -> String {
        var out = "| " + header.joined(separator: " | ") + " |\n|" + String(repeating: "---|", count: header.count) + "\n"
        for row in rows { out += "| " + row.joined(separator: " | ") + " |\n" }
        return out
    }
}
