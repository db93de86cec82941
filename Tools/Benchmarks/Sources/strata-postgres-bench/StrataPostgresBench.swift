// strata-postgres-bench: the log server on PostgreSQL, side by side in one run against the same
// database — push throughput through one and through three `strata serve` instances next to
// PostgreSQL's own rate for the same rows (multi-row INSERTs of the same bytes, one transaction
// per batch, by the same number of concurrent writers), catch-up of 1M events over HTTP from
// PostgreSQL next to the embedded storage, and long-poll wake-ups across instances (p50/p99).
// The instances run in this process (each with its own storage, connection pool and LISTEN
// connection, on its own port); every client speaks HTTP over loopback.
//
//     bash Tools/scripts/postgres-bench.sh [--quick]     # starts a throwaway cluster, runs this
//     swift run -c release --package-path Tools/Benchmarks strata-postgres-bench --postgres URL [--quick]
import BenchSupport
import Foundation
import Logging
import PostgresNIO
import Strata
import StrataCore
@_spi(StrataInternals) import StrataPostgres
import StrataProtocol
import StrataServer
import StrataSync

struct Settings {
    var quick = false
    var url = ""
    var parent: String?
    /// Push: concurrent devices, each its own zone and replica, each sending `pushes` pushes of
    /// `batch` transactions of `eventsPerTransaction` inserts.
    let devices = 8
    var pushes: Int { quick ? 5 : 80 }
    /// Interleaved rounds of rows 1 and 2a–2d (as many as there are phases: each runs once in each place).
    var rounds: Int { quick ? 1 : 5 }
    let batch = 64
    let eventsPerTransaction = 10
    /// Catch-up: one zone of this many events, in transactions of 100.
    var catchUpEvents: Int { quick ? 100_000 : 1_000_000 }
    let catchUpPerTransaction = 100
    var wakeUpWarmup: Int { quick ? 5 : 20 }
    var wakeUpSamples: Int { quick ? 40 : 200 }
}

let usage = """
    usage: strata-postgres-bench --postgres URL [--quick] [--dir PATH]

      --postgres URL  a database the benchmark may fill (its tables are created by the storage;
                      Tools/scripts/postgres-bench.sh starts a throwaway cluster and passes one)
      --quick         small counts, to check that everything runs (numbers are not meaningful)
      --dir PATH      where the embedded storage of the catch-up comparison goes (a real disk)
    """

