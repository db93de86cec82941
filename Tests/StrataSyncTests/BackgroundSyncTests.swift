import Foundation
@_spi(StrataInternals) import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// Background sync (`syncOnce(deadline:)`): as much as fits in a time budget, the store consistent
/// after every budget, the next call going on from there.
@Suite("Background sync with a time budget through a real server")
struct BackgroundSyncTests {
    /// Budgets from 1 ms upward, growing by half each call (so that several calls end part-way).
    static func budgets() -> some Sequence<Duration> {
        sequence(first: Duration.milliseconds(1)) { $0 * 3 / 2 }
    }

    /// What the store's files hold, read from disk by a reader of its own, equals what the open
    /// store shows: nothing half-applied.
    static func expectConsistent(_ store: Store, _ sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reader = try StoreReader.open(at: store.directory)
        #expect(reader.digest() == store.digest(), "the store's files and the open store differ", sourceLocation: sourceLocation)
    }

    @Test("syncOnce(deadline:) with budgets from 1 ms upward: every call leaves the store consistent, the next one goes on, nothing is pushed twice, and the device ends equal to the zone", arguments: ServerBackend.allCases)
    func budgetsFromOneMillisecond(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            // Another device filled the zone: 300 transactions to pull.
            let busy = try await Store.open(at: dir.sub("busy"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            for i in 0..<300 { try await busy.transaction { tx in try tx.insert("Note", ["title": .string("remote \(i)")]) } }
            try await SyncEngine(store: busy, server: url, zone: "z", credentials: "alice-secret").sync()

            // This device has 120 edits of its own to push, in small batches and small pages:
            // many requests, so that deadlines fall between them and inside them.
            let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            for i in 0..<120 { try await device.transaction { tx in try tx.insert("Note", ["title": .string("local \(i)")]) } }
            var options = SyncOptions()
            options.pushBatchSize = 4
            options.pullLimit = 10
            let engine = try SyncEngine(store: device, server: url, zone: "z", credentials: "alice-secret", options: options)

            var calls = 0
            var partial = 0
            var leftBefore = Int.max
            var finished = false
            for budget in Self.budgets() {
                calls += 1
                let report = try await engine.syncOnce(within: budget)
                try Self.expectConsistent(device)
                // What is left only shrinks, and the status agrees with the report.
                #expect(report.leftToPush <= leftBefore, "budget \(budget): \(report)")
                leftBefore = report.leftToPush
                #expect(await engine.currentStatus.pending == report.leftToPush)
                if report.finished {
                    #expect(report.leftToPush == 0 && !report.moreToPull, "\(report)")
                    finished = true
                    break
                }
                #expect(report.leftToPush > 0 || report.moreToPull, "an unfinished sync names what is left: \(report)")
                if report.pushedTransactions + report.pulledTransactions > 0 { partial += 1 }
                if calls > 60 { break }
            }
            #expect(finished, "the sync never finished within \(calls) growing budgets")
            #expect(partial > 0, "no budget ended part-way through the sync (\(calls) calls)")
            #expect(calls > 2, "the first budgets (1 ms) cannot hold a whole sync")

            // Every edit is in the zone exactly once, and both devices hold the same.
            try await SyncEngine(store: busy, server: url, zone: "z", credentials: "alice-secret").sync()
            #expect(device.count("Note") == 420)
            #expect(busy.digest() == device.digest())
            let fresh = try await Store.open(at: dir.sub("fresh"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            try await SyncEngine(store: fresh, server: url, zone: "z", credentials: "alice-secret").sync()
            // The schema record and 120 inserts, each once.
            #expect(try fresh.transactions().filter { $0.transaction.replica == device.replicaID }.count == 121)
            #expect(fresh.digest() == device.digest())
            for store in [busy, device, fresh] { try await store.close() }
        }
    }

    @Test("a deadline already past sends nothing and reports everything as left; a sync after it does it all")
    func deadlinePast() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            for i in 0..<5 { try await device.transaction { tx in try tx.insert("Note", ["title": .string("n\(i)")]) } }
            let engine = try SyncEngine(store: device, server: url, zone: "z", credentials: "alice-secret")
            let report = try await engine.syncOnce(deadline: .now - .seconds(1))
            #expect(!report.finished && report.leftToPush == 5 && report.moreToPull && report.pushedTransactions == 0, "\(report)")
            let done = try await engine.syncOnce(within: .seconds(60))
            #expect(done.finished && done.leftToPush == 0 && done.pushedTransactions >= 5, "\(done)")
            try await device.close()
        }
    }

    @Test("a request in flight at the deadline is cancelled: a server that holds its answer back does not hold the sync past its deadline")
    func stalledRequestCutAtDeadline() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            try await device.transaction { tx in _ = try tx.insert("Note", ["title": "n"]) }
            let stalling = StallingTransport(try HTTPSyncTransport(server: url, bearer: "alice-secret"))
            let engine = try SyncEngine(store: device, transport: stalling, zone: "z")
            let start = ContinuousClock.now
            let report = try await engine.syncOnce(within: .seconds(5))
            let took = ContinuousClock.now - start
            // The deadline cut the sync: in the stalled pull, or (a machine so loaded that the
            // look-up and the push took the 5 s) before it.
            #expect(!report.finished && report.moreToPull, "\(report)")
            if report.pushedTransactions > 0 { #expect(report.leftToPush == 0 && stalling.pushes.withLock { $0 } >= 1, "\(report)") }
            // A liveness bound: the stalled pull alone would take 120 s.
            #expect(took < .seconds(60), "the sync took \(took) against a 5 s budget")
            try await device.close()
        }
    }

