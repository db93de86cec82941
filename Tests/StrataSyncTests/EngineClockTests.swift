import Foundation
import Logging
import ServiceLifecycle
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// The engine waits on the clock it is given (``SyncOptions/clock``) with the jitter it is given,
/// so its backoffs are asserted by who sleeps until when and what happens once the clock gets
/// there — driven by a manual clock, never by waiting.
@Suite("The sync engine's waits, on a test clock")
struct EngineClockTests {
    /// Fails the first `failures` pushes with `error`, then passes them on.
    final class FlakyTransport: SyncTransport {
        let inner = InMemoryTransport()
        let error: SyncError
        let failures: Int
        let pushes = Atomic<Int>(0)

        init(failing failures: Int, with error: SyncError) {
            self.failures = failures
            self.error = error
        }

        func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await inner.ensureZone(zone, create: create) }
        func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
            let attempt = pushes.add(1, ordering: .relaxed).newValue
            if attempt <= failures { throw error }
            return try await inner.push(zone: zone, transactions: transactions)
        }
        func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
            try await inner.pull(zone: zone, after: token, limit: limit, wait: wait)
        }
        func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await inner.snapshot(zone: zone) }
        func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await inner.replicas(zone: zone) }
        func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
            try await inner.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
        }
    }

    /// A store with one transaction to push, an engine on `transport` waiting on `clock`.
    func engine(_ dir: TemporaryDirectory, _ transport: FlakyTransport, _ clock: ManualClock,
                jitter: Double = 1) async throws -> (Store, SyncEngine) {
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("inbox")]) }
        var options = SyncOptions()
        options.clock = clock
        options.jitter = { jitter }
        options.initialBackoff = .seconds(1)
        options.maxBackoff = .seconds(60)
        options.maxRetries = 5
        return (store, try SyncEngine(store: store, transport: transport, zone: "notes", options: options))
    }

    @Test("a failed push is retried once the clock reaches the backoff — not a moment before — and the backoff doubles with each failure")
    func backoffWaitsOnTheClock() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = FlakyTransport(failing: 2, with: SyncError(.transport, "connection refused"))
        let (store, engine) = try await engine(dir, transport, clock)
        let sync = Task { try await engine.sync() }

        #expect(await clock.waitForSleepers(1), "the engine never waited after the first failure")
        #expect(clock.deadlines == [clock.now.advanced(by: .seconds(1))])
        clock.advance(by: .milliseconds(999))
        #expect(clock.deadlines.count == 1 && transport.pushes.load(ordering: .relaxed) == 1, "retried before the backoff ended")

        clock.advance(by: .milliseconds(1))
        #expect(await clock.waitForSleepers(1), "the engine never waited after the second failure")
        #expect(transport.pushes.load(ordering: .relaxed) == 2)
        #expect(clock.deadlines == [clock.now.advanced(by: .seconds(2))], "the second backoff is twice the first")

        clock.advance(by: .seconds(2))
        let report = try await sync.value
        #expect(report.pushedTransactions == 2)  // the schema's and the folder's
        #expect(transport.pushes.load(ordering: .relaxed) == 3)
        try await store.close()
    }

    @Test("the jitter scales the wait (half of it at the low end), and a server's Retry-After replaces it")
    func jitterAndRetryAfter() async throws {
        let dir = TemporaryDirectory()
        let halfClock = ManualClock()
        let half = FlakyTransport(failing: 1, with: SyncError(.transport, "reset"))
        let halfDir = TemporaryDirectory()
        let (first, halfEngine) = try await engine(halfDir, half, halfClock, jitter: 0.5)
        let halfSync = Task { try await halfEngine.sync() }
        #expect(await halfClock.waitForSleepers(1))
        #expect(halfClock.deadlines == [halfClock.now.advanced(by: .milliseconds(500))])
        halfClock.advance(by: .milliseconds(500))
        _ = try await halfSync.value
        try await first.close()

        let clock = ManualClock()
        let limited = FlakyTransport(failing: 1, with: SyncError(.rateLimited, "slow down", status: 429, retryAfter: 7))
        let (store, engine) = try await engine(dir, limited, clock, jitter: 0.5)
        let sync = Task { try await engine.sync() }
        #expect(await clock.waitForSleepers(1))
        #expect(clock.deadlines == [clock.now.advanced(by: .seconds(7))], "the server's Retry-After is what the engine waits")
        clock.advance(by: .seconds(7))
        #expect(try await sync.value.pushedTransactions == 2)
        try await store.close()
    }

    @Test("in continuous mode a failed round waits on the clock before the next, and the next round pushes")
    func continuousModeBacksOffOnTheClock() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        // More failures than one round retries: the round fails and continuous mode backs off.
        let transport = FlakyTransport(failing: 6, with: SyncError(.transport, "down"))
        let (store, engine) = try await engine(dir, transport, clock)
        await engine.start()
        // Five retries inside the round (1, 2, 4, 8, 16 s), then the round's own backoff (1 s).
        for expected in [1, 2, 4, 8, 16, 1] {
            #expect(await clock.waitForSleepers(1), "no wait of \(expected) s")
            #expect(clock.deadlines == [clock.now.advanced(by: .seconds(expected))])
            clock.advance(by: .seconds(expected))
        }
        var pushed = false
        for _ in 0..<100_000 where !pushed {
            pushed = await engine.currentStatus.pushed >= 2
            if !pushed { await Task.yield() }
        }
        #expect(pushed, "the round after the backoff did not push")
        #expect(transport.pushes.load(ordering: .relaxed) == 7)
        await engine.stop()
        try await store.close()
    }
}

