// Rows 9a–9c (9d–9f with database long polls): one server instance holding a fleet. Thousands of devices, a few per zone (one user
// per zone, as an app's users each with their phone, tablet and laptop), each holding a long poll
// and pushing about once every `devices / rate` seconds, against the server in its own child
// process. Measured: the server's memory per idle connected device, the push acknowledgement
// latency, and the delivery latency from a push being sent to each other device of its zone
// receiving it through its long poll — with the generator's CPU reported apart from the server's.
import BenchSupport
import Foundation
import StrataCore
import StrataProtocol
import StrataServer

#if canImport(Glibc)
import Glibc
#endif

struct FleetSettings {
    var devices = 10_000
    /// Whether `devices` was asked for (`--fleet-devices`): a default fleet too large for the
    /// machine's descriptor limit shrinks to the largest that fits (said so on standard error;
    /// the row shows the devices run); one asked for is refused instead.
    var devicesAsked = false
    var devicesPerZone = 4
    var pushesPerSecond = 1_000.0
    var warmupSeconds = 5.0
    var seconds = 30.0
    var idleSeconds = 5.0
    /// The long polls' `wait` (seconds): shorter than the server's idle timeout.
    var wait = 50
    /// Devices long poll their database and then pull the zone it names (as `DatabaseSyncEngine`
    /// does) rather than long polling their zone (as `SyncEngine` does).
    var database = false
    /// Where a device's push goes out (its long poll kept, or cut short as the engines did before).
    var pushConnection = FleetPushConnection.kept
}

extension FleetSettings {
    /// How a device connects, for the report.
    func clientDescription(_ polls: String) -> String {
        switch pushConnection {
        case .new: "a connection holding a \(polls), never cut short, and each push on a new connection closed after its answer"
        case .kept: "a connection holding a \(polls), never cut short, and a second one kept for pushes"
        case .replacesPoll: "one connection each, holding a \(polls) that a push replaces (closed, and the push sent on a new connection), as the sync engines did before they kept their poll"
        }
    }
}

struct FleetRun {
    var settings: FleetSettings
    var baselineRSS = 0
    var idleRSS = 0
    var loadedRSS = 0
    var connectSeconds = 0.0
    var heldPolls = 0
    var openConnections = 0
    var measured = FleetMeasurements()
    var measuredSeconds = 0.0
    var serverCPU = 0.0
    var generatorCPU = 0.0
    var idleServerCPU = 0.0

    var idleBytesPerDevice: Double { Double(idleRSS - baselineRSS) / Double(settings.devices) }

    func addRows(to report: inout Report) {
        let s = settings
        let m = measured
        let acks = m.ackLatencies.sorted()
        let deliveries = m.deliveryLatencies.sorted()
        let ackP99 = percentile(acks, 99)
        let deliveryP99 = percentile(deliveries, 99)
        let achieved = Double(m.pushes) / measuredSeconds
        let polls = s.database ? "database long poll (then a pull of the zone it names)" : "zone long poll"
        let row = s.database ? "9d" : "9a"
        report.add("\(row). one server, \(grouped(s.devices)) devices connected (\(s.devicesPerZone) per zone, \(grouped(s.devices / s.devicesPerZone)) zones and users; \(s.clientDescription(polls)), from its own loopback address), idle: server memory per device",
                   "\(bytes(idleBytesPerDevice)) per device (RSS \(bytes(Double(baselineRSS))) with the zones made, \(bytes(Double(idleRSS))) with every device connected and \(grouped(heldPolls)) long polls held, \(grouped(openConnections)) connections; all connected in \(fixed(connectSeconds, 1)) s); server CPU while idle \(fixed(idleServerCPU / s.idleSeconds * 100, 1)) % of a core",
                   "≤ 20 KiB per idle device",
                   verdict(20 * 1024 / max(1, idleBytesPerDevice), goal: 1, unit: "× headroom"))
        report.add("\(s.database ? "9e" : "9b"). the same fleet pushing \(rate(s.pushesPerSecond)) one-insert tx/s for \(fixed(s.seconds, 0)) s (after a warm-up of \(fixed(s.warmupSeconds + Double(s.devices) / s.pushesPerSecond, 0)) s in which every device pushed): push sent → answered",
                   "p50 \(latency(percentile(acks, 50))), p99 \(latency(ackP99)), max \(latency(acks.last ?? 0)); \(grouped(m.pushes)) pushes (\(rate(achieved))/s), \(m.pushesSkipped) skipped (the device's previous push unanswered), \(m.pushFailures) failed (\(m.retries) sent again), \(m.unanswered) never answered; server CPU \(fixed(serverCPU / measuredSeconds * 100, 0)) % of a core, generator CPU \(fixed(generatorCPU / measuredSeconds * 100, 0)) %; server RSS \(bytes(Double(loadedRSS)))",
                   "p99 ≤ 100 ms, none failed or skipped",
                   m.pushes == 0 ? "**MISS** (nothing pushed)" : latencyVerdict(ackP99, bound: 100_000_000, clean: m.pushesSkipped + m.pushFailures + m.unanswered == 0) + (m.pushesSkipped + m.pushFailures + m.unanswered > 0 ? " (**\(m.pushesSkipped) skipped, \(m.pushFailures) failed, \(m.unanswered) never answered**)" : ""))
        report.add("\(s.database ? "9f" : "9c"). the same: push sent → received by each other device of its zone through its \(s.database ? "database long poll and zone pull" : "long poll")",
                   "p50 \(latency(percentile(deliveries, 50))), p99 \(latency(deliveryP99)), max \(latency(deliveries.last ?? 0)); \(grouped(deliveries.count)) deliveries, \(grouped(m.undelivered)) missing 3 s after the last push; \(grouped(m.pollAnswers)) long-poll answers, \(m.pollFailures) failed; \(m.closedByServer) connections closed by the server, \(m.connectFailures) connects failed",
                   "p99 ≤ 100 ms, none missing",
                   deliveries.isEmpty ? "**MISS** (nothing delivered)" : latencyVerdict(deliveryP99, bound: 100_000_000, clean: m.undelivered + m.pollFailures + m.connectFailures == 0) + (m.undelivered + m.pollFailures + m.connectFailures > 0 ? " (**\(m.undelivered) missing, \(m.pollFailures) polls failed, \(m.connectFailures) connects failed**)" : ""))
    }

