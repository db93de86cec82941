import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// Bearer token of a fourth test user (alice, bob and carol are in `Token`).
let daveToken = "dave-token"

/// Runs `body` against a server over `storage` listening on a real port, with users alice, bob,
/// carol and dave, following the changes other instances announce (as `strata serve` does).
func withLiveServer<T: Sendable>(_ storage: any ZoneStorage, users: UserRegistry? = nil,
                                 _ body: @escaping @Sendable (any TestClientProtocol, StrataServerApp) async throws -> T) async throws -> T {
    let users = try users ?? UserRegistry(UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol, "dave": daveToken]))
    let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
    let following = Task { await app.followChangesByOthers() }
    defer { following.cancel() }
    return try await app.buildApplication().test(.live) { client in try await body(client, app) }
}

/// What versions 12, 13 and 14 of the PostgreSQL schema (the database changes and acceptances; a
/// zone's oldest supported app schema version; the device registry) added, undone,
/// for the tests that rebuild a database of an earlier version.
let undoSchemaVersion12 = """
    DROP TABLE IF EXISTS strata_devices; DELETE FROM strata_schema_migrations WHERE version >= 14;
    ALTER TABLE strata_zones DROP COLUMN IF EXISTS min_schema_version; DELETE FROM strata_schema_migrations WHERE version >= 13;
    DROP TRIGGER strata_zones_stamp_insert ON strata_zones; DROP TRIGGER strata_zones_stamp_update ON strata_zones;
    DROP TRIGGER strata_zones_stamp_delete ON strata_zones; DROP FUNCTION strata_stamp_zone; DROP FUNCTION strata_zone_members;
    DROP TABLE strata_zone_removals, strata_database_clock; ALTER TABLE strata_zones DROP COLUMN change_stamp, DROP COLUMN accepted;
    ALTER TABLE strata_deleted_zones DROP COLUMN accepted; DELETE FROM strata_schema_migrations WHERE version >= 12;
    """

extension TestClientProtocol {
    /// `GET /v1/database/changes` as `token`'s user; expects 200.
    func databaseChanges(as token: String, after: String? = nil, limit: Int? = nil, wait: Double? = nil) async throws -> DatabaseChanges {
        let response = try await databaseChangesResponse(as: token, after: after, limit: limit, wait: wait)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try JSONDecoder().decode(DatabaseChanges.self, from: response.body.data)
    }

    func databaseChangesResponse(as token: String, after: String? = nil, limit: Int? = nil, wait: Double? = nil) async throws -> TestResponse {
        var items: [String] = []
        if let after { items.append("after=\(after.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? after)") }
        if let limit { items.append("limit=\(limit)") }
        if let wait { items.append("wait=\(wait)") }
        return try await execute(uri: StrataEndpoint.databaseChanges + (items.isEmpty ? "" : "?" + items.joined(separator: "&")),
                                 method: .get, headers: auth(token))
    }

    /// The zone's description as `token`'s user sees it; expects 200.
    func describe(_ zone: String, as token: String) async throws -> ZoneDescription {
        let response = try await execute(uri: zoneURI(zone), method: .get, headers: auth(token))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try JSONDecoder().decode(ZoneDescription.self, from: response.body.data)
    }

    /// Changes zone `name` of `token`'s user; expects 200.
    func changeZone(_ name: String, as token: String, _ settings: String) async throws {
        let response = try await execute(uri: "/v1/zones/\(name)", method: .put, headers: auth(token), body: ByteBuffer(string: settings))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
    }
}