    @Test("cancelling the task of a syncOnce (a BGTask's expiration handler) ends it as the deadline does: it returns the report, saying what is left, instead of throwing")
    func cancelledTask() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            try await device.transaction { tx in _ = try tx.insert("Note", ["title": "n"]) }
            let engine = try SyncEngine(store: device, transport: StallingTransport(try HTTPSyncTransport(server: url, bearer: "alice-secret")), zone: "z")
            let work = Task { try await engine.syncOnce(within: .seconds(600)) }
            // Once the push went out, the pull stalls; then the task is cancelled.
            for _ in 0..<3000 where await engine.currentStatus.pushed == 0 { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(200))
            work.cancel()
            let report = try await work.value
            #expect(!report.finished && report.moreToPull, "\(report)")
            if report.pushedTransactions > 0 { #expect(report.leftToPush == 0, "\(report)") }
            #expect(await engine.currentStatus.phase == .idle)
            try await device.close()
        }
    }

    @Test("a database's syncOnce(deadline:) with budgets from 1 ms upward: zones with edits go first, unfinished zones are named and synced next time, and every zone ends equal to the server's")
    func databaseBudgets() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let zones = (0..<4).map { ZoneReference("z\($0)") }
            let other = try await Database.open(at: dir.sub("other"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            for zone in zones {
                _ = try await other.addZone(zone)
                for i in 0..<40 { try await other.transaction { tx in _ = try tx.insert("Note", ["title": .string("\(zone) remote \(i)")], in: zone) } }
            }
            var options = DatabaseSyncOptions()
            options.sync.pushBatchSize = 4
            options.sync.pullLimit = 8
            let otherSync = DatabaseSyncEngine(database: other, server: url, credentials: "alice-secret", options: options)
            try await otherSync.sync()

            let phone = try await Database.open(at: dir.sub("phone"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let phoneSync = DatabaseSyncEngine(database: phone, server: url, credentials: "alice-secret", options: options)
            // The first full listing adds the zones; then the phone edits one of them.
            _ = try await phoneSync.syncOnce(within: .seconds(60))
            for i in 0..<30 { try await phone.transaction { tx in _ = try tx.insert("Note", ["title": .string("phone \(i)")], in: zones[3]) } }
            for i in 0..<40 { try await other.transaction { tx in _ = try tx.insert("Note", ["title": .string("more \(i)")], in: zones[0]) } }
            try await otherSync.sync()

            var calls = 0
            var sawUnfinished = false
            for budget in Self.budgets() {
                calls += 1
                let report = try await phoneSync.syncOnce(within: budget)
                for zone in phone.zones { try Self.expectConsistent(try #require(phone.store(for: zone))) }
                #expect(report.failures.isEmpty, "\(report.failures)")
                if report.finished {
                    #expect(report.unfinishedZones.isEmpty)
                    break
                }
                sawUnfinished = true
                // The zone with edits is synced before the others: while it is unfinished, the
                // others have not pushed or pulled anything it would have waited for.
                if report.unfinishedZones.contains(zones[3]), let started = report.zones[zones[0]] {
                    #expect(started.pulledTransactions == 0 || report.zones[zones[3]] != nil, "\(report)")
                }
                if calls > 60 { break }
            }
            #expect(sawUnfinished && calls > 2)
            try await otherSync.sync()
            for zone in zones {
                #expect(phone.store(for: zone)?.digest() == other.store(for: zone)?.digest(), "zone \(zone) differs")
            }
            try await phone.close()
            try await other.close()
        }
    }
}

/// Forwards to a real transport, but holds every pull's answer back for two minutes (a server
/// that stalls, a connection that hangs) — and does not heed cancellation meanwhile (as an app's
/// token provider or a custom transport may not): the deadline must not wait for it.
final class StallingTransport: SyncTransport {
    let base: any SyncTransport
    let pushes = Mutex(0)
    init(_ base: any SyncTransport) { self.base = base }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        pushes.withLock { $0 += 1 }
        return try await base.push(zone: zone, transactions: transactions)
    }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + 120) { done.resume() }
        }
        return try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await base.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
}