    private func latencyVerdict(_ p99: UInt64, bound: UInt64, clean: Bool) -> String {
        "\(fixed(Double(p99) / Double(bound), 2))× the bound — " + (p99 <= bound && clean ? "PASS" : "**MISS**")
    }
}

enum FleetWorkload {
    /// Starts its own server child (the fleet's users are in its users file), sets the zones up,
    /// connects the fleet, measures idle, then under load.
    static func run(in place: DataPlace, settings: FleetSettings) async throws -> FleetRun {
        raiseDescriptorLimit(to: 65_536)
        var zoneCount = max(1, settings.devices / settings.devicesPerZone)
        // Whole zones: the devices run (and what is reported per device) are these.
        var settings = settings
        settings.devices = zoneCount * settings.devicesPerZone
        // The server holds a descriptor per connection and two per zone (its log and its lock),
        // and inherits this process's limit: a fleet past it would be refused connections part
        // way, so a default one shrinks to the largest that fits and one asked for is refused.
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            let perDevice = settings.pushConnection == .kept ? 2 : 1
            let perZone = settings.devicesPerZone * perDevice + 2
            // Beyond the devices' own connections: the pushes in flight, each on its own
            // connection with `new` (two seconds' worth), and the server's other files.
            let spare = 256 + (settings.pushConnection == .new ? Int(settings.pushesPerSecond * 2) : 0)
            let needed = zoneCount * perZone + spare
            let fittingZones = max(0, (Int(limit.rlim_cur) - spare) / perZone)
            if needed > Int(limit.rlim_cur), !settings.devicesAsked, fittingZones > 0 {
                note("fleet: \(grouped(settings.devices)) devices need about \(grouped(needed)) descriptors in the server; this machine allows \(grouped(Int(limit.rlim_cur))) per process: running \(grouped(fittingZones * settings.devicesPerZone)), the most that fit")
                zoneCount = fittingZones
                settings.devices = zoneCount * settings.devicesPerZone
            } else if needed > Int(limit.rlim_cur) {
                let fits = fittingZones * settings.devicesPerZone
                throw BenchError("fleet: \(grouped(settings.devices)) devices with --fleet-push-connection \(settings.pushConnection.rawValue) need about \(grouped(needed)) descriptors in the server (a connection each, \(perDevice) per device, and 2 per zone); this machine allows \(grouped(Int(limit.rlim_cur))) per process. Run at most --fleet-devices \(fits)\(settings.pushConnection == .kept ? ", or with --fleet-push-connection new (one connection per device, a new one per push)" : "")")
            }
        }
        // Generated tokens (an ID, a salted hash): the server finds each by its ID. (Tokens of the
        // older kind, a chosen token's bare SHA-256, are compared against every such entry.)
        let generated = (0..<zoneCount).map { _ in UserToken.generate() }
        let users = generated.enumerated().map { (name: "fleet-\($0.offset)", token: $0.element.text) }
        let entries = generated.enumerated().map { UserDirectory.User.hashing($0.element, name: "fleet-\($0.offset)") }
        let server = try ServerProcess.start(data: place.path("fleet-server"), directory: place.run, moreUsers: entries)
        defer { server.stop() }
        note("fleet: server pid \(server.pid); making \(grouped(zoneCount)) zones…")