@main
struct StrataPostgresBench {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--postgres": settings.url = arguments.value(of: argument, "URL")
            case "--quick": settings.quick = true
            case "--dir": settings.parent = arguments.value(of: argument, "PATH")
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        if settings.url.isEmpty { arguments.wrong("--postgres URL is required") }
        do {
            let report = try await run(settings)
            print(report.render())
        } catch {
            fail("strata-postgres-bench: \(error)", status: 1)
        }
    }

    static func run(_ settings: Settings) async throws -> Report {
        var report = Report(machine: machineLine(settings))
        let url = try PostgresConnectionURL(parsing: settings.url)
        var quiet = Logger(label: "bench")
        quiet.logLevel = .error

        // 1–2. PostgreSQL's own rate for the same rows, next to the same rows appended straight to
        // the storage and pushed through one and through three instances: in interleaved rounds
        // (the order rotating each round, so that each row runs once in each place; fresh zones
        // and a fresh table each time; a CHECKPOINT before each phase), so that drift
        // on this noisy machine hits every row alike; each row's ratio is the median of the
        // per-round ratios to that round's baseline.
        let corpus = PushCorpus(settings)
        let storages = try await (0..<3).asyncMap { _ in try await startedStorage(url: url, logger: quiet) }
        let instances = try await (0..<3).asyncMap { index in try await Instance.start(storage: storages[index], logger: quiet) }
        // Row 2d: an instance appending every push under the row locks, as before schema 2.
        let lockedStorage = try await startedStorage(url: url, options: .init(compareAndSetAppends: false), logger: quiet)
        let lockedInstance = try await Instance.start(storage: lockedStorage, logger: quiet)
        defer {
            for instance in instances { instance.stop() }
            lockedInstance.stop()
        }
        enum Phase: CaseIterable { case baseline, direct, one, three, oneLocked }
        var results: [Phase: [(rows: Double, p50: UInt64, p99: UInt64)]] = [:]
        for round in 0..<settings.rounds {
            let phases = Phase.allCases
            let order = phases[(round % phases.count)...] + phases[..<(round % phases.count)]
            for phase in order {
                // Every phase starts from a clean buffer cache: the dirty pages the phase before
                // left (and the checkpoint their WAL would trigger) are not charged to it.
                try await checkpoint(url: url, logger: quiet)
                let tag = round * 10 + phases.firstIndex(of: phase)!
                let result: (rows: Double, p50: UInt64, p99: UInt64)
                switch phase {
                case .baseline:
                    note("round \(round + 1): baseline, \(corpus.transactions) rows by \(settings.devices) writers, \(settings.batch) per INSERT …")
                    let baseline = try await insertBaseline(url: url, corpus: corpus, logger: quiet)
                    result = (baseline.rows, 0, 0)
                case .direct:
                    note("round \(round + 1): appends straight to the storage …")
                    result = try await directAppendRun(corpus: corpus, storage: storages[0], tag: tag)
                case .one:
                    note("round \(round + 1): push through one instance …")
                    result = try await pushRun(corpus: corpus, instances: Array(instances.prefix(1)), tag: tag)
                case .three:
                    note("round \(round + 1): push through three instances …")
                    result = try await pushRun(corpus: corpus, instances: instances, tag: tag)
                case .oneLocked:
                    note("round \(round + 1): push through one instance, every push under the row locks …")
                    result = try await pushRun(corpus: corpus, instances: [lockedInstance], tag: tag)
                }
                note("  \(rate(result.rows)) rows/s")
                results[phase, default: []].append(result)
            }
        }
        let baselines = results[.baseline] ?? []
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        func summary(_ phase: Phase) -> (rows: Double, ratio: Double, ratios: [Double], p50: UInt64, p99: UInt64) {
            let runs = results[phase] ?? []
            let ratios = zip(runs, baselines).map { $0.rows / $1.rows }
            return (median(runs.map(\.rows)), median(ratios), ratios, runs.map(\.p50).sorted()[runs.count / 2], runs.map(\.p99).sorted()[runs.count / 2])
        }
        func roundsNote(_ values: [Double], _ format: (Double) -> String) -> String {
            settings.rounds > 1 ? " (rounds: \(values.map(format).joined(separator: ", ")))" : ""
        }
        let baselineRows = median(baselines.map(\.rows))
        report.add("1. PostgreSQL: multi-row INSERT of the same rows (\(settings.devices) writers, \(settings.batch) rows per transaction), median of \(settings.rounds) rounds",
                   "\(rate(baselineRows)) rows/s (\(rate(baselineRows * Double(settings.eventsPerTransaction))) events/s)\(roundsNote(baselines.map(\.rows)) { rate($0) })",
                   "baseline", "—")
        let direct = summary(.direct)
        report.add("2c. the same batches appended straight to the storage (no HTTP): what PostgreSQL's side of a push costs",
                   "\(rate(direct.rows)) transactions/s, p50 \(latency(direct.p50)) p99 \(latency(direct.p99)) per append",
                   "—", "\(fixed(direct.ratio, 2))× row 1\(roundsNote(direct.ratios) { fixed($0, 2) })")
        for (phase, label) in [(Phase.one, "one instance"), (.three, "three instances")] {
            let pushed = summary(phase)
            report.add("2\(phase == .one ? "a" : "b"). push through \(label) (HTTP, \(settings.devices) devices, each its own zone)",
                       "\(rate(pushed.rows)) transactions/s (\(rate(pushed.rows * Double(settings.eventsPerTransaction))) events/s), p50 \(latency(pushed.p50)) p99 \(latency(pushed.p99)) per push",
                       "≥ 0.5× row 1", verdict(pushed.ratio, goal: 0.5, unit: "×") + roundsNote(pushed.ratios) { fixed($0, 2) })
        }
        let locked = summary(.oneLocked)
        report.add("2d. push through one instance appending every push under the row locks (compareAndSetAppends off: five statements, as before schema 2)",
                   "\(rate(locked.rows)) transactions/s, p50 \(latency(locked.p50)) p99 \(latency(locked.p99)) per push",
                   "—", "\(fixed(locked.ratio, 2))× row 1\(roundsNote(locked.ratios) { fixed($0, 2) }); 2a ÷ 2d \(fixed(summary(.one).ratio / max(locked.ratio, 0.0001), 2))×")
        let paths = storages.map(\.appendPaths)
        note("appends by compare and set: \(paths.reduce(0) { $0 + $1.fromRememberedBasis }) from a remembered basis, \(paths.reduce(0) { $0 + $1.afterRead }) after a read; under the row locks: \(paths.reduce(0) { $0 + $1.underLock })")

        // 3. Catch-up of a large zone over HTTP: PostgreSQL next to the embedded storage.
        let place = try DataPlace.make(parent: settings.parent, prefix: "strata-postgres-bench")
        defer { place.remove() }
        let embedded = try EmbeddedZoneStorage(directory: place.path("embedded"), logger: quiet)
        let embeddedInstance = try await Instance.start(storage: embedded, logger: quiet)
        defer { embeddedInstance.stop() }
        note("catch-up: filling a zone of \(grouped(settings.catchUpEvents)) events in each storage …")
        let catchUp = CatchUpCorpus(settings)
        for storage in [storages[0] as any ZoneStorage, embedded] { try await catchUp.fill(storage) }
        var rates: [String: Double] = [:]
        for round in 0..<2 {
            for (name, instance) in [("postgres", instances[0]), ("embedded", embeddedInstance)] {
                let events = try await catchUpRun(instance: instance, expected: settings.catchUpEvents)
                rates[name] = max(rates[name] ?? 0, events)
                note("catch-up round \(round + 1), \(name): \(rate(events)) events/s")
            }
        }
        let postgres = rates["postgres"] ?? 0, local = rates["embedded"] ?? 0
        report.add("3a. catch-up of \(grouped(settings.catchUpEvents)) events over HTTP, embedded storage (pages of 1,000 transactions)",
                   "\(rate(local)) events/s", "reference", "—")
        report.add("3b. the same from PostgreSQL", "\(rate(postgres)) events/s (\(fixed(postgres / max(local, 1), 2))× embedded)",
                   "≥ 300k events/s", verdict(postgres / 300_000, goal: 1, unit: "× goal"))

        // 4. Long-poll wake-ups: a push to one instance wakes a poll waiting on another.
        note("wake-ups …")
        let across = try await wakeUpRun(pusher: instances[0], poller: instances[2], zone: "wake-across", settings: settings)
        let same = try await wakeUpRun(pusher: instances[0], poller: instances[0], zone: "wake-same", settings: settings)
        report.add("4a. long-poll wake-up, push and poll on the same instance", "p50 \(latency(same.p50)) p99 \(latency(same.p99))", "reference", "—")
        report.add("4b. long-poll wake-up across instances (LISTEN/NOTIFY)", "p50 \(latency(across.p50)) p99 \(latency(across.p99))",
                   "p99 ≤ 50 ms", verdict(50_000_000 / Double(max(across.p99, 1)), goal: 1, unit: "× goal"))
        for storage in storages { try await storage.close() }
        try await lockedStorage.close()
        try await embedded.close()
        return report
    }

    static func machineLine(_ settings: Settings) -> String {
        "strata-postgres-bench\(settings.quick ? " --quick" : ""), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(timestamp(Date())); PostgreSQL at \((try? PostgresConnectionURL(parsing: settings.url).description) ?? "?")"
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
