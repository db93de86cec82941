import Foundation
import HTTPTypes
import Hummingbird
import StrataCore
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Testing

/// Access revoked while a request is in flight — a long poll waiting, a push or a state upload
/// whose body is still arriving — takes effect on that request, not only on the next one: the
/// owner revoking a grant, making the zone private or deleting it, and the operator removing the
/// user from the users file (a SIGHUP reload). Through a live server, on every backend.
@Suite("Revocation takes effect on requests in flight")
struct InFlightRevocationTests {
    /// A live server on `backend` with alice, bob and carol, whose users can be replaced while it
    /// serves (as `strata serve` reloads its users file); `body` gets the port, the registry and
    /// the server. Every request is its own connection, so that a long poll waits beside the
    /// owner's requests.
    func withServer(_ backend: StorageBackend,
                    _ body: @Sendable (Int, UserRegistry, StrataServerApp) async throws -> Void) async throws {
        try await withStorage(backend) { storage in
            let registry = UserRegistry(try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol]))
            let app = StrataServerApp(storage: storage, users: registry, configuration: ServerConfiguration(port: 0))
            try await withLiveServer(app: app) { port in try await body(port, registry, app) }
        }
    }

    /// The users without bob.
    static func withoutBob() throws -> UserDirectory {
        try UserDirectory(tokens: ["alice": Token.alice, "carol": Token.carol])
    }

    /// One request on a connection of its own.
    func call(_ port: Int, _ method: String, _ path: String, token: String = Token.alice, body: [UInt8] = []) async throws -> RawConnection.Answer {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        return try #require(await connection.exchange(method, path, token: token, body: body), "no answer to \(method) \(path)")
    }

    func settings(_ port: Int, _ json: String) async throws {
        let answer = try await call(port, "PUT", "/v1/zones/board", body: Array(json.utf8))
        #expect([200, 201].contains(answer.status), "PUT \(json): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
    }

    func push(_ port: Int, _ record: TransactionRecord) async throws {
        let answer = try await call(port, "POST", "/v1/zones/board/push", body: TransactionFrames.encode([record.encoded()]))
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
    }

    /// Bob's long poll of alice's board from its end, sent and waiting on the server.
    func bobsPoll(_ port: Int, _ app: StrataServerApp) async throws -> RawConnection {
        let zone = try await call(port, "GET", "/v1/zones/board")
        let token = try JSONDecoder().decode(ZoneDescription.self, from: Data(zone.body)).token
        let poll = try RawConnection(port: port, readLimit: 90)
        #expect(poll.send("GET /v1/zones/board/changes?owner=alice&after=\(token)&wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.bob)\r\n\r\n"))
        try await waitForWaiter(app.notifier, zone: "alice/board")
        return poll
    }

    func errorCode(_ answer: RawConnection.Answer) -> String? {
        let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }

    @Test("a reader's long poll gets what alice pushes while the grant stands; once she revokes it (or makes the zone private, or deletes it), the waiting poll is refused and reveals nothing pushed after",
          arguments: StorageBackend.allCases)
    func longPollAfterRevocation(_ backend: StorageBackend) async throws {
        try await withServer(backend) { port, _, app in
            let shared = #"{"access": "shared", "grants": {"bob": "read"}}"#
            try await settings(port, shared)
            let alices = ReplicaID.random()
            try await push(port, transaction(alices, 1...1))

            // While the grant stands, a push wakes bob's poll with it.
            let delivered = try await bobsPoll(port, app)
            defer { delivered.close() }
            try await push(port, transaction(alices, 2...2, title: "shared"))
            let answer = try #require(await delivered.readAnswer())
            #expect(answer.status == 200)
            #expect(try TransactionFrames.decode(answer.body).count == 1)

            // Each way of taking bob's access away while his poll waits: the change wakes the poll,
            // which is refused at once (no push needed to end it).
            for (what, revoke) in [("grant revoked", #"{"access": "shared", "grants": {}}"#), ("zone made private", #"{"access": "private"}"#)] {
                try await settings(port, shared)
                let poll = try await bobsPoll(port, app)
                defer { poll.close() }
                try await settings(port, revoke)
                let refused = try #require(await poll.readAnswer(), "\(what): no answer to the poll")
                #expect(refused.status == 403, "\(what): \(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
                #expect(errorCode(refused) == "forbidden", "\(what)")
            }

            // Revoked in the storage without waking anyone (as another instance's change might
            // arrive late): the push that wakes the poll is not revealed to bob.
            try await settings(port, shared)
            let unwoken = try await bobsPoll(port, app)
            defer { unwoken.close() }
            _ = try await app.storage.updateZone("board", access: .shared, grants: [:])
            try await push(port, transaction(alices, 3...3, title: "secret after the revocation"))
            let refused = try #require(await unwoken.readAnswer(), "no answer to the poll")
            #expect(refused.status == 403, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
            #expect(!String(decoding: refused.body, as: UTF8.self).contains("secret"), "the refusal revealed what was pushed")

            // The zone deleted while bob waits: as for a zone that does not exist.
            try await settings(port, shared)
            let orphaned = try await bobsPoll(port, app)
            defer { orphaned.close() }
            #expect(try await call(port, "DELETE", "/v1/zones/board").status == 204)
            let gone = try #require(await orphaned.readAnswer(), "no answer to the poll of a deleted zone")
            #expect(gone.status == 404, "\(gone.status) \(String(decoding: gone.body, as: UTF8.self))")
            #expect(errorCode(gone) == "zoneNotFound")
        }
    }

    @Test("bob removed from the users file (a reload) while his long poll waits: the reload ends it with 401 unauthorized",
          arguments: StorageBackend.allCases)
    func longPollAfterUserRemoval(_ backend: StorageBackend) async throws {
        try await withServer(backend) { port, registry, app in
            try await settings(port, #"{"access": "shared", "grants": {"bob": "read"}}"#)
            let poll = try await bobsPoll(port, app)
            defer { poll.close() }
            registry.replace(with: try Self.withoutBob())
            let refused = try #require(await poll.readAnswer(), "no answer to the poll")
            #expect(refused.status == 401, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
            #expect(errorCode(refused) == "unauthorized")
        }
    }

    @Test("bob removed from the users file while his push's body arrives: the push is refused with 401 and appends nothing; the same for a state upload",
          arguments: StorageBackend.allCases)
    func pushAfterUserRemoval(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let registry = UserRegistry(try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol]))
            let app = StrataServerApp(storage: storage, users: registry, configuration: ServerConfiguration(port: 0))
            try await withLiveServer(app: app) { port in
                #expect(try await RawConnection(port: port).exchange("PUT", "/v1/zones/board", token: Token.alice,
                                                                       body: Array(#"{"access": "shared", "grants": {"bob": "readWrite"}}"#.utf8))?.status == 201)
                let bobs = ReplicaID.random()
                for (path, body) in [("/v1/zones/board/push?owner=alice", TransactionFrames.encode([transaction(bobs, 1...1).encoded()])),
                                     ("/v1/zones/board/state?owner=alice", try stateUpload(replica: bobs))] {
                    registry.replace(with: try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol]))
                    let slow = try RawConnection(port: port)
                    defer { slow.close() }
                    #expect(slow.send("POST \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.bob)\r\nContent-Length: \(body.count)\r\n\r\n"))
                    let budget = app.bounds.uploadBudget
                    let full = budget.available
                    #expect(slow.send(Array(body.prefix(body.count / 2))))
                    // Once the handler reserves the body's bytes, bob's request has passed
                    // authentication and the route's check; now he is removed.
                    var reading = false
                    for _ in 0..<3000 where !reading {
                        reading = budget.available < full
                        if !reading { try await Task.sleep(for: .milliseconds(10)) }
                    }
                    #expect(reading, "\(path): the server never began reading bob's body")
                    registry.replace(with: try Self.withoutBob())
                    #expect(slow.send(Array(body.dropFirst(body.count / 2))))
                    let answer = try #require(await slow.readAnswer(), "no answer to bob's \(path)")
                    #expect(answer.status == 401, "\(path): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
                }
            }
            #expect(try await storage.endPosition(zone: "board") == 0, "something bob sent after his removal was stored")
            #expect(try await storage.snapshotPosition(zone: "board") == nil, "bob's state was merged after his removal")
        }
    }

    /// A state upload's body: a projection snapshot holding one note, with events of `replica`.
    func stateUpload(replica: ReplicaID) throws -> [UInt8] {
        let builder = ProjectionBuilder()
        try builder.apply(encoded: transaction(replica, 1...1, title: "state").encoded())
        return builder.snapshotPayload()
    }
}