/// A database long poll sent on a connection of its own (the live test client has one connection,
/// which a waiting poll would hold), waiting on the server once this returns.
func databasePoll(port: Int?, as token: String, after: String, wait: Int = 60, app: StrataServerApp) async throws -> RawConnection {
    let poll = try RawConnection(port: try #require(port), readLimit: 90)
    #expect(poll.send("GET \(StrataEndpoint.databaseChanges)?after=\(after)&wait=\(wait) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"))
    for _ in 0..<2000 where app.notifier.databaseWaiterCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
    #expect(app.notifier.databaseWaiterCount > 0, "no database long poll registered within ten seconds")
    return poll
}

/// The answer a ``databasePoll(port:as:after:wait:app:)`` gets.
func databasePollAnswer(_ poll: RawConnection) async throws -> DatabaseChanges {
    let answer = try #require(await poll.readAnswer(), "the long poll got no answer")
    #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
    return try JSONDecoder().decode(DatabaseChanges.self, from: Data(answer.body))
}

extension DatabaseChanges {
    /// The zones named, as `owner/name`, sorted.
    var names: [String] { zones.map { "\($0.owner)/\($0.name)" }.sorted() }
    var removedNames: [String] { removed.map { "\($0.owner)/\($0.name):\($0.reason.rawValue)" }.sorted() }
    var isEmpty: Bool { zones.isEmpty && removed.isEmpty }
}

@Suite("Database changes: which of a user's zones changed since one database-wide token")
struct DatabaseChangesTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]

    @Test("a user sees exactly their own zones and those shared with them by a grant (pending ones flagged), with each zone's current token — not public zones, private zones' ignored grants, or others' zones",
          arguments: backends)
    func ownAndSharedZones(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, _ in
            try await client.createZone("a1")
            try await client.createZone("a2", #"{"access": "public"}"#)
            try await client.createZone("b1", as: Token.bob, #"{"access": "shared", "grants": {"alice": "readWrite"}}"#)
            try await client.createZone("b2", as: Token.bob, #"{"access": "public"}"#)
            try await client.createZone("b3", as: Token.bob, #"{"access": "private", "grants": {"alice": "read"}}"#)
            try await client.createZone("b4", as: Token.bob, #"{"access": "public", "grants": {"alice": "read"}}"#)
            try await client.createZone("c1", as: Token.carol, #"{"access": "shared", "grants": {"dave": "read"}}"#)
            let replica = ReplicaID.random()
            #expect(try await client.push("b1", [transaction(replica, 1...2)], as: Token.bob).status == .ok)

            let changes = try await client.databaseChanges(as: Token.alice)
            #expect(changes.reset && !changes.moreComing && changes.removed.isEmpty)
            #expect(changes.names == ["alice/a1", "alice/a2", "bob/b1", "bob/b4"])
            for zone in changes.zones {
                let described = try await client.describe("\(zone.owner)/\(zone.name)", as: Token.alice)
                #expect(zone.token == described.token && zone.epoch == described.epoch && zone.access == described.access, "\(zone.name)")
            }
            let byName = Dictionary(uniqueKeysWithValues: changes.zones.map { ($0.name, $0) })
            #expect(byName["a1"]?.role == .owner && byName["a1"]?.accepted == true)
            #expect(byName["b1"]?.role == .readWrite && byName["b1"]?.accepted == false)
            #expect(byName["b4"]?.role == .read)
            let carols = try await client.databaseChanges(as: Token.carol)
            #expect(carols.names == ["carol/c1"])
        }
        try await storage.close()
    }

    @Test("after a token, an append makes that zone and only it appear, with its new end token; the next answer is empty, and a user the zone is not shared with sees nothing",
          arguments: StorageBackend.allCases)
    func appendMarksOnlyItsZone(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, _ in
            for name in ["a1", "a2", "a3"] { try await client.createZone(name) }
            try await client.createZone("b1", as: Token.bob)
            let start = try await client.databaseChanges(as: Token.alice)
            let bobStart = try await client.databaseChanges(as: Token.bob)
            let quiet = try await client.databaseChanges(as: Token.alice, after: start.token)
            #expect(quiet.isEmpty && !quiet.reset && quiet.token == start.token)

            let replica = ReplicaID.random()
            let pushedAnswer = try await client.push("a2", [transaction(replica, 1...1)])
            #expect(pushedAnswer.status == .ok)
            let after = try await client.databaseChanges(as: Token.alice, after: start.token)
            #expect(!after.reset && after.names == ["alice/a2"] && after.removed.isEmpty)
            #expect(after.zones.first?.token == (try await client.endToken("a2")))
            #expect(try await client.databaseChanges(as: Token.alice, after: after.token).isEmpty)
            #expect(try await client.databaseChanges(as: Token.bob, after: bobStart.token).isEmpty)
        }
        try await storage.close()
    }

    @Test("a long poll wakes for a push by another user into a zone shared with the caller, and for a grant to the caller — not for a zone of somebody else",
          arguments: backends)
    func longPollWakes(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, app in
            try await client.createZone("shared", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read"}}"#)
            try await client.createZone("later", as: Token.bob)
            try await client.createZone("other", as: Token.carol)
            let start = try await client.databaseChanges(as: Token.alice)

            // A push into carol's zone wakes the poll's wait, which finds nothing of alice's and waits on.
            let clock = ContinuousClock()
            let began = clock.now
            let poll = try await databasePoll(port: client.port, as: Token.alice, after: start.token, app: app)
            defer { poll.close() }
            #expect(try await client.push("other", [transaction(ReplicaID.random(), 1...1)], as: Token.carol).status == .ok)
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await client.push("shared", [transaction(ReplicaID.random(), 1...1)], as: Token.bob).status == .ok)
            let woken = try await databasePollAnswer(poll)
            #expect(woken.names == ["bob/shared"], "\(woken)")
            #expect(clock.now - began < .seconds(50), "the poll waited out its wait instead of waking")

            let grantPoll = try await databasePoll(port: client.port, as: Token.alice, after: woken.token, app: app)
            defer { grantPoll.close() }
            try await client.changeZone("later", as: Token.bob, #"{"access": "shared", "grants": {"alice": "readWrite"}}"#)
            let grant = try await databasePollAnswer(grantPoll)
            #expect(grant.names == ["bob/later"] && grant.zones.first?.role == .readWrite && grant.zones.first?.accepted == false, "\(grant)")
        }
        try await storage.close()
    }

    @Test("revocation and deletion appear as removals to those who had access and to nobody else: a stranger learns nothing, not even the zone's name",
          arguments: backends)
    func removalsDoNotLeak(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, _ in
            try await client.createZone("secret-board", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read", "dave": "readWrite"}}"#)
            try await client.createZone("mine", as: Token.carol)
            var tokens: [String: String] = [:]
            for user in [Token.alice, Token.bob, Token.carol, daveToken] { tokens[user] = try await client.databaseChanges(as: user).token }

            try await client.changeZone("secret-board", as: Token.bob, #"{"access": "shared", "grants": {"dave": "readWrite"}}"#)
            let alice = try await client.databaseChanges(as: Token.alice, after: tokens[Token.alice])
            #expect(alice.zones.isEmpty && alice.removedNames == ["bob/secret-board:revoked"], "\(alice)")
            let dave = try await client.databaseChanges(as: daveToken, after: tokens[daveToken])
            #expect(dave.names == ["bob/secret-board"] && dave.removed.isEmpty, "\(dave)")
            let strangerAnswer = try await client.databaseChangesResponse(as: Token.carol, after: tokens[Token.carol])
            #expect(!String(buffer: strangerAnswer.body).contains("secret-board"))
            let stranger = try JSONDecoder().decode(DatabaseChanges.self, from: strangerAnswer.body.data)
            #expect(stranger.isEmpty)
            tokens[Token.alice] = alice.token
            tokens[daveToken] = dave.token
            tokens[Token.carol] = stranger.token

            let deleted = try await client.execute(uri: "/v1/zones/secret-board", method: .delete, headers: auth(Token.bob))
            #expect(deleted.status == .noContent)
            #expect(try await client.databaseChanges(as: daveToken, after: tokens[daveToken]).removedNames == ["bob/secret-board:deleted"])
            #expect(try await client.databaseChanges(as: Token.bob, after: tokens[Token.bob]).removedNames == ["bob/secret-board:deleted"])
            let aliceAgain = try await client.databaseChangesResponse(as: Token.alice, after: tokens[Token.alice])
            #expect(!String(buffer: aliceAgain.body).contains("secret-board"), "alice, revoked before, heard of the deletion")
            let strangerAgain = try await client.databaseChangesResponse(as: Token.carol, after: tokens[Token.carol])
            #expect(!String(buffer: strangerAgain.body).contains("secret-board"), "a stranger heard of the deletion")

            // A zone revoked and shared again is listed, not removed.
            try await client.createZone("again", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read"}}"#)
            let before = try await client.databaseChanges(as: Token.alice, after: try await client.databaseChanges(as: Token.alice, after: tokens[Token.alice]).token)
            try await client.changeZone("again", as: Token.bob, #"{"access": "private"}"#)
            try await client.changeZone("again", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read"}}"#)
            let back = try await client.databaseChanges(as: Token.alice, after: before.token)
            #expect(back.names == ["bob/again"] && back.removed.isEmpty, "\(back)")
        }
        try await storage.close()
    }

    @Test("a token from before a restart of the embedded server gets a reset listing every zone, never an error or a partial answer")
    func restartResets() async throws {
        let site = try StorageSite(.embedded)
        let first = try await site.open()
        let token = try await withLiveServer(first) { client, _ in
            try await client.createZone("notes")
            try await client.createZone("list", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read"}}"#)
            return try await client.databaseChanges(as: Token.alice).token
        }
        try await first.close()
        let second = try await site.open()
        try await withLiveServer(second) { client, _ in
            let changes = try await client.databaseChanges(as: Token.alice, after: token)
            #expect(changes.reset && changes.names == ["alice/notes", "bob/list"])
            #expect(try await client.databaseChanges(as: Token.alice, after: changes.token).isEmpty)
        }
        try await second.close()
    }

    @Test("with two instances on one PostgreSQL, a push through instance A wakes a database long poll waiting on instance B, and a token of A is understood by B")
    func twoInstances() async throws {
        let site = try StorageSite(.postgres)
        let a = try await site.open()
        let b = try await site.openAnotherInstance()
        try await withLiveServer(a) { clientA, _ in
            try await withLiveServer(b) { clientB, appB in
                try await clientA.createZone("shared", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read"}}"#)
                let start = try await clientA.databaseChanges(as: Token.alice)
                #expect(try await clientB.databaseChanges(as: Token.alice, after: start.token).isEmpty)
                let clock = ContinuousClock()
                let began = clock.now
                let poll = try await databasePoll(port: clientB.port, as: Token.alice, after: start.token, app: appB)
                defer { poll.close() }
                #expect(try await clientA.push("shared", [transaction(ReplicaID.random(), 1...1)], as: Token.bob).status == .ok)
                let woken = try await databasePollAnswer(poll)
                #expect(woken.names == ["bob/shared"] && !woken.reset, "\(woken)")
                #expect(clock.now - began < .seconds(50), "instance B's poll waited out its wait")
                #expect(woken.zones.first?.token == (try await clientA.endToken("bob/shared", as: Token.bob)))
            }
        }
        try await b.close()
        try await a.close()
    }

    @Test("pages are bounded by limit with moreComing, a reset spans its pages, and the pages together name every zone once",
          arguments: backends)
    func paging(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        try await withLiveServer(storage) { client, _ in
            let names = (1...7).map { "zone\($0)" }
            for name in names { try await client.createZone(name) }
            var seen: [String] = []
            var token: String?
            var pages = 0
            repeat {
                let page = try await client.databaseChanges(as: Token.alice, after: token, limit: 3)
                #expect(page.reset && page.zones.count <= 3)
                seen += page.zones.map(\.name)
                token = page.token
                pages += 1
                if !page.moreComing { break }
            } while pages < 10
            #expect(pages == 3 && seen.sorted() == names.sorted())

            for name in names.prefix(5) { #expect(try await client.push(name, [transaction(ReplicaID.random(), 1...1)]).status == .ok) }
            var changed: [String] = []
            pages = 0
            repeat {
                let page = try await client.databaseChanges(as: Token.alice, after: token, limit: 2)
                #expect(!page.reset && page.zones.count <= 2)
                changed += page.zones.map(\.name)
                token = page.token
                pages += 1
                if !page.moreComing { break }
            } while pages < 10
            #expect(pages == 3 && changed == Array(names.prefix(5)), "\(changed)")
        }
        try await storage.close()
    }

    @Test("a garbage, tampered or foreign token, and a bad limit or wait, are answered 400 badRequest with a JSON error, never a crash; the server answers normally afterwards")
    func badTokens() async throws {
        let storage = try await StorageSite(.embedded).open()
        try await withLiveServer(storage) { client, _ in
            try await client.createZone("notes")
            let token = try await client.databaseChanges(as: Token.alice).token
            var tampered = Array(token)
            tampered[20] = tampered[20] == "0" ? "1" : "0"
            let zoneToken = try await client.endToken("notes")
            for bad in ["garbage", String(tampered), zoneToken, String(token.dropLast()), token + "0", "d1....", String(repeating: "f", count: 4000)] {
                let response = try await client.databaseChangesResponse(as: Token.alice, after: bad)
                #expect(response.status == .badRequest, "\(bad.prefix(40)): \(String(buffer: response.body))")
                #expect(try errorBody(response).code == "badRequest")
            }
            for (limit, wait) in [(0, nil), (-1, nil), (nil, -1.0)] as [(Int?, Double?)] {
                let response = try await client.databaseChangesResponse(as: Token.alice, limit: limit, wait: wait)
                #expect(response.status == .badRequest)
                #expect(try errorBody(response).code == "badRequest")
            }
            let unauthenticated = try await client.execute(uri: StrataEndpoint.databaseChanges, method: .get)
            #expect(unauthenticated.status == .unauthorized)
            #expect(try await client.databaseChanges(as: Token.alice, after: token).isEmpty)
        }
        try await storage.close()
    }

    @Test("a waiting long poll of a grantee whose grant is taken answers the removal at once; one of a user removed by a reload of the users is answered 401 unauthorized at once",
          arguments: backends)
    func revokedCallersWaitEnds(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let registry = UserRegistry(try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol]))
        try await withLiveServer(storage, users: registry) { client, app in
            try await client.createZone("board", #"{"access": "shared", "grants": {"bob": "read"}}"#)
            let start = try await client.databaseChanges(as: Token.bob)
            let clock = ContinuousClock()
            let began = clock.now
            let poll = try await databasePoll(port: client.port, as: Token.bob, after: start.token, app: app)
            defer { poll.close() }
            try await client.changeZone("board", as: Token.alice, #"{"grants": {}}"#)
            let revoked = try await databasePollAnswer(poll)
            #expect(revoked.zones.isEmpty && revoked.removedNames == ["alice/board:revoked"], "\(revoked)")

            let signedOut = try await databasePoll(port: client.port, as: Token.bob, after: revoked.token, app: app)
            defer { signedOut.close() }
            registry.replace(with: try UserDirectory(tokens: ["alice": Token.alice, "carol": Token.carol]))
            let answer = try #require(await signedOut.readAnswer())
            #expect(answer.status == 401, "\(String(decoding: answer.body, as: UTF8.self))")
            #expect(clock.now - began < .seconds(50), "a poll waited out its wait")
        }
        try await storage.close()
    }

    @Test("a token's stamp is sealed: it unseals to what was sealed under the same key, and consecutive stamps do not give tokens that tell how many changes lay between")
    func tokensAreSealed() throws {
        let seed = UInt64.random(in: 0 ... .max)
        var random = SeededGenerator(seed: seed)
        for _ in 0..<2000 {
            let key = random.next(), stamp = random.next() >> (random.next() % 64)
            let token = DatabaseToken(life: 7, stamp: stamp, resetting: false, key: key)
            let parsed = try #require(DatabaseToken(token.text), "seed \(seed)")
            #expect(parsed.stamp(key: key) == stamp, "seed \(seed)")
            let next = DatabaseToken(life: 7, stamp: stamp &+ 1, resetting: false, key: key)
            #expect(next.sealed &- token.sealed != 1 && token.sealed != stamp, "seed \(seed): the sealed stamp counts as the stamp does")
        }
    }

    @Test("a long poll of the database changes ends at once when the server shuts down, with the same token")
    func shutdownEndsLongPoll() async throws {
        let storage = try await StorageSite(.embedded).open()
        try await withLiveServer(storage) { client, app in
            try await client.createZone("notes")
            let token = try await client.databaseChanges(as: Token.alice).token
            let clock = ContinuousClock()
            let began = clock.now
            let poll = try await databasePoll(port: client.port, as: Token.alice, after: token, app: app)
            defer { poll.close() }
            app.beginShutdown()
            let answer = try await databasePollAnswer(poll)
            #expect(answer.isEmpty && answer.token == token && clock.now - began < .seconds(50))
        }
        try await storage.close()
    }
}
