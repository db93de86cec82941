import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing
import StrataProtocol
import StrataCore

@Suite("Server over HTTP")
struct ServerHTTPTests {
    let replica = ReplicaID.random()

    @Test("every endpoint answers 401 without a valid bearer token", arguments: [
        (HTTPRequest.Method.get, "/v1/zones"), (.put, "/v1/zones/notes"), (.get, "/v1/zones/notes"), (.delete, "/v1/zones/notes"),
        (.post, "/v1/zones/notes/push"), (.get, "/v1/zones/notes/changes"), (.get, "/v1/nothing-here"),
    ])
    func unauthorized(method: HTTPRequest.Method, uri: String) async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            let before = try await client.endToken("notes")
            for headers: HTTPFields in [[:], auth("wrong"), [.authorization: "Basic YWxpY2U6eA=="], [.authorization: "Bearer "]] {
                let response = try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: "x"))
                #expect(response.status == .unauthorized)
                #expect(try errorBody(response).code == "unauthorized")
            }
            #expect(try await client.endToken("notes") == before)
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice)).status == .ok)
        }
    }

    @Test("zones are created, described, updated by their owner, listed and deleted")
    func zoneLifecycle() async throws {
        let server = try TestServer()
        try await server.test { client in
            let created = try await client.createZone("notes")
            #expect(created.name == "notes" && created.owner == "alice" && created.access == .private && created.grants.isEmpty)
            #expect(try ChangeToken(parsing: created.token) == ChangeToken(epoch: created.epoch, position: 0))

            let update = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice),
                                                  body: ByteBuffer(string: #"{"access": "shared", "grants": {"bob": "read"}}"#))
            #expect(update.status == .ok)
            let updated = try JSONDecoder().decode(ZoneDescription.self, from: update.body.data)
            #expect(updated.access == .shared && updated.grants == ["bob": .read] && updated.epoch == created.epoch)

            // Only the owner may change or delete it; nobody creates a zone in another's namespace.
            let takeover = try await client.execute(uri: "/v1/zones/notes?owner=alice", method: .put, headers: auth(Token.bob),
                                                    body: ByteBuffer(string: #"{"access": "public"}"#))
            #expect(takeover.status == .forbidden)
            #expect(try errorBody(takeover).code == "forbidden")
            let squat = try await client.execute(uri: "/v1/zones/elsewhere?owner=alice", method: .put, headers: auth(Token.bob))
            #expect(squat.status == .forbidden)
            #expect(try await client.execute(uri: "/v1/zones/elsewhere", method: .get, headers: auth(Token.alice)).status == .notFound)
            #expect(try await client.execute(uri: "/v1/zones/notes?owner=alice", method: .delete, headers: auth(Token.bob)).status == .forbidden)

            // Bob's own "notes" is another zone: creating it leaves alice's alone.
            let bobsNotes = try await client.createZone("notes", as: Token.bob)
            #expect(bobsNotes.owner == "bob" && bobsNotes.epoch != created.epoch)
            let alicesNotes = try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice))
            #expect(try JSONDecoder().decode(ZoneDescription.self, from: alicesNotes.body.data).access == .shared)

            try await client.createZone("bobs", as: Token.bob)
            try await client.createZone("public-zone", as: Token.carol, #"{"access": "public"}"#)
            func names(_ token: String) async throws -> [String] {
                let response = try await client.execute(uri: "/v1/zones", method: .get, headers: auth(token))
                #expect(response.status == .ok)
                return try JSONDecoder().decode(ZoneList.self, from: response.body.data).zones.map { "\($0.owner)/\($0.name)" }
            }
            #expect(try await names(Token.alice) == ["alice/notes", "carol/public-zone"])
            #expect(try await names(Token.bob) == ["alice/notes", "bob/bobs", "bob/notes", "carol/public-zone"])
            #expect(try await names(Token.carol) == ["carol/public-zone"])

            let deleted = try await client.execute(uri: "/v1/zones/notes", method: .delete, headers: auth(Token.alice))
            #expect(deleted.status == .noContent)
            let gone = try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice))
            #expect(gone.status == .notFound)
            #expect(try errorBody(gone).code == "zoneNotFound")
        }
    }

    @Test("another user's private zone answers exactly as a zone that does not exist: a stranger cannot tell which zone names a user has")
    func privateZone() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            func requests(_ zone: String) async throws -> [TestResponse] {
                [
                    try await client.execute(uri: "/v1/zones/\(zone)?owner=alice", method: .get, headers: auth(Token.bob)),
                    try await client.pull("alice/\(zone)", as: Token.bob),
                    try await client.push("alice/\(zone)", [transaction(ReplicaID.random(), 1...1)], as: Token.bob),
                    try await client.execute(uri: "/v1/zones/\(zone)/replicas?owner=alice", method: .get, headers: auth(Token.bob)),
                    try await client.execute(uri: "/v1/zones/\(zone)/snapshot?owner=alice", method: .get, headers: auth(Token.bob)),
                    try await client.execute(uri: "/v1/zones/\(zone)?owner=alice", method: .delete, headers: auth(Token.bob)),
                ]
            }
            for (existing, missing) in zip(try await requests("notes"), try await requests("nothing")) {
                #expect(existing.status == .notFound)
                #expect(try errorBody(existing).code == "zoneNotFound")
                #expect(existing.status == missing.status)
                #expect(String(buffer: existing.body).replacingOccurrences(of: "notes", with: "nothing") == String(buffer: missing.body),
                        "\(String(buffer: existing.body)) ≠ \(String(buffer: missing.body))")
            }
            let end = try ChangeToken(parsing: try await client.endToken("notes"))
            #expect(end.epoch == (try await epoch(client, "notes")) && end.position == 1)
            #expect(end.fingerprint != 0, "a token past a transaction carries the fingerprint of the history before it")
        }
    }

    @Test("a read share may pull but not push; a read-write share may push")
    func sharedZone() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes", #"{"access": "shared", "grants": {"bob": "read", "carol": "readWrite"}}"#)
            let record = transaction(replica, 1...1)
            #expect(try await client.push("notes", [record]).status == .ok)
            let before = try await client.endToken("notes")

            let pulled = try await client.pull("alice/notes", as: Token.bob)
            #expect(pulled.status == .ok)
            #expect(try pulledTransactions(pulled) == [record])
            let refused = try await client.push("alice/notes", [transaction(ReplicaID.random(), 1...1)], as: Token.bob)
            #expect(refused.status == .forbidden)
            #expect(try await client.endToken("notes") == before)

            let carols = ReplicaID.random()
            #expect(try await client.push("alice/notes", [transaction(carols, 1...1)], as: Token.carol).status == .ok)
            #expect(try await client.endToken("notes") != before)
        }
    }

    @Test("a public zone is readable by every user but writable only by its owner")
    func publicZone() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("news", #"{"access": "public"}"#)
            #expect(try await client.push("news", [transaction(replica, 1...2)]).status == .ok)
            for token in [Token.bob, Token.carol] {
                let described = try await client.execute(uri: "/v1/zones/news?owner=alice", method: .get, headers: auth(token))
                #expect(described.status == .ok)
                let pulled = try await client.pull("alice/news", as: token)
                #expect(pulled.status == .ok)
                #expect(try pulledTransactions(pulled).count == 1)
                #expect(try await client.push("alice/news", [transaction(ReplicaID.random(), 1...1)], as: token).status == .forbidden)
                // Without the owner, the name means the caller's own zone, which does not exist.
                #expect(try await client.pull("news", as: token).status == .notFound)
            }
        }
    }

    @Test("push then pull returns the transactions, a page at a time, with next tokens")
    func pushAndPull() async throws {
        let server = try TestServer()
        try await server.test { client in
            let zone = try await client.createZone("notes")
            let records = (1...5).map { transaction(replica, UInt64($0)...UInt64($0), title: "t\($0)") }
            let pushedResponse = try await client.push("notes", records)
            #expect(pushedResponse.status == .ok)
            let answer = try JSONDecoder().decode(PushAnswer.self, from: pushedResponse.body.data)
            #expect(answer.acknowledged == 5)
            let token = try ChangeToken(parsing: answer.token)
            #expect(token.epoch == zone.epoch && token.position == 5 && token.fingerprint != 0)
            #expect(try await client.endToken("notes") == answer.token)

            let first = try await client.pull("notes", query: "limit=2")
            #expect(first.status == .ok)
            #expect(first.headers[.contentType] == TransactionFrames.mediaType)
            #expect(try pulledTransactions(first) == Array(records[0..<2]))
            #expect(first.moreComing == "true")
            let next = try #require(first.nextToken)
            let second = try await client.pull("notes", query: "after=\(next)&limit=10")
            #expect(try pulledTransactions(second) == Array(records[2...]))
            #expect(second.moreComing == "false")
            #expect(second.nextToken == answer.token)
            let empty = try await client.pull("notes", query: "after=\(answer.token)")
            #expect(empty.status == .ok && empty.body.readableBytes == 0)
            #expect(empty.nextToken == answer.token && empty.moreComing == "false")
            // No `after` (or an empty one) starts from the beginning.
            #expect(try pulledTransactions(try await client.pull("notes", query: "after=")) == records)
        }
    }

    @Test("a retried push is acknowledged with the same token and appended once")
    func exactlyOnce() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            let batch = [transaction(replica, 1...2), transaction(replica, 3...3)]
            let first = try await client.push("notes", batch)
            let retry = try await client.push("notes", batch)
            #expect(first.status == .ok && retry.status == .ok)
            let a = try JSONDecoder().decode(PushAnswer.self, from: first.body.data)
            let b = try JSONDecoder().decode(PushAnswer.self, from: retry.body.data)
            #expect(a == b && a.acknowledged == 3)
            #expect(try pulledTransactions(try await client.pull("notes")).count == 2)
        }
    }

    @Test("a push that skips sequences is refused with 409 and the expected sequence")
    func sequenceGap() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...2)]).status == .ok)
            let before = try await client.endToken("notes")
            let gap = try await client.push("notes", [transaction(replica, 4...4)])
            #expect(gap.status == .conflict)
            let body = try errorBody(gap)
            #expect(body.code == "sequenceGap")
            #expect(body.json["expected"] as? Int == 3)
            #expect(body.message.contains("3"))
            #expect(try await client.endToken("notes") == before)
        }
    }

    @Test("bad requests are refused with their status and leave the zone unchanged", arguments: BadRequest.allCases)
    func badRequests(bad: BadRequest) async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxBodyBytes = 4096
        let server = try TestServer(limits: limits, label: "bad\(bad)")
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...2)]).status == .ok)
            let before = try await client.endToken("notes")
            let response = try await bad.send(client, replica: replica, token: before)
            #expect(response.status == bad.status, "\(String(buffer: response.body))")
            let body = try errorBody(response)
            #expect(body.code == bad.code)
            #expect(!body.message.isEmpty)
            if let fragment = bad.messageFragment { #expect(body.message.contains(fragment), "\(body.message)") }
            #expect(try await client.endToken("notes") == before)
            #expect(try pulledTransactions(try await client.pull("notes")).count == 1)
        }
    }

    @Test("a token without a fingerprint (an old version's, or one moved forward by hand) is not taken on trust where the zone has history to fingerprint: without a snapshot the pull answers from the zone's start, with one it is 410 tokenExpired; at position 0 it is taken", arguments: StorageBackend.allCases)
    func tokenWithoutFingerprint(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let app = StrataServerApp(storage: storage, users: try UserDirectory(tokens: ["alice": Token.alice]), configuration: ServerConfiguration(port: 0))
            try await app.buildApplication().test(.router) { client in
                try await client.createZone("notes")
                let empty = try ChangeToken(parsing: try await client.endToken("notes"))
                let fromZero = ChangeToken(epoch: empty.epoch, position: 0, fingerprintsHistory: false)
                #expect(try await client.pull("notes", query: "after=\(fromZero)").status == .ok)
                #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
                #expect(try await client.push("notes", [transaction(replica, 2...2)]).status == .ok)
                let end = try ChangeToken(parsing: try await client.endToken("notes"))
                #expect(end.fingerprint != 0 && end.position == 2)
                // No snapshot: the whole history again, and a token the server vouches for.
                for position in [1, 2] as [UInt64] {
                    for history in [true, false] {
                        let bare = ChangeToken(epoch: end.epoch, position: position, fingerprintsHistory: history)
                        let answer = try await client.pull("notes", query: "after=\(bare)")
                        #expect(answer.status == .ok, "position \(position): \(String(buffer: answer.body))")
                        #expect(try pulledTransactions(answer).count == 2, "position \(position): the pull skipped history on an unverified token")
                        #expect(answer.nextToken.flatMap { try? ChangeToken(parsing: $0) }?.fingerprint == end.fingerprint)
                    }
                }
                // With a snapshot: start again from it.
                _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
                let bare = ChangeToken(epoch: end.epoch, position: 2, fingerprintsHistory: true)
                let refused = try await client.pull("notes", query: "after=\(bare)")
                #expect(refused.status == .gone, "\(String(buffer: refused.body))")
                #expect(try errorBody(refused).code == "tokenExpired")
                // The token the server hands out is taken.
                let current = try await client.endToken("notes")
                #expect(try await client.pull("notes", query: "after=\(current)").status == .ok)
            }
        }
    }

    @Test("a token of a deleted and recreated zone is answered 410 zoneReset")
    func zoneReset() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            let oldToken = try await client.endToken("notes")
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .delete, headers: auth(Token.alice)).status == .noContent)
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            let before = try await client.endToken("notes")
            let response = try await client.pull("notes", query: "after=\(oldToken)")
            #expect(response.status == .gone)
            #expect(try errorBody(response).code == "zoneReset")
            #expect(try await client.endToken("notes") == before)
        }
    }

    @Test("requests over the rate are answered 429 with Retry-After")
    func rateLimit() async throws {
        var limits = ServerConfiguration.Limits()
        limits.rateLimit = RateLimit(requestsPerSecond: 1, burst: 2)
        let clock = ManualTime()
        let server = try TestServer(limits: limits, clock: ServerClock(elapsed: { clock.now }))
        try await server.test { client in
            #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .ok)
            #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .ok)
            let limited = try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "1")
            #expect(try errorBody(limited).code == "rateLimited")
            // Another user has a bucket of their own; time refills alice's.
            #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.bob)).status == .ok)
            clock.advance(by: .seconds(1))
            #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .ok)
        }
    }

    @Test("a long poll returns as soon as a push lands")
    func longPollWakes() async throws {
        let server = try TestServer()
        let notifier = server.app.notifier
        let replica = replica
        try await server.test { client in
            try await client.createZone("notes")
            let token = try await client.endToken("notes")
            async let polled = client.pull("notes", query: "after=\(token)&wait=30")
            // Push once the poll waits, so that the push is what wakes it.
            try await waitForWaiter(notifier, zone: "alice/notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            let response = try await polled
            #expect(response.status == .ok)
            #expect(try pulledTransactions(response).count == 1)
            #expect(response.nextToken == (try await client.endToken("notes")))
        }
    }

    @Test("a long poll with nothing new ends empty with the same token")
    func longPollTimesOut() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            let token = try await client.endToken("notes")
            let response = try await client.pull("notes", query: "after=\(token)&wait=0.2")
            #expect(response.status == .ok)
            #expect(response.body.readableBytes == 0)
            #expect(response.nextToken == token)
            #expect(response.moreComing == "false")
        }
    }

    @Test("deleting a zone ends its long polls with 404")
    func longPollDeleted() async throws {
        let server = try TestServer()
        let notifier = server.app.notifier
        try await server.test { client in
            try await client.createZone("notes")
            async let polled = client.pull("notes", query: "wait=30")
            try await waitForWaiter(notifier, zone: "alice/notes")
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .delete, headers: auth(Token.alice)).status == .noContent)
            let response = try await polled
            #expect(response.status == .notFound)
        }
    }

    @Test("a live server answers push and a long poll over a real connection")
    func live() async throws {
        let server = try TestServer()
        let replica = replica
        try await server.test(.live) { client in
            try await client.createZone("notes")
            let token = try await client.endToken("notes")
            let record = transaction(replica, 1...3)
            let pushedResponse = try await client.push("notes", [record])
            #expect(pushedResponse.status == .ok)
            let response = try await client.pull("notes", query: "after=\(token)&wait=5")
            #expect(response.status == .ok)
            #expect(try pulledTransactions(response) == [record])
            let missing = try await client.pull("nope")
            #expect(missing.status == .notFound)
            #expect(try errorBody(missing).code == "zoneNotFound")
        }
    }

    private func epoch(_ client: some TestClientProtocol, _ zone: String) async throws -> UInt64 {
        let response = try await client.execute(uri: "/v1/zones/\(zone)", method: .get, headers: auth(Token.alice))
        return try JSONDecoder().decode(ZoneDescription.self, from: response.body.data).epoch
    }
}