/// The engine as a swift-service-lifecycle service.
@Suite("The sync engine as a service")
struct EngineServiceTests {
    @Test("in a ServiceGroup the engine syncs continuously — a local commit reaches the zone without a sync() call — and a graceful shutdown stops it and ends the group")
    func serviceGroup() async throws {
        let dir = TemporaryDirectory()
        let transport = EngineClockTests.FlakyTransport(failing: 0, with: SyncError(.transport, "unused"))
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [.init(service: engine)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }

        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("inbox")]) }
        var pushed = false
        for _ in 0..<200_000 where !pushed {
            pushed = await engine.currentStatus.pushed >= 2  // the schema's transaction and the folder's
            if !pushed { await Task.yield() }
        }
        #expect(pushed, "the engine in the group never pushed the commit")

        await group.triggerGracefulShutdown()
        try await running.value
        #expect(await engine.currentStatus.phase == .stopped)
        try await store.close()
    }

    /// Yields (then sleeps a millisecond at a time) until `condition` holds or `seconds` have
    /// passed; whether it held. A bound in time, not in spins: beside every other suite,
    /// 200,000 yields once ran out before the engine's background push did.
    static func eventually(seconds: Int = 60, _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var spins = 0
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            spins += 1
            if spins < 10_000 { await Task.yield() } else { try? await Task.sleep(for: .milliseconds(1)) }
        }
        return await condition()
    }

    @Test("cancelling run() ends continuous mode and every part of it: run() returns, the status says stopped, a later local commit reaches no server, and the engine can start again")
    func cancellingRunEndsEverything() async throws {
        let dir = TemporaryDirectory()
        let transport = EngineClockTests.FlakyTransport(failing: 0, with: SyncError(.transport, "unused"))
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
        let running = Task { try await engine.run() }
        #expect(await Self.eventually { await engine.currentStatus.pushed >= 1 }, "the engine never pushed the schema's transaction")

        running.cancel()
        try await running.value
        #expect(await engine.currentStatus.phase == .stopped)
        let pushes = transport.pushes.load(ordering: .relaxed)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("after the end")]) }
        for _ in 0..<20_000 { await Task.yield() }
        #expect(transport.pushes.load(ordering: .relaxed) == pushes, "a part of continuous mode outlived run()")

        await engine.start()
        #expect(await Self.eventually { await engine.currentStatus.pushed >= 2 }, "started again, the engine did not push the commit")
        await engine.stop()
        #expect(await engine.currentStatus.phase == .stopped)
        try await store.close()
    }

    // The limit is a liveness bound: alone this takes a tenth of a second; beside every other
    // suite it once took more than a minute.
    @Test("stop() ends continuous mode that run() began: run() returns without a shutdown or a cancellation", .timeLimit(.minutes(3)))
    func stopEndsRun() async throws {
        let dir = TemporaryDirectory()
        let transport = EngineClockTests.FlakyTransport(failing: 0, with: SyncError(.transport, "unused"))
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
        let running = Task { try await engine.run() }
        #expect(await Self.eventually { await engine.currentStatus.phase == .waiting }, "the engine never reached its long poll")
        await engine.stop()
        try await running.value
        #expect(await engine.currentStatus.phase == .stopped)
        try await store.close()
    }
}
