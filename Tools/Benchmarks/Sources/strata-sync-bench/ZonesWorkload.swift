// Rows 8a–8d: one engine for many zones. A database of 1,000 zones with nothing new next to one
// of 1 zone, alternating in one run: an idle sync round's requests, bytes and time (goal: ≤ 2×);
// one long poll covering all 1,000 zones, woken by a push into one of them; a zone of 100k
// events that another user shares, from the share to the objects being queryable (goal ≤ 2 s).
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataProtocol
import StrataSync
import Synchronization

/// Counts every HTTP request and its body bytes both ways (framed transactions, JSON), beneath
/// the transport.
final class CountingExchange: HTTPExchange {
    let inner: any HTTPExchange
    let counts = Mutex((requests: 0, bytes: 0))

    init(_ inner: any HTTPExchange) { self.inner = inner }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        let response = try await inner.send(request)
        counts.withLock {
            $0.requests += 1
            $0.bytes += (request.body?.count ?? 0) + response.body.count
        }
        return response
    }

    func reset() { counts.withLock { $0 = (0, 0) } }
    var seen: (requests: Int, bytes: Int) { counts.withLock { $0 } }
}

struct ZonesRun {
    var zones = 0
    var oneZone: [(nanos: UInt64, requests: Int, bytes: Int)] = []
    var manyZones: [(nanos: UInt64, requests: Int, bytes: Int)] = []
    var firstSyncNanos: UInt64 = 0
    var wakeNanos: [UInt64] = []
    var sharedEvents = 0
    var shareToQueryable: Double = 0
    var shareBreakdown = ""

    func addRows(to report: inout Report) {
        func median(_ values: [UInt64]) -> UInt64 { let s = values.sorted(); return s.isEmpty ? 0 : s[s.count / 2] }
        let one = (median(oneZone.map(\.nanos)), oneZone.map(\.requests).max() ?? 0, oneZone.map(\.bytes).max() ?? 0)
        let many = (median(manyZones.map(\.nanos)), manyZones.map(\.requests).max() ?? 0, manyZones.map(\.bytes).max() ?? 0)
        let timeRatio = Double(many.0) / Double(max(1, one.0))
        let requestRatio = Double(many.1) / Double(max(1, one.1))
        let byteRatio = Double(many.2) / Double(max(1, one.2))
        report.add("8a. idle sync() of a database with 1 zone (median of \(oneZone.count), alternating with 8b)",
                   "\(latency(one.0)); \(one.1) request\(one.1 == 1 ? "" : "s"), \(one.2) B of bodies",
                   "— (baseline)", "—")
        report.add("8b. idle sync() of a database with \(grouped(zones)) zones, nothing new (median of \(manyZones.count)); its first sync (creating every zone) took \(fixed(Double(firstSyncNanos) / 1e9, 2)) s",
                   "\(latency(many.0)); \(many.1) request\(many.1 == 1 ? "" : "s"), \(many.2) B of bodies",
                   "≤ 2× 8a (time, requests, bytes)",
                   "\(fixed(timeRatio, 2))× time, \(fixed(requestRatio, 2))× requests, \(fixed(byteRatio, 2))× bytes — "
                       + (max(timeRatio, requestRatio, byteRatio) <= 2 ? "PASS" : "**MISS**"))
        let wakes = wakeNanos.sorted()
        report.add("8c. one long poll for all \(grouped(zones)) zones (continuous mode): another device pushes into one zone, until the database holds the object (\(wakes.count) samples)",
                   "p50 \(latency(percentile(wakes, 0.5))), p99 \(latency(percentile(wakes, 0.99)))",
                   "one long poll covers every zone", wakes.isEmpty ? "**MISS**" : "PASS (one database long poll; no per-zone poll)")
        report.add("8d. a zone of \(grouped(sharedEvents)) events shared with the user, from the owner's share until the device's query counts every object",
                   "\(fixed(shareToQueryable, 2)) s (\(shareBreakdown))",
                   "≤ 2 s", "\(fixed(shareToQueryable / 2, 2))× goal — " + (shareToQueryable <= 2 ? "PASS" : "**MISS**"))
    }
}