/// The bad requests that must be refused without touching the zone `notes` (which holds replica
/// sequences 1...2 as one transaction).
enum BadRequest: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case garbageBody, undecodableTransaction, emptyBody, emptyTransaction, mixedReplicas, tooLarge, tooLargeDeclared
    case unknownZone, badZoneName, malformedToken, tokenPastEnd, badLimit, badWait, badZoneSettings

    var testDescription: String { rawValue }

    var status: HTTPResponse.Status {
        switch self {
        case .tooLarge, .tooLargeDeclared: .contentTooLarge
        case .unknownZone: .notFound
        case .tokenPastEnd: .gone
        default: .badRequest
        }
    }

    var code: String {
        switch self {
        case .tooLarge, .tooLargeDeclared: "tooLarge"
        case .unknownZone: "zoneNotFound"
        case .tokenPastEnd: "zoneRewound"
        default: "badRequest"
        }
    }

    var messageFragment: String? {
        switch self {
        case .undecodableTransaction: "frame 1"
        case .mixedReplicas: "frame 1"
        case .garbageBody: "frame 0"
        default: nil
        }
    }

    func send(_ client: some TestClientProtocol, replica: ReplicaID, token: String) async throws -> TestResponse {
        let pushURI = "/v1/zones/notes/push"
        func post(_ bytes: [UInt8], uri: String = pushURI, headers: HTTPFields = auth(Token.alice)) async throws -> TestResponse {
            try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: bytes))
        }
        let next = transaction(replica, 3...3).encoded()
        switch self {
        case .garbageBody:
            return try await post([0xFF, 0xFF, 0xFF])
        case .undecodableTransaction:
            return try await post(TransactionFrames.encode([next, [1, 2, 3, 4, 5]]))
        case .emptyBody:
            return try await post([])
        case .emptyTransaction:
            return try await post(TransactionFrames.encode([TransactionRecord(replica: replica, events: []).encoded()]))
        case .mixedReplicas:
            let other = ReplicaID.random()
            return try await post(TransactionFrames.encode([next, transaction(other, 1...1).encoded()]))
        case .tooLarge:
            return try await post(TransactionFrames.encode([next, [UInt8](repeating: 0, count: 5000)]))
        case .tooLargeDeclared:
            var headers = auth(Token.alice)
            headers[.contentLength] = "100000000"
            return try await client.execute(uri: pushURI, method: .post, headers: headers, body: nil)
        case .unknownZone:
            return try await post(TransactionFrames.encode([next]), uri: "/v1/zones/nope/push")
        case .badZoneName:
            return try await post(TransactionFrames.encode([next]), uri: "/v1/zones/bad%20name!/push")
        case .malformedToken:
            return try await client.pull("notes", query: "after=not-a-token")
        case .tokenPastEnd:
            let parsed = try ChangeToken(parsing: token)
            return try await client.pull("notes", query: "after=\(ChangeToken(epoch: parsed.epoch, position: parsed.position + 1))")
        case .badLimit:
            return try await client.pull("notes", query: "limit=0")
        case .badWait:
            return try await client.pull("notes", query: "wait=soon")
        case .badZoneSettings:
            return try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice),
                                            body: ByteBuffer(string: #"{"access": "everyone"}"#))
        }
    }
}

/// A clock the test moves by hand.
final class ManualTime: Sendable {
    private let time = Mutex(Duration.zero)
    var now: Duration { time.withLock { $0 } }
    func advance(by duration: Duration) { time.withLock { $0 += duration } }
}

/// Waits until a long poll of `zone` is registered (at most ten seconds, then fails rather
/// than hanging the run).
func waitForWaiter(_ notifier: ChangeNotifier, zone: String) async throws {
    for _ in 0..<2000 {
        if notifier.waiterCount(zone: zone) > 0 { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("no long poll of \(zone) registered within ten seconds")
}
