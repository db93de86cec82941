import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A revoked token in continuous mode, against a real server: the engine's waits run on a manual
/// clock (the requests are real), so the test counts what the engine does over a span of
/// clock time without waiting for it.
@Suite("A revoked token: backoff, a typed state, resumption")
struct RevokedTokenTests {
    /// Hands out `revoked` (refused by the server) until `works` is set, then Alice's token;
    /// counts the fresh tokens it was asked for.
    final class SigningInAgain: Sendable {
        let works = Atomic<Bool>(false)
        let refreshes = Atomic<Int>(0)
        var provider: TokenProvider {
            TokenProvider { refresh in
                if refresh { self.refreshes.add(1, ordering: .relaxed) }
                return self.works.load(ordering: .relaxed) ? "alice-secret" : "revoked-token"
            }
        }
    }

    @Test("continuous mode with a revoked token asks for a fresh one once per try, backs off doubling on the engine's clock (5 tries in a minute, not a loop), shows unauthorized, and pushes the pending edit by itself once the provider's token works")
    func revokedTokenBacksOffAndResumes() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await store.transaction { tx in _ = try tx.insert("Note", ["title": "written while signed out"]) }

            let clock = ManualClock()
            var options = SyncOptions()
            options.clock = clock
            options.jitter = { 1 }
            options.unauthorizedBackoff = .seconds(2)
            options.maxUnauthorizedBackoff = .seconds(64)
            let tokens = SigningInAgain()
            let engine = try SyncEngine(store: store, server: url, zone: "notes", tokens: tokens.provider, options: options)
            await engine.start()

            #expect(await clock.waitForSleepers(1, spins: 10_000_000), "the engine never backed off")
            let refused = await engine.currentStatus
            #expect(refused.phase == .unauthorized, "\(refused)")
            #expect(refused.lastError?.code == .unauthorized)
            #expect(refused.pending == 1)
            #expect(tokens.refreshes.load(ordering: .relaxed) == 1, "one fresh token asked for on the 401")
            #expect(clock.deadlines == [clock.now.advanced(by: .seconds(2))])

            // A minute of the engine's clock, a second at a time: tries at 2, 6, 14, 30 s (the
            // wait doubling from 2 s), each asking for one fresh token.
            var deadlines: [Duration] = []
            for _ in 0..<60 {
                clock.advance(by: .seconds(1))
                #expect(await clock.waitForSleepers(1, spins: 10_000_000), "the engine stopped backing off")
                if let next = clock.deadlines.first?.offset, deadlines.last != next { deadlines.append(next) }
            }
            #expect(tokens.refreshes.load(ordering: .relaxed) == 5, "fresh tokens asked for in a minute: \(tokens.refreshes.load(ordering: .relaxed))")
            #expect(deadlines == [.seconds(2), .seconds(6), .seconds(14), .seconds(30), .seconds(62)])
            let still = await engine.currentStatus
            #expect(still.phase == .unauthorized && still.pending == 1 && still.pushed == 0, "\(still)")

            // The user signs in again: the next try gets a working token and goes on by itself.
            tokens.works.store(true, ordering: .relaxed)
            clock.advance(by: .seconds(64))
            let resumed = await waitForStatus(engine) { $0.pending == 0 && $0.pushed == 1 && $0.lastError == nil }
            #expect(resumed.pending == 0 && resumed.pushed == 1, "\(resumed)")
            #expect(resumed.phase != .unauthorized && resumed.lastError == nil, "\(resumed)")
            #expect(tokens.refreshes.load(ordering: .relaxed) == 6)
            await engine.stop()

            let other = try await Store.open(at: dir.sub("other"), schema: deviceSchema)
            try await SyncEngine(store: other, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(other.fetch("Note").map { $0["title"].stringValue } == ["written while signed out"])
            try await other.close()
            try await store.close()
        }
    }

    @Test("a single sync refused for its credentials ends in the unauthorized phase, so an app reading the status can tell a sign-in problem from a network one")
    func singleSyncShowsUnauthorized() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
            let engine = try SyncEngine(store: store, server: url, zone: "notes", credentials: "revoked-token")
            await #expect(throws: SyncError.self) { try await engine.sync() }
            let status = await engine.currentStatus
            #expect(status.phase == .unauthorized && status.lastError?.code == .unauthorized, "\(status)")
            try await store.close()
        }
    }
}
