import AsyncHTTPClient
import StrataSyncAsyncHTTPClient
import Foundation
import NIOHTTP1
import Strata
@testable import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("Pull-only sync end to end")
struct ReadOnlySyncTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    @Test("a read-only grantee and a reader of a public zone see the owner's data; their own edits wait, counted, and push once write access is granted")
    func readOnlyGranteeAndPublicReader() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let owner = try await Store.open(at: dir.sub("owner"), schema: deviceSchema)
            try await owner.transaction { tx in _ = try tx.insert("Folder", ["name": "owner's"]) }
            try await SyncEngine(store: owner, server: url, zone: "pub", credentials: "alice-secret").sync()
            let admin = HTTPSyncTransport(server: url, bearer: "alice-secret")
            try await admin.setAccess("pub", #"{"access": "public", "grants": {"bob": "read"}}"#)

            for user in ["bob", "carol"] {
                // Opening a store records its schema: a local transaction, but no edit, so a
                // reader that never edited is blocked by nothing.
                let reader = try await Store.open(at: dir.sub(user), schema: deviceSchema)
                let engine = try SyncEngine(store: reader, server: url, zone: "pub", owner: "alice", credentials: Self.users[user] ?? "")
                let report = try await engine.sync()
                #expect(report.pulledTransactions > 0)
                #expect(report.unpushable == 0)
                #expect(reader.fetch("Folder").map { $0["name"].stringValue } == ["owner's"])
                let status = await engine.statusUpdates().first { _ in true }
                #expect(status?.blocked == nil && status?.pending == 0)
                #expect(status?.lastError == nil)
                try await reader.close()
            }

            // Bob edits while read-only; the edit waits, then goes out once he may write.
            let bob = try await Store.open(at: dir.sub("bob"), schema: deviceSchema)
            let bobsEngine = try SyncEngine(store: bob, server: url, zone: "pub", owner: "alice", credentials: "bob-secret")
            try await bob.transaction { tx in _ = try tx.insert("Folder", ["name": "bob's"]) }
            let waiting = try await bobsEngine.sync()
            #expect(waiting.unpushable == 1 && waiting.pushedTransactions == 0)
            let blocked = await bobsEngine.currentStatus
            #expect(blocked.blocked?.contains("may only read") == true && blocked.pending == 1)
            try await admin.setAccess("pub", #"{"grants": {"bob": "readWrite"}}"#)
            let pushed = try await bobsEngine.sync()
            #expect(pushed.unpushable == 0 && pushed.pushedTransactions >= 2)
            try await SyncEngine(store: owner, server: url, zone: "pub", credentials: "alice-secret").sync()
            #expect(Set(owner.fetch("Folder").compactMap { $0["name"].stringValue }) == ["owner's", "bob's"])
            #expect(owner.digest() == bob.digest())
            try await bob.close()
            try await owner.close()
        }
    }
}

extension HTTPSyncTransport {
    /// Changes one of the caller's zones' access and grants (a `PUT` body).
    func setAccess(_ zone: String, _ settings: String) async throws {
        _ = try await send(HTTPExchangeRequest(method: "PUT", url: url(ZoneReference(zone)), body: Array(settings.utf8)))
    }
}
