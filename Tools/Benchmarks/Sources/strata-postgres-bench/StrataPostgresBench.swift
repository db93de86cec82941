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
import StrataPostgres
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
    var pushes: Int { quick ? 5 : 40 }
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

        // 1. PostgreSQL's own rate for the same rows.
        let corpus = PushCorpus(settings)
        note("baseline: \(corpus.transactions) rows by \(settings.devices) writers, \(settings.batch) per INSERT …")
        let baseline = try await insertBaseline(url: url, corpus: corpus, logger: quiet)
        report.add("1. PostgreSQL: multi-row INSERT of the same rows (\(settings.devices) writers, \(settings.batch) rows per transaction)",
                   "\(rate(baseline.rows)) rows/s (\(rate(baseline.rows * Double(settings.eventsPerTransaction))) events/s)", "baseline", "—")

        // 2. Pushes through one instance and through three.
        let storages = try await (0..<3).asyncMap { _ in try await PostgresZoneStorage.open(url: url, logger: quiet) }
        let instances = try await (0..<3).asyncMap { index in try await Instance.start(storage: storages[index], logger: quiet) }
        defer { for instance in instances { instance.stop() } }
        note("appends straight to the storage …")
        let direct = try await directAppendRun(corpus: corpus, storage: storages[0])
        report.add("2c. the same batches appended straight to the storage (no HTTP): what PostgreSQL's side of a push costs",
                   "\(rate(direct.rows)) transactions/s, p50 \(latency(direct.p50)) p99 \(latency(direct.p99)) per append",
                   "—", "\(fixed(direct.rows / baseline.rows, 2))× row 1")
        for (label, used) in [("one instance", Array(instances.prefix(1))), ("three instances", instances)] {
            note("push through \(label) …")
            let pushed = try await pushRun(corpus: corpus, instances: used, tag: used.count)
            let ratio = pushed.rows / baseline.rows
            report.add("2\(used.count == 1 ? "a" : "b"). push through \(label) (HTTP, \(settings.devices) devices, each its own zone)",
                       "\(rate(pushed.rows)) transactions/s (\(rate(pushed.rows * Double(settings.eventsPerTransaction))) events/s), p50 \(latency(pushed.p50)) p99 \(latency(pushed.p99)) per push",
                       "≥ 0.5× row 1", verdict(ratio, goal: 0.5, unit: "×"))
        }

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
