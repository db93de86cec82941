import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

@Suite("Token providers, against a real server")
struct TokenProviderTests {
    @Test("an expired token: the server answers 401, the provider is asked for a fresh one once, and the sync goes through with it — concurrent requests share one refresh")
    func refreshAfter401() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "inbox"]) }
        let calls = Mutex<[Bool]>([])
        let tokens = TokenProvider { refresh in
            calls.withLock { $0.append(refresh) }
            return refresh ? "alice-secret" : "an-expired-token"
        }
        try await withServer(dir.sub("server")) { url, _ in
            let report = try await SyncEngine(store: store, server: url, zone: "notes", tokens: tokens).sync()
            #expect(report.pushedTransactions > 0)
            #expect(calls.withLock { $0 } == [false, true], "asked once, then refreshed once: \(calls.withLock { $0 })")
            // Later requests use the refreshed token without asking again.
            try await SyncEngine(store: store, server: url, zone: "notes", tokens: tokens).sync()
            #expect(calls.withLock { $0 }.count == 2)
        }
        try await store.close()
    }

    @Test("a provider whose fresh token is refused too: the sync fails with unauthorized after one refresh, never loops")
    func refusedAfterRefresh() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        let calls = Atomic<Int>(0)
        let tokens = TokenProvider { _ in
            calls.add(1, ordering: .relaxed)
            return "never-valid"
        }
        try await withServer(dir.sub("server")) { url, _ in
            await #expect {
                try await SyncEngine(store: store, server: url, zone: "notes", tokens: tokens).sync()
            } throws: { error in
                (error as? SyncError)?.code == .unauthorized
            }
        }
        #expect(calls.load(ordering: .relaxed) == 2)
        try await store.close()
    }
}
