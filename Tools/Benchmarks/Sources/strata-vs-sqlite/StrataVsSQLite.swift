// strata-vs-sqlite: Strata next to SQLite (GRDB) on the same corpus with the same durability, in
// one run — W1 durable appends, W2 cold opens (fresh child processes) — and, with --catch-up,
// strata-sync-bench's catch-up rows as W3. Prints one markdown block; with --article, also puts it
// between the marker comments of a DocC article. Tools/scripts/bench-compare.sh runs it all.
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
    static let optional: Set<String> = ["append", "open"]
    /// strata-sync-bench's output, whose catch-up rows become W3.
    var catchUp: String?
    /// A DocC article whose marker comments get the generated block.
    var article: String?

    /// Distinct corpus events; W1 and W2 cycle over them.
    let corpusCount = 65_536
    // W1
    var batches = [1, 16, 256, 4096]
    var committers = 16
    var rounds: Int { quick ? 1 : 4 }
    var roundSeconds: Double { quick ? 0.15 : 0.5 }
    var warmupSeconds: Double { quick ? 0.05 : 0.15 }
    // W2
    var plan: ColdOpenPlan { quick ? ColdOpenPlan(objects: 10_000, updates: 90_000, tail: 1_000)
                                   : ColdOpenPlan(objects: 100_000, updates: 900_000, tail: 10_000) }
    var openRuns: Int { quick ? 1 : 3 }
    var requiredFreeBytes: Double { quick ? 512 * 1_048_576 : 2 * 1_073_741_824 }
}

let usage = """
    usage: strata-vs-sqlite [--quick] [--dir PATH] [--keep] [--only LIST] [--batches LIST]
                            [--committers N] [--catch-up FILE] [--article PATH]
           strata-vs-sqlite --open-strata STORE | --open-sqlite DATABASE

      --quick           small sizes and short rounds, for a smoke run (numbers are not meaningful)
      --dir PATH        make the run's fresh data directory inside PATH (a real disk, not tmpfs);
                        default: <repo>/.build-bench-data, else $TMPDIR or /var/tmp
      --keep            leave the data directory in place
      --only LIST       comma-separated subset of append,open
      --batches LIST    W1's events per commit, comma-separated (default 1,16,256,4096)
      --committers N    concurrent single-event committers in W1 (default 16; 0 skips that row)
      --catch-up FILE   strata-sync-bench's report: its catch-up rows (2a, 2b) become W3
      --article PATH    also write the report between the `bench-compare` marker comments of PATH
      --open-strata STORE, --open-sqlite DATABASE
                        the W2 child: open, answer the query, print one line of JSON and exit
    """