        // One zone per user; its end token is where its devices' long polls start.
        var tokens: [String] = []
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        guard let setup = BenchSocket(port: server.port) else { throw BenchError("fleet: cannot connect to the server") }
        for (index, user) in users.enumerated() {
            let zone = "fleet-\(index)"
            func request(_ method: String, _ path: String) -> [UInt8] {
                Array("\(method) \(path) HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(user.token)\r\nContent-Length: 0\r\n\r\n".utf8)
            }
            guard setup.send(request("PUT", "/v1/zones/\(zone)")), let created = setup.readAnswer(&scratch), created == 201 || created == 200 else {
                throw BenchError("fleet: creating zone \(zone) failed")
            }
            guard setup.send(request("GET", "/v1/zones/\(zone)")), let described = setup.readAnswer(&scratch, keepBody: true),
                  let object = try? JSONSerialization.jsonObject(with: Data(described.body)) as? [String: Any],
                  let token = object["token"] as? String else {
                throw BenchError("fleet: no token in zone \(zone)'s description")
            }
            tokens.append(token)
        }
        let zones = (0..<zoneCount).map { (name: "fleet-\($0)", token: users[$0].token) }
        var run = FleetRun(settings: settings)
        usleep(500_000)
        run.baselineRSS = server.residentBytes()

        let load = try FleetLoad(port: server.port, zones: zones, devicesPerZone: settings.devicesPerZone, zoneTokens: tokens, wait: settings.wait, databaseMode: settings.database, pushConnection: settings.pushConnection)
        note("fleet: connecting \(grouped(load.devices.count)) devices (\(grouped(load.devices.count * (settings.pushConnection == .kept ? 2 : 1))) connections)…")
        let connecting = monotonicNanos()
        try load.connectAll()
        run.connectSeconds = seconds(monotonicNanos() - connecting)

        // Idle: every long poll held, nothing pushed.
        let idleCPU = server.cpuSeconds()
        load.run(seconds: settings.idleSeconds, rate: 0, measure: false)
        run.idleServerCPU = server.cpuSeconds() - idleCPU
        run.idleRSS = server.residentBytes()
        run.heldPolls = load.heldPolls
        run.openConnections = load.openConnections
        let warmup = settings.warmupSeconds + Double(settings.devices) / settings.pushesPerSecond
        note("fleet: idle RSS \(bytes(Double(run.idleRSS))) (baseline \(bytes(Double(run.baselineRSS)))), \(grouped(run.heldPolls)) long polls held; warm-up \(fixed(warmup, 0)) s at \(rate(settings.pushesPerSecond)) pushes/s…")

        // Every device pushes at least once before the measurement: a fleet in service has its
        // replicas known to the server (a device's first push binds its replica to its user, a
        // cost of a new device, not of a push).
        load.run(seconds: warmup, rate: settings.pushesPerSecond, measure: false)
        load.resetMeasurements()
        let serverCPU = server.cpuSeconds()
        let generatorCPU = processCPUSeconds()
        let started = monotonicNanos()
        note("fleet: measuring \(fixed(settings.seconds, 0)) s…")
        load.run(seconds: settings.seconds, rate: settings.pushesPerSecond, measure: true)
        run.measuredSeconds = seconds(monotonicNanos() - started)
        run.serverCPU = server.cpuSeconds() - serverCPU
        run.generatorCPU = processCPUSeconds() - generatorCPU
        run.loadedRSS = server.residentBytes()
        // Drain: what is still owed after 3 s is missing.
        var measured = load.measured
        load.run(seconds: 3, rate: 0, measure: false)
        measured.deliveryLatencies = load.measured.deliveryLatencies
        measured.ackLatencies = load.measured.ackLatencies
        measured.pushFailures = load.measured.pushFailures
        measured.retries = load.measured.retries
        measured.unanswered = load.countUnanswered()
        measured.undelivered = load.countUndelivered()
        run.measured = measured
        return run
    }
}
