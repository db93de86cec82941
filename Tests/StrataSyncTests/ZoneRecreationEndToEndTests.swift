import Foundation
import Strata
@testable import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

extension HTTPSyncTransport {
    /// `DELETE /v1/zones/{zone}` of one of the caller's zones.
    func deleteZone(_ zone: String) async throws {
        _ = try await send(HTTPExchangeRequest(method: "DELETE", url: url(ZoneReference(zone))))
    }

    /// `PUT /v1/zones/{zone}[?owner=]` with `body`, as any client may send it.
    func putZone(_ zone: ZoneReference, _ body: String) async throws {
        _ = try await send(HTTPExchangeRequest(method: "PUT", url: url(zone), body: Array(body.utf8)))
    }

    /// `GET /v1/zones/{zone}[?owner=]`.
    func describe(_ zone: ZoneReference) async throws -> ZoneDescription {
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone))).body
        return try JSONDecoder().decode(ZoneDescription.self, from: Data(body))
    }
}

@Suite("Recreating a deleted zone through the sync engine, against a real server, as hostile users would try it")
struct ZoneRecreationEndToEndTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    @Test("the owner's recreateZone() gives the zone back its grants as they were at the deletion: the grantee syncs on and pushes, the grantee revoked before the deletion stays out, and no grantee can recreate the owner's zone", arguments: ServerBackend.allCases)
    func recreationKeepsGrants(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let aliceStore = try await Store.open(at: dir.sub("alice"), schema: deviceSchema)
            try await aliceStore.transaction { tx in _ = try tx.insert("Note", ["title": "before"]) }
            let alice = try SyncEngine(store: aliceStore, server: url, zone: "board", credentials: "alice-secret")
            try await alice.sync()
            let admin = HTTPSyncTransport(server: url, bearer: "alice-secret")
            try await admin.setAccess("board", #"{"access": "shared", "grants": {"bob": "readWrite", "carol": "read"}}"#)

            let bobStore = try await Store.open(at: dir.sub("bob"), schema: deviceSchema)
            let bob = try SyncEngine(store: bobStore, server: url, zone: "board", owner: "alice", credentials: "bob-secret")
            let carolStore = try await Store.open(at: dir.sub("carol"), schema: deviceSchema)
            let carol = try SyncEngine(store: carolStore, server: url, zone: "board", owner: "alice", credentials: "carol-secret")
            try await bob.sync()
            try await carol.sync()
            #expect(bobStore.count("Note") == 1 && carolStore.count("Note") == 1)

            // Carol's grant is revoked, then the zone deleted.
            try await admin.setAccess("board", #"{"grants": {"bob": "readWrite"}}"#)
            try await admin.deleteZone("board")

            // A grantee cannot recreate the owner's zone, with or without rules of its choosing.
            let bobs = HTTPSyncTransport(server: url, bearer: "bob-secret")
            for body in ["{}", #"{"access": "public", "grants": {"bob": "readWrite", "carol": "readWrite"}}"#] {
                await #expect { try await bobs.putZone(ZoneReference("board", owner: "alice"), body) } throws: { error in
                    (error as? SyncError)?.code == .forbidden
                }
            }
            await #expect { try await bob.sync() } throws: { ($0 as? SyncError)?.code == .zoneDeleted }
            await #expect { try await admin.describe(ZoneReference("board")) } throws: { ($0 as? SyncError)?.code == .zoneNotFound }

            // The owner asks for the zone back: its grants as they were at the deletion.
            await #expect { try await alice.sync() } throws: { ($0 as? SyncError)?.code == .zoneDeleted }
            try await alice.recreateZone()
            let recreated = try await admin.describe(ZoneReference("board"))
            #expect(recreated.access == .shared && recreated.grants == ["bob": .readWrite], "\(recreated)")

            // Bob syncs on (his device starts over with the recreated zone) and pushes.
            try await bobStore.transaction { tx in _ = try tx.insert("Note", ["title": "bob after"]) }
            let bobReport = try await bob.sync()
            #expect(bobReport.pushedTransactions >= 1)
            try await alice.sync()
            #expect(Set(aliceStore.fetch("Note").compactMap { $0["title"].stringValue }) == ["before", "bob after"])

            // Carol, revoked before the deletion, did not get access back through the recreation.
            await #expect { try await carol.sync() } throws: { error in
                let code = (error as? SyncError)?.code
                return code == .forbidden || code == .zoneDeleted
            }
            #expect(!carolStore.fetch("Note").contains { $0["title"].stringValue == "bob after" })
            let carols = HTTPSyncTransport(server: url, bearer: "carol-secret")
            // To her the zone answers as one that does not exist.
            await #expect { try await carols.describe(ZoneReference("board", owner: "alice")) } throws: { ($0 as? SyncError)?.code == .zoneNotFound }

            for store in [aliceStore, bobStore, carolStore] { try await store.close() }
        }
    }
}
