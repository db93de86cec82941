// strata-sync-bench: measures sync between a Strata store and the log server over loopback HTTP —
// push throughput, catch-up of a fresh store, long-poll wake-up latency, healing a zone the server
// lost — in one run, and prints a markdown table. The server runs in a child process (this
// executable re-run with `--serve`).
//
//     swift run -c release --package-path Tools/Benchmarks strata-sync-bench [--quick] [--only LIST] [--dir PATH] [--keep]
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog
import StrataSync

#if canImport(Glibc)
import Glibc
#endif

struct Settings {
    var quick = false
    var parent: String?
    var keep = false
    /// The workloads: `digest` (row 0b: a large store's state digests), `push` (rows 0–2: build, push, catch-up of the pushed zone), `wake-up`
    /// (row 3), `heal` (rows 4a–4d and the healing table), `abuse` (rows 5a–5b: pulls with and
    /// without idle long polls and slow clients connected), `incremental` (rows 6a–6b: a sync of
    /// one new transaction on a store with a long history vs an empty store), `state-merge` (rows
    /// 7a–7b: the server's merge of an uploaded state, decoded whole vs streamed, peak memory).
    /// `zones` (rows 8a–8d): a database of 1,000 zones against one of 1 zone, idle sync rounds
    /// and one long poll for all; a newly shared zone of 100k events until it is queryable.
    /// `fleet` (rows 9a–9c, 9d–9f with `--fleet-database`): one server holding 10,000 devices (idle memory, then 1,000 pushes/s:
    /// acknowledgement and delivery latency), in its own server child.
    static let workloads: Set<String> = ["digest", "push", "wake-up", "heal", "abuse", "incremental", "state-merge", "zones", "fleet"]
    var abuse = AbuseSettings()
    var fleet = FleetSettings()
    var only = Settings.workloads

    /// Events in the store that is pushed and then pulled by the fresh store.
    var events: Int { quick ? 100_000 : 1_000_000 }
    let perTransaction = 256
    /// `SyncOptions.pushBatchSize` values; each pushes the whole store to its own fresh zone.
    let pushBatchSizes = [256, 1024]
    /// `SyncOptions.pullLimit` values; each catches a fresh store up from the first zone.
    let pullLimits = [1000, 10_000]
    /// Long-poll wake-ups: pushes not counted, then samples.
    var wakeUpWarmup: Int { quick ? 5 : 20 }
    var wakeUpSamples: Int { quick ? 50 : 200 }
    let pushInterval: Duration = .milliseconds(20)
    /// Events the heal workload's device uploads, then heals the zone with.
    var healEventsOverride: Int?
    var healEvents: Int { healEventsOverride ?? (quick ? 100_000 : 1_000_000) }
    let healPerTransaction = 100
    var fleetDevices: Int?
    var fleetRate: Int?
    var fleetSeconds: Int?
    var fleetSettings: FleetSettings {
        var fleet = fleet
        if quick {
            fleet.devices = 1_000
            fleet.pushesPerSecond = 100
            fleet.seconds = 5
            fleet.warmupSeconds = 2
            fleet.idleSeconds = 2
        }
        if let fleetDevices {
            fleet.devices = fleetDevices
            fleet.devicesAsked = true
        }
        if let fleetRate { fleet.pushesPerSecond = Double(fleetRate) }
        if let fleetSeconds { fleet.seconds = Double(fleetSeconds) }
        return fleet
    }
    /// Refuse to start with less free space than this where the data goes.
    var requiredFreeBytes: Double { quick ? 512 * 1_048_576 : 3 * 1_073_741_824 }
}

