import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Strata
@testable import StrataPostgres
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("Sharing: participants, accepting and leaving a share")
struct ShareParticipantsTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]

    @Test("the description lists participants with their grant and acceptance; a grantee accepts (and the database changes say so), leaves (the owner sees it, the leaver is told 'revoked' and can no longer read); a stranger or the owner cannot accept",
          arguments: backends)
    func acceptAndLeave(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, _ in
            let created = try await client.createZone("board", as: Token.bob, #"{"access": "shared", "grants": {"alice": "readWrite", "dave": "read"}}"#)
            #expect(created.participants == [ZoneParticipant(user: "alice", grant: .readWrite, accepted: false),
                                             ZoneParticipant(user: "dave", grant: .read, accepted: false)])
            let aliceStart = try await client.databaseChanges(as: Token.alice)
            #expect(aliceStart.zones.first { $0.name == "board" }?.accepted == false)
            let bobStart = try await client.databaseChanges(as: Token.bob)

            let accepted = try await client.execute(uri: zoneURI("bob/board", "/accept"), method: .post, headers: auth(Token.alice))
            #expect(accepted.status == .ok, "\(String(buffer: accepted.body))")
            let described = try JSONDecoder().decode(ZoneDescription.self, from: accepted.body.data)
            #expect(described.participants?.first { $0.user == "alice" }?.accepted == true)
            #expect(try await client.describe("bob/board", as: Token.bob).participants?.first { $0.user == "alice" }?.accepted == true)
            let aliceAfter = try await client.databaseChanges(as: Token.alice, after: aliceStart.token)
            #expect(aliceAfter.names == ["bob/board"] && aliceAfter.zones.first?.accepted == true)
            // Accepting twice is harmless.
            #expect(try await client.execute(uri: zoneURI("bob/board", "/accept"), method: .post, headers: auth(Token.alice)).status == .ok)

            // A change of alice's grant keeps her acceptance; a grant taken and given again starts over.
            try await client.changeZone("board", as: Token.bob, #"{"grants": {"alice": "read", "dave": "read"}}"#)
            #expect(try await client.describe("bob/board", as: Token.bob).participants?.first { $0.user == "alice" } == ZoneParticipant(user: "alice", grant: .read, accepted: true))

            let daveStart = try await client.databaseChanges(as: daveToken)
            let left = try await client.execute(uri: zoneURI("bob/board", "/leave"), method: .post, headers: auth(daveToken))
            #expect(left.status == .noContent, "\(String(buffer: left.body))")
            #expect(try await client.describe("bob/board", as: Token.bob).participants == [ZoneParticipant(user: "alice", grant: .read, accepted: true)])
            #expect(try await client.databaseChanges(as: daveToken, after: daveStart.token).removedNames == ["bob/board:revoked"])
            #expect(try await client.execute(uri: zoneURI("bob/board"), method: .get, headers: auth(daveToken)).status == .notFound)
            // The owner's devices hear of it (the participants changed).
            #expect(try await client.databaseChanges(as: Token.bob, after: bobStart.token).names == ["bob/board"])

            // A stranger gets what a zone that does not exist gets; the owner may not accept their own zone.
            let stranger = try await client.execute(uri: zoneURI("bob/board", "/accept"), method: .post, headers: auth(Token.carol))
            let nothing = try await client.execute(uri: zoneURI("bob/nothing", "/accept"), method: .post, headers: auth(Token.carol))
            #expect(stranger.status == .notFound && nothing.status == .notFound)
            #expect(try errorBody(stranger).code == "zoneNotFound")
            #expect(try errorBody(nothing).code == "zoneNotFound")
            #expect(try await client.execute(uri: zoneURI("bob/board", "/leave"), method: .post, headers: auth(daveToken)).status == .notFound)
            #expect(try await client.execute(uri: zoneURI("board", "/accept"), method: .post, headers: auth(Token.bob)).status == .badRequest)
        }
        try await storage.close()
    }

    @Test("acceptances are kept by the storage: a reopened storage still has them, a zone deleted and recreated keeps its grantees' acceptance",
          arguments: backends)
    func acceptanceIsDurable(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "board", owner: "bob", access: .shared, grants: ["alice": .read, "dave": .read])
        _ = try await storage.acceptShare("bob/board", user: "alice")
        try await storage.close()
        storage = try await site.open()
        #expect(try await storage.zone("bob/board")?.accepted == ["alice"])
        try await storage.deleteZone("bob/board")
        let recreated = try await storage.createZone("bob/board", settings: ZoneSettings(), maxZonesPerOwner: nil)
        #expect(recreated.grants == ["alice": .read, "dave": .read] && recreated.accepted == ["alice"])
        try await storage.close()
    }

    @Test("an embedded catalog written before acceptance was kept (no accepted key) still opens, and its grants read as accepted")
    func oldCatalogOpens() async throws {
        let site = try StorageSite(.embedded)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "board", owner: "bob", access: .shared, grants: ["alice": .read, "dave": .readWrite])
        _ = try await storage.createZone(name: "gone", owner: "bob", access: .shared, grants: ["alice": .read])
        try await storage.deleteZone("bob/gone")
        try await storage.close()
        // The catalog as a server of before this change wrote it: the same, without "accepted".
        let path = site.directory.sub("data") + "/zones.json"
        var catalog = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        catalog["zones"] = (catalog["zones"] as? [[String: Any]])?.map { $0.filter { $0.key != "accepted" } }
        catalog["deleted"] = (catalog["deleted"] as? [[String: Any]])?.map { $0.filter { $0.key != "accepted" } }
        let old = try JSONSerialization.data(withJSONObject: catalog, options: [.sortedKeys])
        #expect(!String(decoding: old, as: UTF8.self).contains("accepted"))
        try old.write(to: URL(fileURLWithPath: path))

        storage = try await site.open()
        #expect(try await storage.zone("bob/board")?.accepted == ["alice", "dave"])
        let recreated = try await storage.createZone("bob/gone", settings: ZoneSettings(), maxZonesPerOwner: nil)
        #expect(recreated.accepted == ["alice"])
        try await storage.close()
    }

    @Test("a PostgreSQL database of the previous schema (version 11) is migrated: its grants read as accepted, its zones are listed by the database changes, and changes after are stamped")
    func oldSchemaMigrates() async throws {
        let cluster = try PostgresCluster.shared()
        let site = try StorageSite(.postgres)
        let database = try #require(site.url?.split(separator: "/").last.map(String.init))
        func versions() throws -> String {
            try cluster.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM strata_schema_migrations", database: database)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var storage = try await site.open()
        _ = try await storage.createZone(name: "board", owner: "bob", access: .shared, grants: ["alice": .read])
        try await storage.close()
        _ = try cluster.psql(undoSchemaVersion12, database: database)
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11")

        storage = try await site.open()
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11,12,13,14")
        #expect(try await storage.zone("bob/board")?.accepted == ["alice"])
        let clock = try await storage.databaseClock()
        #expect(try await storage.memberZones(of: "alice", after: nil, through: clock.stamp, limit: 10).map(\.info.name) == ["board"])
        let replica = ReplicaID.random()
        _ = try await storage.append(zone: "bob/board", user: "bob", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        let later = try await storage.databaseClock()
        #expect(later.life == clock.life && later.stamp > clock.stamp)
        #expect(try await storage.memberZones(of: "alice", after: clock.stamp, through: later.stamp, limit: 10).map(\.end) == [1])
        try await storage.close()
    }
}