@main
struct StrataVsSQLite {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--open-strata": await ColdOpenChild.strata(arguments.value(of: argument, "a path"))
            case "--open-sqlite": ColdOpenChild.sqlite(arguments.value(of: argument, "a path"))
            case "--quick": settings.quick = true
            case "--keep": settings.keep = true
            case "--dir": settings.parent = arguments.value(of: argument, "a path")
            case "--only": settings.only = arguments.names(of: argument, from: Settings.optional)
            case "--batches": settings.batches = arguments.numbers(of: argument)
            case "--committers": settings.committers = arguments.number(of: argument, atLeast: 0)
            case "--catch-up": settings.catchUp = arguments.value(of: argument, "a file")
            case "--article": settings.article = arguments.value(of: argument, "a path")
            case "-h", "--help":
                print(usage)
                return
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        let (place, _) = DataPlace.prepare(parent: settings.parent, prefix: "strata-vs-sqlite", requiredFreeBytes: settings.requiredFreeBytes)
        do {
            let block = try await run(settings, place)
            print(block)
            if let article = settings.article {
                try ArticleBlock.replace(in: article, with: block)
                note("wrote the report into \(article)")
            }
        } catch {
            if !settings.keep { place.remove() }
            fail("benchmark failed: \(error)", status: 1)
        }
        if settings.keep { note("kept \(place.run)") } else { place.remove() }
    }

    static func run(_ settings: Settings, _ place: DataPlace) async throws -> String {
        let started = Date()
        note("fsync probe…")
        let fsync = try FsyncProbe.measure(in: place.run)
        note("  \(FsyncProbe.summary(fsync))")
        note("corpus: \(grouped(settings.corpusCount)) events…")
        let corpus = Corpus(count: settings.corpusCount)
        var report = ComparisonReport(corpus: corpus, settings: settings)
        do {  // the settings every SQLite database of the run gets, for the report
            let path = place.path("pragmas.sqlite")
            let (pool, pragmas) = try SQLiteSetup.open(path)
            try pool.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            report.sqlite = pragmas
        }

        if settings.only.contains("append") {
            let sides: [(name: String, make: (String) async throws -> any Appender)] = [
                ("Strata, fsyncPerRecord", { try await StrataAppender(directory: $0, durability: .fsyncPerRecord, corpus: corpus) }),
                ("Strata, groupCommit", { try await StrataAppender(directory: $0, durability: .groupCommit, corpus: corpus) }),
                ("SQLite WAL, synchronous=FULL", { try SQLiteAppender(directory: $0, corpus: corpus) }),
                ("(raw StrataLog SegmentLog, fsyncPerRecord)", { try SegmentLogAppender(directory: $0, corpus: corpus) }),
            ]
            report.appendSides = sides.map(\.name)
            var configurations = settings.batches.map { (batch: $0, writers: 1) }
            if settings.committers > 0 { configurations.append((batch: 1, writers: settings.committers)) }
            for (batch, writers) in configurations {
                note("W1: \(writers) × \(batch) event(s) per commit…")
                let results = try await appendComparison(sides: sides, batch: batch, writers: writers,
                                                         rounds: settings.rounds, roundSeconds: settings.roundSeconds,
                                                         warmupSeconds: settings.warmupSeconds, directory: place.run,
                                                         keep: settings.keep)
                for (name, result) in zip(report.appendSides, results) {
                    note("  \(name): \(rate(result.sample.eventsPerSecond)) events/s, p50 \(latency(percentile(result.sample.sortedLatencies(), 50))), \(fixed(result.bytesPerEvent, 1)) B/event")
                }
                report.append.append((batch, writers, results))
            }
        }

        if settings.only.contains("open") {
            let plan = settings.plan
            note("W2: building the stores (\(grouped(plan.objects)) objects, \(grouped(plan.objects + plan.updates)) events + \(grouped(plan.tail)) tail)…")
            let build = try await ColdOpenStores.build(plan, corpus: corpus, directory: place.run)
            report.openBuild = build
            var runs = [ColdOpenRuns(), ColdOpenRuns(), ColdOpenRuns()]
            let children = [("--open-strata", ColdOpenStores.replayPath(place.run)),
                            ("--open-strata", ColdOpenStores.snapshotPath(place.run)),
                            ("--open-sqlite", ColdOpenStores.sqlitePath(place.run))]
            for round in 0..<settings.openRuns {
                for (index, child) in children.enumerated() {
                    let probe = try ColdOpenChild.probe(child.0, child.1)
                    guard probe.objects == build.expectedObjects, probe.errors == build.expectedErrors else {
                        throw BenchError("\(child.1) answered \(probe.objects) objects, \(probe.errors) errors; expected \(build.expectedObjects), \(build.expectedErrors)")
                    }
                    runs[index].runs.append(probe)
                }
                note("  round \(round + 1): " + runs.map { fixed($0.runs.last!.answerSeconds, 3) + " s" }.joined(separator: ", "))
            }
            guard runs[0].median.fromSnapshot == false, runs[1].median.fromSnapshot else {
                throw BenchError("the replay store opened from a snapshot, or the snapshot store without one")
            }
            report.open = runs
        }

        if let path = settings.catchUp {
            report.catchUp = try CatchUpRows.read(path)
        }
        report.machine = "**Machine:** \(Machine.cores) cores"
            + (Machine.cpuModel.map { " (\($0))" } ?? "")
            + ", " + (Machine.memoryBytes.map { bytes($0) + " RAM" } ?? "RAM unknown")
            + "; data on \(place.fileSystem); fsync: \(FsyncProbe.summary(fsync)); \(timestamp(started))"
            + (settings.quick ? " — **--quick run: numbers are not meaningful**" : "")
        return report.render()
    }
}