let usage = """
    usage: strata-sync-bench [--quick] [--only LIST] [--heal-events N] [--fleet-devices N] [--fleet-rate N]
                             [--fleet-seconds S] [--fleet-database]
                             [--fleet-push-connection kept|new|replaces-poll]
                             [--dir PATH] [--keep]
           strata-sync-bench --serve DATA PORT USERS

      --quick         100k events instead of 1M (push, catch-up and heal) and 50 wake-ups instead
                      of 200, for a smoke run (numbers are not meaningful)
      --only LIST     run only some of push (rows 0-2: build, push, catch-up, the client's apply alone), wake-up (row 3),
                      heal (rows 4a-4d: first upload of a zone vs healing it after the server lost
                      it, with and without compaction, and the healing table) and abuse (rows
                      5a-5b: pulls of a small page with and without 1,000 long polls and 100 slow
                      clients connected) and incremental (rows 6a-6b: sync() of one new
                      transaction on a store with 1M events of history, in 10 transactions, vs on
                      an empty store, and peak memory during it) and state-merge (rows 7a-7b: the
                      server's merge of a 64 MiB uploaded state, decoded whole vs streamed object by
                      object, peak memory of each in a child process) and zones (rows 8a-8d: idle
                      sync rounds of a database with 1,000 zones vs 1 zone, one long poll for all,
                      a newly shared zone of 100k events until queryable) and fleet (rows 9a-9c: one
                      server with 10,000 devices, 4 per zone, each holding a long poll: memory per
                      idle device, then 1,000 pushes/s: ack and delivery latency), comma-separated
      --heal-events N the heal workload's events (default 1M, 100k with --quick), in transactions
                      of 100 inserts
      --fleet-devices N  devices of the fleet row (default 10,000, or the most the descriptor limit
                      allows; 1,000 with --quick)
      --fleet-rate N  pushes per second of the whole fleet (default 1,000; 100 with --quick)
      --fleet-seconds S  the fleet row's measured phase (default 30; 5 with --quick)
      --fleet-database   the fleet's devices long poll their database (GET /v1/database/changes,
                      then a pull of the zone named), as DatabaseSyncEngine does: rows 9d-9f
      --fleet-push-connection kept|new|replaces-poll  where a device's push goes out: its long
                      poll is never cut short (as the sync engines do), and pushes use a second
                      connection the device keeps (kept, the default: two connections per device,
                      as an HTTP stack's pool keeps them) or a new connection per push, closed after
                      its answer (new); replaces-poll is the engines before they kept their poll
                      (the poll cut short, its connection closed, the push on a new one that then
                      holds the next poll). A default fleet needing more descriptors than the
                      server may hold shrinks to the largest that fits; one asked for with
                      --fleet-devices is refused, naming it
      --dir PATH      make the run's fresh data directory inside PATH (must be on a real disk, not
                      tmpfs); default: <repo>/.build-bench-data, else $TMPDIR or /var/tmp
      --keep          leave the data directory (stores, server data) in place
      --serve DATA PORT USERS
                      run the log server on 127.0.0.1:PORT with its data in DATA and the users file
                      USERS until SIGTERM or end of stdin (what the benchmark runs in its child
                      process; also the thing to put under perf)
    """

