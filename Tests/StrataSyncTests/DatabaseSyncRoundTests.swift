import Foundation
import Strata
import StrataCore
import StrataProtocol
@testable import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// Rounds of one database engine run one at a time, in the order they were asked for; a caller
/// cancelled while it waits does not run.
@Suite("Database sync rounds: order and cancellation")
struct DatabaseSyncRoundTests {
    /// Database changes with nothing in them; the first request waits until `open()`.
    final class GatedTransport: OfflineZones {
        let calls = Atomic<Int>(0)
        /// Whether `open()` came, and the first request while it waits for it.
        let gate = Mutex<(opened: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))

        func open() {
            let waiting = gate.withLock { gate -> CheckedContinuation<Void, Never>? in
                gate.opened = true
                defer { gate.waiting = nil }
                return gate.waiting
            }
            waiting?.resume()
        }

        func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
            let call = calls.add(1, ordering: .sequentiallyConsistent).newValue
            if call == 1 {
                await withCheckedContinuation { continuation in
                    let go = gate.withLock { gate -> Bool in
                        if gate.opened { return true }
                        gate.waiting = continuation
                        return false
                    }
                    if go { continuation.resume() }
                }
            }
            return DatabaseChanges(token: "d\(call)", reset: false, moreComing: false, zones: [], removed: [], user: "alice")
        }
    }

    @Test("while a round runs, later sync() calls wait and run in the order they came; one whose task is cancelled while waiting throws CancellationError and never runs", .timeLimit(.minutes(5)))
    func roundsKeepTheirOrder() async throws {
        let dir = TemporaryDirectory()
        let db = try await Database.open(at: dir.sub("phone"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
        let transport = GatedTransport()
        // A zone's sync fails at once (offline, not retried), so that a round is quick however
        // loaded the machine.
        var options = DatabaseSyncOptions()
        options.sync.maxRetries = 0
        let engine = DatabaseSyncEngine(database: db, transport: transport, server: "http://example", options: options)
        let finished = Finished()
        func start(_ name: String) -> Task<Void, any Error> {
            Task {
                _ = try await engine.sync()
                await finished.add(name)
            }
        }
        func waitUntil(_ what: String, _ condition: () async -> Bool) async throws {
            for _ in 0..<2000 where !(await condition()) { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await condition(), "never: \(what)")
        }
        let first = start("first")
        try await waitUntil("the first round asks for the changes") { transport.calls.load(ordering: .sequentiallyConsistent) == 1 }
        let cancelled = start("cancelled")
        try await waitUntil("the second waits") { await engine.roundWaiters.count == 1 }
        let second = start("second")
        try await waitUntil("the third waits") { await engine.roundWaiters.count == 2 }
        let third = start("third")
        try await waitUntil("the fourth waits") { await engine.roundWaiters.count == 3 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        try await waitUntil("the cancelled one left the queue") { await engine.roundWaiters.count == 2 }
        transport.open()
        try await first.value
        try await second.value
        try await third.value
        #expect(await finished.names == ["first", "second", "third"])
        #expect(transport.calls.load(ordering: .sequentiallyConsistent) == 3, "the cancelled caller ran a round")
        try await db.close()
    }

    /// Database changes that are refused (`401 unauthorized`) while `refusing` is set.
    final class RefusingTransport: OfflineZones {
        let refusing = Mutex(true)
        let calls = Atomic<Int>(0)

        func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
            let call = calls.add(1, ordering: .sequentiallyConsistent).newValue
            if refusing.withLock({ $0 }) { throw SyncError(.unauthorized, "the token was refused", status: 401) }
            return DatabaseChanges(token: "d\(call)", reset: false, moreComing: false, zones: [], removed: [], user: "alice")
        }
    }

    @Test("continuous mode's status: a refused token is tried again after unauthorizedBackoff, doubling (not the short backoff of other failures), and the engine goes on once it works; a round's report, the zones that failed and a stop are in the status and its updates", .timeLimit(.minutes(2)))
    func statusAndUnauthorizedBackoff() async throws {
        let dir = TemporaryDirectory()
        let db = try await Database.open(at: dir.sub("phone"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
        let transport = RefusingTransport()
        let clock = ManualClock()
        var options = DatabaseSyncOptions()
        options.sync.maxRetries = 0
        options.sync.clock = clock
        options.sync.jitter = { 1.0 }
        options.sync.unauthorizedBackoff = .seconds(2)
        options.sync.maxUnauthorizedBackoff = .seconds(3)
        let engine = DatabaseSyncEngine(database: db, transport: transport, server: "http://example", options: options)
        let updates = await engine.statusUpdates()
        let phases = Task {
            var seen: [DatabaseSyncStatus.Phase] = []
            for await status in updates {
                seen.append(status.phase)
                if status.phase == .stopped { break }
            }
            return seen
        }
        func waitUntil(_ what: String, _ condition: () async -> Bool) async throws {
            for _ in 0..<2000 where !(await condition()) { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await condition(), "never: \(what)")
        }
        await engine.start()
        try await waitUntil("the refusal backs off by 2 s") { clock.deadlines == [clock.now.advanced(by: .seconds(2))] }
        #expect(await engine.currentStatus.phase == .unauthorized)
        #expect(await engine.currentStatus.lastError?.code == .unauthorized)
        clock.advance(by: .seconds(2))
        try await waitUntil("the second refusal backs off by 3 s (doubled, capped)") { clock.deadlines == [clock.now.advanced(by: .seconds(3))] }
        #expect(transport.calls.load(ordering: .sequentiallyConsistent) == 2, "the provider was asked in a tight loop")

        transport.refusing.withLock { $0 = false }
        clock.advance(by: .seconds(3))
        // The round reaches the server; the default zone, never synced, fails (offline).
        try await waitUntil("a round completes") { await engine.currentStatus.rounds == 1 }
        let status = await engine.currentStatus
        #expect(status.lastError == nil && status.lastReport != nil)
        #expect(status.failingZones[ZoneReference("default")]?.code == .transport, "\(status.failingZones)")
        await engine.stop()
        #expect(await engine.currentStatus.phase == .stopped)
        let seen = await phases.value
        #expect(seen.contains(.unauthorized) && seen.contains(.syncing) && seen.last == .stopped, "\(seen)")
        try await db.close()
    }
}

actor Finished {
    var names: [String] = []
    func add(_ name: String) { names.append(name) }
}