func zonesRun(in directory: String, server: ServerProcess, zones: Int, sharedEvents: Int, samples: Int) async throws -> ZonesRun {
    var run = ZonesRun(zones: zones, sharedEvents: sharedEvents)
    var options = StoreOptions(durability: .groupCommit)
    options.autoCompaction = .disabled
    // One user's devices: selective sync keeps the single-zone database to its zone (the user's
    // other zones would otherwise join it) and the others to the zones `z…` and their own.
    func database(_ name: String, only: (@Sendable (ZoneReference) -> Bool)? = nil) async throws -> (Database, DatabaseSyncEngine, CountingExchange) {
        let defaultZone = ZoneReference("\(name)-default")
        let db = try await Database.open(at: directory + "/" + name, schema: benchSchema, defaultZone: defaultZone, options: options)
        let exchange = CountingExchange(URLSessionExchange.shared)
        let transport = HTTPSyncTransport(server: server.url, tokens: .fixed(ServerProcess.token), exchange: exchange)
        var syncOptions = DatabaseSyncOptions()
        syncOptions.selects = { zone in zone == defaultZone || (only?(zone) ?? false) }
        return (db, DatabaseSyncEngine(database: db, transport: transport, server: server.url.absoluteString, options: syncOptions), exchange)
    }
    let numbered: @Sendable (ZoneReference) -> Bool = { $0.owner == nil && $0.name.hasPrefix("z") }
    // The single-zone database, and the many-zone one: every zone holds one object.
    let (single, singleSync, singleWire) = try await database("one", only: { $0.owner == ServerProcess.sharer })
    try await single.transaction { tx in _ = try tx.insert("Item", itemValues(count: 1, seed: 8)[0]) }
    _ = try await singleSync.sync()
    let (many, manySync, manyWire) = try await database("many", only: numbered)
    let values = itemValues(count: zones, seed: 9)
    note("zones: creating \(grouped(zones)) zones…")
    for index in 1..<zones {
        let zone = ZoneReference("z\(index)")
        try await many.addZone(zone)
        try await many.transaction { tx in _ = try tx.insert("Item", values[index], in: zone) }
    }
    try await many.transaction { tx in _ = try tx.insert("Item", values[0]) }
    var start = monotonicNanos()
    let first = try await manySync.sync()
    run.firstSyncNanos = monotonicNanos() - start
    guard first.failures.isEmpty, first.zones.count == zones else {
        throw BenchError("the first sync of \(zones) zones: \(first.zones.count) synced, failures \(first.failures)")
    }
    _ = try await manySync.sync()  // the token past the zones' creation
    _ = try await singleSync.sync()

    // 8a/8b, alternating.
    note("zones: idle rounds, \(samples) each, alternating…")
    for _ in 0..<samples {
        for (sync, wire, isMany) in [(singleSync, singleWire, false), (manySync, manyWire, true)] {
            wire.reset()
            start = monotonicNanos()
            let report = try await sync.sync()
            let nanos = monotonicNanos() - start
            guard report.zones.isEmpty, report.failures.isEmpty else { throw BenchError("an idle round synced zones: \(report)") }
            let seen = wire.seen
            if isMany { run.manyZones.append((nanos, seen.requests, seen.bytes)) } else { run.oneZone.append((nanos, seen.requests, seen.bytes)) }
        }
    }

    // 8c: continuous mode on the many-zone database; a second device of the user pushes into a
    // zone, and the first has the object.
    note("zones: one long poll for all zones…")
    let (other, otherSync, _) = try await database("other", only: numbered)
    await manySync.start()
    try await Task.sleep(for: .milliseconds(300))
    let wakeSamples = max(5, samples)
    for index in 0..<wakeSamples {
        let zone = ZoneReference("z\((index * 37) % max(1, zones - 1) + 1)")
        try await other.addZone(zone)
        let id = try await other.transaction { tx in try tx.insert("Item", ["name": .string("wake-\(index)")], in: zone) }
        let pushed = monotonicNanos()
        _ = try await otherSync.engine(for: zone).sync()
        var waited = 0
        while many.object(id) == nil {
            try await Task.sleep(for: .milliseconds(1))
            waited += 1
            if waited > 20_000 { throw BenchError("the long poll did not bring object \(index) within 20 s") }
        }
        run.wakeNanos.append(monotonicNanos() - pushed)
    }
    await manySync.stop()

    // 8d: the sharer's zone of `sharedEvents` events, shared with the user; the user's database
    // syncs (as a push notification or the long poll would make it) until it is queryable.
    note("zones: building the sharer's zone of \(grouped(sharedEvents)) events…")
    let sharerDB = try await Database.open(at: directory + "/sharer", schema: benchSchema, defaultZone: ZoneReference("big"), options: options)
    let sharerSync = DatabaseSyncEngine(database: sharerDB, transport: HTTPSyncTransport(server: server.url, bearer: ServerProcess.sharerToken),
                                        server: server.url.absoluteString)
    let big = itemValues(count: sharedEvents, seed: 10)
    var offset = 0
    while offset < sharedEvents {
        let end = min(sharedEvents, offset + 1000)
        try await sharerDB.transaction { tx in for values in big[offset..<end] { _ = try tx.insert("Item", values) } }
        offset = end
    }
    _ = try await sharerSync.sync()
    let shared = ZoneReference("big", owner: ServerProcess.sharer)
    start = monotonicNanos()
    try await sharerSync.share(ZoneReference("big"), with: ServerProcess.user, access: .read)
    let shareDone = monotonicNanos()
    let report = try await singleSync.sync()
    let synced = monotonicNanos()
    let count = try single.read(in: [shared]) { $0.count("Item", in: [shared]) }
    let queryable = monotonicNanos()
    guard count == sharedEvents else { throw BenchError("the shared zone holds \(count) objects on the device, not \(sharedEvents): \(report)") }
    run.shareToQueryable = Double(queryable - start) / 1e9
    run.shareBreakdown = "share \(latency(shareDone - start)), sync() \(fixed(Double(synced - shareDone) / 1e9, 2)) s pulling \(grouped(report.zones[shared]?.pulledTransactions ?? 0)) tx, query \(latency(queryable - synced))"

    for db in [single, many, other, sharerDB] { try await db.close() }
    return run
}