@main
struct StrataSyncBench {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--serve":
                let data = arguments.value(of: argument, "DATA PORT USERS")
                let port = arguments.number(of: argument, atLeast: 0)
                let users = arguments.value(of: argument, "DATA PORT USERS")
                await ServeChild.run(data: data, port: port, users: users)
            case "--state-merge-child":
                let way = arguments.value(of: argument, "whole|streamed OBJECTS")
                let objects = arguments.number(of: argument, atLeast: 1)
                do { try StateMergeWorkload.child(way: way, objects: objects) } catch { fail("\(error)", status: 1) }
                return
            case "--quick": settings.quick = true
            case "--keep": settings.keep = true
            case "--only": settings.only = arguments.names(of: argument, from: Settings.workloads)
            case "--heal-events": settings.healEventsOverride = arguments.number(of: argument, atLeast: 1)
            case "--fleet-devices": settings.fleetDevices = arguments.number(of: argument, atLeast: 2)
            case "--fleet-rate": settings.fleetRate = arguments.number(of: argument, atLeast: 1)
            case "--fleet-seconds": settings.fleetSeconds = arguments.number(of: argument, atLeast: 1)
            case "--fleet-database": settings.fleet.database = true
            case "--fleet-push-connection":
                let name = arguments.value(of: argument, FleetPushConnection.allCases.map(\.rawValue).joined(separator: "|"))
                guard let way = FleetPushConnection(rawValue: name) else { arguments.wrong("\(argument): \(name) is not one of \(FleetPushConnection.allCases.map(\.rawValue).joined(separator: ", "))") }
                settings.fleet.pushConnection = way
            case "--dir": settings.parent = arguments.value(of: argument, "a path")
            case "-h", "--help":
                print(usage)
                return
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        let (place, free) = DataPlace.prepare(parent: settings.parent, prefix: "strata-sync-bench", requiredFreeBytes: settings.requiredFreeBytes)
        // The heal workload runs its own server child (it stops and restores it); the others share one.
        var server: ServerProcess?
        if !settings.only.isDisjoint(with: ["push", "wake-up", "abuse", "incremental", "zones"]) {
            do {
                server = try ServerProcess.start(data: place.path("server"), directory: place.run)
            } catch {
                if !settings.keep { place.remove() }
                fail("\(error)", status: 1)
            }
            note("server: pid \(server!.pid) on \(server!.url.absoluteString)")
        }
        do {
            try await run(settings, place, server, freeBytes: free)
        } catch {
            server?.stop()
            if !settings.keep { place.remove() }
            fail("benchmark failed: \(error)", status: 1)
        }
        if let server {
            let stopping = monotonicNanos()
            server.stop()
            note("server stopped in \(fixed(seconds(monotonicNanos() - stopping), 2)) s (status \(server.process.terminationStatus))")
        }
        if settings.keep { note("kept \(place.run)") } else { place.remove() }
    }

    static func run(_ settings: Settings, _ place: DataPlace, _ server: ServerProcess?, freeBytes: Double?) async throws {
        let started = Date()
        var report = Report()
        if settings.only.contains("digest") {
            try await DigestWorkload.run(settings, place, &report)
        }
        if let server, settings.only.contains("push") {
            try await pushAndCatchUp(settings, place, server, &report)
        }
        if let server, settings.only.contains("wake-up") {
            try await wakeUp(settings, place, server, &report)
        }
        if let server, settings.only.contains("abuse") {
            try await abuse(settings, server, &report)
        }
        if let server, settings.only.contains("incremental") {
            let run = try await incrementalRun(in: place.path("incremental"), server: server, events: settings.events,
                                               transactions: 10, samples: settings.quick ? 5 : 20)
            run.addRows(to: &report)
        }
        if let server, settings.only.contains("zones") {
            let run = try await zonesRun(in: place.path("zones"), server: server, zones: settings.quick ? 200 : 1_000,
                                         sharedEvents: settings.quick ? 20_000 : 100_000, samples: settings.quick ? 5 : 15)
            run.addRows(to: &report)
        }
        if settings.only.contains("fleet") {
            let fleet = settings.fleetSettings
            let run = try await FleetWorkload.run(in: place, settings: fleet)
            run.addRows(to: &report)
        }
        if settings.only.contains("state-merge") {
            try StateMergeWorkload.run(objects: settings.quick ? 50_000 : 220_000, into: &report)
        }
        var heal: HealRun?
        if settings.only.contains("heal") {
            heal = try await healRun(in: place.path("heal"), events: settings.healEvents,
                                     perTransaction: settings.healPerTransaction, keep: settings.keep)
            heal!.addRows(to: &report)
        }

        report.machine = "**Machine:** \(Machine.cores) cores"
            + (Machine.cpuModel.map { " (\($0))" } ?? "")
            + ", " + (Machine.memoryBytes.map { bytes($0) + " RAM" } ?? "RAM unknown")
            + ", data on \(place.fileSystem)" + (freeBytes.map { " (\(bytes($0)) free)" } ?? "")
            + ", server in a child process on loopback HTTP (group commit), \(timestamp(started))"
            + (settings.quick ? " — **--quick run: numbers are not meaningful**" : "")
        print(report.render())
        if let heal {
            print(heal.table())
            let problems = heal.problems
            if !problems.isEmpty {
                throw BenchError("the healed zone is wrong: " + problems.joined(separator: "; "))
            }
            note("heal check: OK (fresh devices have the healing device's digest)")
        }
    }

    /// Rows 0–2: build the source store, push it to fresh zones, catch fresh stores up.
    static func pushAndCatchUp(_ settings: Settings, _ place: DataPlace, _ server: ServerProcess, _ report: inout Report) async throws {
        let events = settings.events

        // 0. The store to push.
        note("building the source store: \(grouped(events)) inserts, \(settings.perTransaction)/tx, buffered…")
        let (source, build) = try await buildStore(at: place.path("source"), events: events, perTransaction: settings.perTransaction)
        let sourceDigest = source.digest()
        let sourceCount = source.count("Item")
        note("  \(rate(build.eventsPerSecond)) events/s, \(bytes(Double(Machine.directorySize(place.path("source"))))) on disk")
        report.add("0. build the source store: \(grouped(events)) inserts of 4-field objects, \(settings.perTransaction)/tx, buffered (incl. flush)",
                   "\(rate(build.eventsPerSecond)) events/s (\(grouped(build.operations)) tx in \(fixed(build.seconds, 2)) s); \(bytes(Double(Machine.directorySize(place.path("source"))))) on disk",
                   "— (informational)", "—")

        // 1. Push to a fresh zone, once per batch size.
        var letter = UInt8(ascii: "a")
        for batchSize in settings.pushBatchSizes {
            let zone = "push-\(batchSize)"
            note("push: \(grouped(events)) events to the fresh zone \(zone), pushBatchSize \(batchSize)…")
            let run = try await pushRun(source, server: server, zone: zone, batchSize: batchSize, events: events)
            let w = run.wire
            note("  push phase \(rate(run.pushPhase.eventsPerSecond)) events/s (\(fixed(run.pushPhase.seconds, 2)) s), whole sync() \(fixed(run.sync.seconds, 2)) s; \(w.failureText)")
            let perPush = w.pushes == 0 ? 0 : Double(w.pushNanos) / Double(w.pushes)
            report.add("1\(Character(Unicode.Scalar(letter))). push \(grouped(events)) events (\(grouped(w.pushedTransactions)) tx) to a fresh zone by sync(), pushBatchSize \(batchSize)",
                       "\(rate(run.pushPhase.eventsPerSecond)) events/s: last push answered \(fixed(run.pushPhase.seconds, 2)) s after sync() began; \(grouped(w.pushes)) push\(w.pushes == 1 ? "" : "es") of \(bytes(Double(w.pushBodyBytes) / Double(max(1, w.pushes)))) (\(fixed(Double(w.pushBodyBytes) / Double(events), 1)) B/event), \(latency(UInt64(perPush))) each; \(w.failureText); server CPU \(fixed(run.serverCPU, 2)) s, client CPU \(fixed(run.clientCPU, 2)) s for the whole sync(), which took \(fixed(run.sync.seconds, 2)) s with the pull-back of \(grouped(w.pulledTransactions)) own tx",
                       "≥ 100k events/s",
                       verdict(run.pushPhase.eventsPerSecond / 100_000, goal: 1, unit: "× goal"))
            letter += 1
        }
        try await source.close()

        // 2. Catch-up: a fresh store pulls the whole first zone.
        letter = UInt8(ascii: "a")
        for limit in settings.pullLimits {
            let zone = "push-\(settings.pushBatchSizes[0])"
            let path = place.path("catch-up-\(limit)")
            note("catch-up: a fresh store pulls \(zone), pullLimit \(limit)…")
            let run = try await catchUpRun(at: path, server: server, zone: zone, pullLimit: limit,
                                           expectedCount: sourceCount, expectedDigest: sourceDigest)
            if !settings.keep { try? FileManager.default.removeItem(atPath: path) }
            let w = run.wire
            let applied = run.report.appliedEvents
            note("  \(rate(run.sample.eventsPerSecond)) events/s (\(grouped(applied)) events in \(fixed(run.sample.seconds, 2)) s), server CPU \(fixed(run.serverCPU, 2)) s; \(w.failureText)")
            report.add("2\(Character(Unicode.Scalar(letter))). catch-up: a fresh store pulls \(grouped(w.pulledTransactions)) tx by sync(), pullLimit \(limit)",
                       "\(rate(run.sample.eventsPerSecond)) events/s (\(grouped(applied)) events in \(fixed(run.sample.seconds, 2)) s, \(grouped(w.pulls)) pull\(w.pulls == 1 ? "" : "s"), \(fixed(Double(w.pullNanos) / 1e9, 2)) s of them waiting for answers); wire \(fixed(Double(w.pullBodyBytes) / Double(max(1, applied)), 1)) B/event in framed bodies (\(bytes(Double(w.pullBodyBytes)))), server wrote \(fixed(Double(run.serverWritten) / Double(max(1, applied)), 1)) B/event (wchar); server CPU \(fixed(run.serverCPU, 2)) s ≙ \(fixed(run.serverCPU * 1e6 / Double(max(1, applied)), 2)) µs/event, client CPU \(fixed(run.clientCPU, 2)) s; server RSS \(bytes(Double(run.serverRSS))); count \(grouped(run.count)), digest \(run.digestMatches ? "matches" : "**differs**")",
                       "≥ 300k events/s",
                       verdict(run.sample.eventsPerSecond / 300_000, goal: 1, unit: "× goal"))
            letter += 1
        }

        // 2a′. Row 2a again without the read-ahead (each page downloaded, then applied), and
        // 2d/2d′ the same pair over a slower network (20 ms more per pull, pages of 100 tx):
        // what overlapping the download and the apply gains, side by side in one run.
        let readAheadRows: [(label: String, limit: Int, readAhead: Bool, delay: Duration, name: String)] = [
            ("2a′. row 2a with SyncOptions.pullReadAhead off: each page downloaded, then applied", settings.pullLimits[0], false, .zero, "sequential"),
            ("2d. catch-up with 20 ms added to each pull (a slower network's round trip), pullLimit 100, read-ahead on", 100, true, .milliseconds(20), "slow-ahead"),
            ("2d′. row 2d with SyncOptions.pullReadAhead off", 100, false, .milliseconds(20), "slow-sequential"),
        ]
        var slowAhead: Double?
        for row in readAheadRows {
            let zone = "push-\(settings.pushBatchSizes[0])"
            let path = place.path("catch-up-\(row.name)")
            note("catch-up (\(row.name)): a fresh store pulls \(zone), pullLimit \(row.limit), read-ahead \(row.readAhead ? "on" : "off"), \(row.delay) added per pull…")
            let run = try await catchUpRun(at: path, server: server, zone: zone, pullLimit: row.limit, readAhead: row.readAhead, pullDelay: row.delay,
                                           expectedCount: sourceCount, expectedDigest: sourceDigest)
            if !settings.keep { try? FileManager.default.removeItem(atPath: path) }
            let w = run.wire
            let perSecond = run.sample.eventsPerSecond
            note("  \(rate(perSecond)) events/s (\(grouped(run.report.appliedEvents)) events in \(fixed(run.sample.seconds, 2)) s)")
            var verdictText = "—"
            if row.readAhead { slowAhead = perSecond } else if let slowAhead, row.delay > .zero {
                verdictText = "2d ÷ 2d′ \(fixed(slowAhead / max(perSecond, 1), 2))×"
            }
            report.add(row.label,
                       "\(rate(perSecond)) events/s (\(grouped(run.report.appliedEvents)) events in \(fixed(run.sample.seconds, 2)) s, \(grouped(w.pulls)) pulls, \(fixed(Double(w.pullNanos) / 1e9, 2)) s in them); count \(grouped(run.count)), digest \(run.digestMatches ? "matches" : "**differs**")",
                       "informational (what the read-ahead gains)", verdictText)
        }

        // 2e. Remote bisection: the source device (whose events the zone holds) against the zone,
        // with one event's fingerprint changed on the device's side (a divergent event).
        do {
            let zone = "push-\(settings.pushBatchSizes[0])"
            note("remote bisection: the source store against \(zone), one divergent event…")
            let run = try await bisectionRun(storePath: place.path("source"), server: server, zone: zone)
            note("  found \(run.found ? "the divergent event" : "**not the divergent event**"): cold \(fixed(run.cold.seconds * 1000, 1)) ms, warm \(fixed(run.warm.seconds * 1000, 1)) ms, \(grouped(run.bytes)) bytes, \(run.rounds) rounds; device digests \(fixed(run.localSeconds, 2)) s")
            report.add("2e. remote bisection: a device against its zone (\(grouped(run.events)) events each), one divergent event, by GET/POST /digests over loopback",
                       "\(grouped(run.bytes)) bytes exchanged (bodies), \(run.rounds) rounds; \(fixed(run.warm.seconds * 1000, 1)) ms with the server's digests cached, \(fixed(run.cold.seconds * 1000, 1)) ms for the first (the server reads the zone); the device's digests from its log took \(fixed(run.localSeconds, 2)) s; found the divergent event: \(run.found ? "yes" : "**no**")",
                       "≤ 64 KiB, ≤ 1 s",
                       run.found && run.bytes <= 64 * 1024 && run.warm.seconds <= 1 ? "✔ \(fixed(Double(run.bytes) / 1024, 1)) KiB, \(fixed(run.warm.seconds, 3)) s" : "✘")
        }

        // 2f. Remote state bisection: the source device's objects against the zone's state, one
        // object's fingerprint changed on the device's side.
        do {
            let zone = "push-\(settings.pushBatchSizes[0])"
            note("remote state bisection: the source store's objects against \(zone), one differing object…")
            let run = try await stateBisectionRun(storePath: place.path("source"), server: server, zone: zone)
            note("  found \(run.found ? "the differing object" : "**not the differing object**"): cold \(fixed(run.cold.seconds * 1000, 1)) ms, warm \(fixed(run.warm.seconds * 1000, 1)) ms, \(grouped(run.bytes)) bytes, \(run.rounds) rounds; device state \(fixed(run.localSeconds, 2)) s")
            report.add("2f. remote state bisection: a device's objects against its zone's state (\(grouped(run.objects)) objects), one differing object, by POST /state-digests over loopback",
                       "\(grouped(run.bytes)) bytes exchanged (bodies), \(run.rounds) rounds; \(fixed(run.warm.seconds * 1000, 1)) ms with the server's state kept, \(fixed(run.cold.seconds * 1000, 1)) ms for the first (the server fingerprints every object); the device's state took \(fixed(run.localSeconds, 2)) s; found the differing object: \(run.found ? "yes" : "**no**")",
                       "≤ 64 KiB, ≤ 1 s (as 2e)",
                       run.found && run.bytes <= 64 * 1024 && run.warm.seconds <= 1 ? "✔ \(fixed(Double(run.bytes) / 1024, 1)) KiB, \(fixed(run.warm.seconds, 3)) s" : "✘")
        }

        // 2c. The same transactions applied from memory: the client's share of a catch-up.
        let pageSize = settings.pullLimits[0]
        note("apply alone: the source store's transactions applied to a fresh store, \(pageSize) tx per applyRemote, best of 3…")
        let alone = try await applyAloneRun(source: place.path("source"), at: place.path("apply-alone"), pageSize: pageSize, runs: 3, keep: settings.keep,
                                            expectedCount: sourceCount, expectedDigest: sourceDigest)
        let runs = alone.all.map { "\(rate($0.eventsPerSecond))" }.joined(separator: ", ")
        note("  best \(rate(alone.best.eventsPerSecond)) events/s (runs: \(runs))")
        report.add("2c. the client's apply alone: the same \(grouped(alone.best.operations)) tx applied to a fresh store from memory by applyRemote(encoded:), \(pageSize) tx per call — decoding, the merge, the log append and its group commit; no network, no server — best of 3",
                   "\(rate(alone.best.eventsPerSecond)) events/s (\(grouped(alone.best.events)) events in \(fixed(alone.best.seconds, 2)) s; runs: \(runs)); count and digest match",
                   "informational (the bound on 2a)", "—")
    }

    /// Rows 5a–5b: pulls of a small page, quiet and with abusers connected, alternating.
    static func abuse(_ settings: Settings, _ server: ServerProcess, _ report: inout Report) async throws {
        var abuse = settings.abuse
        if settings.quick {
            abuse.rounds = 1
            abuse.phaseSeconds = 1
        }
        note("abuse: \(abuse.rounds) rounds of \(fixed(abuse.phaseSeconds, 1)) s quiet, then \(fixed(abuse.phaseSeconds, 1)) s with \(grouped(abuse.longPolls)) long polls and \(abuse.slowClients) slow clients, \(abuse.pullers) pulling connections…")
        let run = try await abuseRun(server: server, settings: abuse)
        let quietRate = AbuseRun.rate(run.quiet)
        let loadedRate = AbuseRun.rate(run.loaded)
        let quietP99 = AbuseRun.p99(run.quiet)
        let loadedP99 = AbuseRun.p99(run.loaded)
        let quietFailures = run.quiet.reduce(0) { $0 + $1.failures }
        let loadedFailures = run.loaded.reduce(0) { $0 + $1.failures }
        let perRound = { (phases: [AbuseRun.Phase]) in phases.map { rate(Double($0.requests) / $0.seconds) }.joined(separator: ", ") }
        note("  quiet \(rate(quietRate)) req/s p99 \(latency(quietP99)); loaded \(rate(loadedRate)) req/s p99 \(latency(loadedP99))")
        report.add("5a. pulls of a \(abuse.transactions)-tx page on \(abuse.pullers) keep-alive connections, nobody else connected",
                   "\(rate(quietRate)) req/s (rounds: \(perRound(run.quiet))), p50 \(latency(percentile(run.quiet.flatMap(\.latencies).sorted(), 50))), p99 \(latency(quietP99)); \(quietFailures) failed",
                   "baseline", "—")
        report.add("5b. the same with \(grouped(abuse.longPolls)) long polls waiting and \(abuse.slowClients) slow clients (half dripping a head, half a push body) connected",
                   "\(rate(loadedRate)) req/s (rounds: \(perRound(run.loaded))), p50 \(latency(percentile(run.loaded.flatMap(\.latencies).sorted(), 50))), p99 \(latency(loadedP99)); \(loadedFailures) failed; long polls still held at each round's end: \(run.longPollsHeld.map(String.init).joined(separator: ", ")); slow clients closed by the server (header timeout) and reconnected: \(run.slowClosed)",
                   "informational",
                   "\(fixed(loadedRate / max(1e-9, quietRate), 2))× the req/s, \(fixed(Double(loadedP99) / Double(max(1, quietP99)), 2))× the p99")
    }

    /// Row 3: long-poll wake-up.
    static func wakeUp(_ settings: Settings, _ place: DataPlace, _ server: ServerProcess, _ report: inout Report) async throws {
        note("long-poll wake-up: \(settings.wakeUpWarmup) + \(settings.wakeUpSamples) pushes, one every \(settings.pushInterval)…")
        let wake = try await wakeUpRun(storePath: place.path("pusher"), server: server, zone: "longpoll",
                                       warmup: settings.wakeUpWarmup, samples: settings.wakeUpSamples,
                                       interval: settings.pushInterval)
        let p50 = signedPercentile(wake.afterPushReturned, 50)
        let p99 = signedPercentile(wake.afterPushReturned, 99)
        let early = wake.afterPushReturned.filter { $0 < 0 }.count
        let pushes = wake.pushLatencies.sorted()
        note("  p50 \(signedLatency(p50)), p99 \(signedLatency(p99))")
        report.add("3. long-poll wake-up: pull(wait: 10 s) open while one 1-insert tx is pushed every \(settings.pushInterval.components.attoseconds / 1_000_000_000_000_000) ms; push returned → pull returned, \(grouped(wake.afterPushReturned.count)) samples",
                   "p50 \(signedLatency(p50)), p99 \(signedLatency(p99)), max \(signedLatency(wake.afterPushReturned.max() ?? 0)) (\(early) pulls came back before their push's answer); push sent → pull returned p50 \(signedLatency(signedPercentile(wake.afterPushSent, 50))), p99 \(signedLatency(signedPercentile(wake.afterPushSent, 99))); push round trip p50 \(latency(percentile(pushes, 50))), p99 \(latency(percentile(pushes, 99))); \(grouped(wake.pulls)) pulls, \(wake.emptyPulls) empty",
                   "p99 ≤ 50 ms",
                   "\(fixed(Double(max(0, p99)) / 50e6, 2))× the bound — " + (p99 <= 50_000_000 ? "PASS" : "**MISS**"))
    }
}
