import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import StrataCore
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing

/// A webhook receiver on a real port: it keeps every request it gets and answers as told.
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        var body: [UInt8]
        var signature: String?
        var id: String?
        var at: ContinuousClock.Instant
    }

    /// What the receiver answers to its n-th request (from 0): a status, after a delay.
    let answer: @Sendable (Int) -> (status: HTTPResponse.Status, delay: Duration)
    let received = Mutex<[Received]>([])

    init(answer: @escaping @Sendable (Int) -> (status: HTTPResponse.Status, delay: Duration) = { _ in (.noContent, .zero) }) {
        self.answer = answer
    }

    var requests: [Received] { received.withLock { $0 } }

    /// Serves while `body` runs, with the receiver's URL.
    func serve(_ body: @Sendable (URL) async throws -> Void) async throws {
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let entry = Received(body: Array(bytes.readableBytesView), signature: request.headers[HTTPField.Name("Strata-Signature")!],
                                 id: request.headers[HTTPField.Name("Strata-Webhook-Id")!], at: .now)
            let index = self.received.withLock { list -> Int in
                list.append(entry)
                return list.count - 1
            }
            let (status, delay) = self.answer(index)
            if delay > .zero { try await Task.sleep(for: delay) }
            return Response(status: status)
        }
        let app = Application(router: router, configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let port = try #require(client.port)
            try await body(try #require(URL(string: "http://127.0.0.1:\(port)/hook")))
        }
    }

    /// The notifications received, each once: a delivery attempt whose answer the server did not
    /// get in time (a loaded machine) is sent again under the same ID, as a receiver must expect.
    var notifications: [(notification: WebhookNotification, received: Received)] {
        var seen = Set<String>()
        var result: [(WebhookNotification, Received)] = []
        for request in requests {
            guard let notification = try? JSONDecoder().decode(WebhookNotification.self, from: Data(request.body)),
                  seen.insert(notification.id).inserted else { continue }
            result.append((notification, request))
        }
        return result
    }

    /// Waits until at least `count` distinct notifications came (at most 90 s, a liveness bound).
    func waitForNotifications(_ count: Int) async throws {
        for _ in 0..<9000 {
            if notifications.count >= count { return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until at least `count` requests came (at most 90 s, a liveness bound: the whole
    /// test suite runs at once beside it).
    func waitFor(_ count: Int) async throws {
        for _ in 0..<9000 {
            if requests.count >= count { return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

@Suite("Webhook wake-ups: coalesced, signed, retried, never in a push's way")
struct WebhookTests {
    static let secret = Array("a-test-secret-of-enough-bytes".utf8)

    static func configuration(_ url: URL, coalesce: Duration = .milliseconds(300)) throws -> WebhookConfiguration {
        var webhook = try WebhookConfiguration(url: url, secret: secret)
        webhook.coalesce = coalesce
        webhook.initialBackoff = .milliseconds(100)
        return webhook
    }

    @Test("a burst of pushes to two zones makes one signed notification naming each zone once with its readers; a later burst makes another; a tampered or stale one does not verify")
    func burstsCoalesce() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            // Gathered until the zones were quiet for 5 s: the pushes below go all at once, so
            // they land well within that even on a loaded machine.
            var webhook = try Self.configuration(url, coalesce: .seconds(5))
            webhook.maxDelay = .seconds(120)
            let server = try TestServer(webhook: webhook)
            try await server.test(.live) { client in
                try await client.createZone("shared", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read", "carol": "readWrite"}}"#)
                try await client.createZone("notes")
                // Zone creation is no change to wake anyone for; the grants' update would be.
                try await Task.sleep(for: .milliseconds(1500))
                let before = receiver.notifications.count
                let bobs = ReplicaID.random()
                let alices = ReplicaID.random()
                // Ten pushes to each zone, all at once (each zone's in sequence order: a push
                // waits for the one before it).
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for i in 1...10 {
                            let status = try await client.push("shared", [transaction(bobs, UInt64(i)...UInt64(i))], as: Token.bob).status
                            #expect(status == .ok)
                        }
                    }
                    group.addTask {
                        for i in 1...10 {
                            let status = try await client.push("notes", [transaction(alices, UInt64(i)...UInt64(i))]).status
                            #expect(status == .ok)
                        }
                    }
                    try await group.waitForAll()
                }
                try await receiver.waitForNotifications(before + 1)
                try await Task.sleep(for: .milliseconds(6000))
                let burst = Array(receiver.notifications.dropFirst(before))
                #expect(burst.count == 1, "one notification per burst, got \(burst.count)")
                let first = try #require(burst.first).received
                try WebhookSignature.verify(body: first.body, header: first.signature, secret: Self.secret)
                let notification = try JSONDecoder().decode(WebhookNotification.self, from: Data(first.body))
                #expect(first.id == notification.id)
                let byZone = Dictionary(uniqueKeysWithValues: notification.changes.map { ("\($0.owner)/\($0.zone)", $0.users) })
                #expect(byZone == ["bob/shared": ["alice", "bob", "carol"], "alice/notes": ["alice"]], "\(notification)")

                // Tampered, under another secret, or replayed an hour later: refused.
                var tampered = first.body
                tampered[tampered.count / 2] ^= 1
                #expect(throws: WebhookSignature.Refusal.mismatch) { try WebhookSignature.verify(body: tampered, header: first.signature, secret: Self.secret) }
                #expect(throws: WebhookSignature.Refusal.mismatch) {
                    try WebhookSignature.verify(body: first.body, header: first.signature, secret: Array("another-secret-of-enough-bytes".utf8))
                }
                #expect(throws: (any Error).self) {
                    try WebhookSignature.verify(body: first.body, header: first.signature, secret: Self.secret, now: Date().addingTimeInterval(3600))
                }
                #expect(throws: WebhookSignature.Refusal.malformed) { try WebhookSignature.verify(body: first.body, header: nil, secret: Self.secret) }
                // Headers built to trap the arithmetic or the parser are refused, never crash.
                let hex = String(repeating: "0", count: 64)
                for header in ["t=-9223372036854775808,v1=\(hex)", "t=9223372036854775807,v1=\(hex)", "t=1,v1=zz", "t=x,v1=\(hex)", "v1=\(hex)",
                               "t=\(Int(Date().timeIntervalSince1970))", "t=\(Int(Date().timeIntervalSince1970)),v1=\(hex)", String(repeating: "t=1,", count: 2000)] {
                    #expect(throws: WebhookSignature.Refusal.self) { try WebhookSignature.verify(body: first.body, header: header, secret: Self.secret) }
                }

                // A second burst, later: a second notification.
                #expect(try await client.push("notes", [transaction(alices, 11...11)]).status == .ok)
                try await receiver.waitForNotifications(before + 2)
                #expect(receiver.notifications.count == before + 2)
                let second = try #require(receiver.notifications.dropFirst(before + 1).first).notification
                #expect(second.changes.map(\.zone) == ["notes"] && second.id != notification.id)
            }
        }
    }

    @Test("a failing receiver gets the same notification again with a growing backoff until it takes it; one that never does has it dropped and counted")
    func retriesWithBackoff() async throws {
        let receiver = WebhookReceiver { index in (index < 2 ? .serviceUnavailable : .ok, .zero) }
        try await receiver.serve { url in
            var webhook = try Self.configuration(url, coalesce: .milliseconds(100))
            webhook.maxAttempts = 3
            let server = try TestServer(webhook: webhook)
            try await server.test(.live) { client in
                try await client.createZone("notes")
                #expect(try await client.push("notes", [transaction(ReplicaID.random(), 1...1)]).status == .ok)
                try await receiver.waitFor(3)
                let attempts = receiver.requests
                #expect(attempts.count == 3)
                #expect(Set(attempts.map(\.id)).count == 1, "every attempt names the same notification")
                for attempt in attempts { try WebhookSignature.verify(body: attempt.body, header: attempt.signature, secret: Self.secret) }
                // The waits grow: ≥ 50 ms (100 ms, jittered down to half), then ≥ 100 ms.
                if attempts.count == 3 {
                    #expect(attempts[1].at - attempts[0].at >= .milliseconds(50))
                    #expect(attempts[2].at - attempts[1].at >= .milliseconds(100))
                }
                try await Task.sleep(for: .milliseconds(300))
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metrics.contains(#"strata_webhook_deliveries_total{outcome="delivered"} 1"#), "\(metrics)")
                #expect(metrics.contains(#"strata_webhook_deliveries_total{outcome="retried"} 2"#))
            }
        }
        // A receiver that always fails: three attempts, then dropped.
        let dead = WebhookReceiver { _ in (.internalServerError, .zero) }
        try await dead.serve { url in
            var webhook = try Self.configuration(url, coalesce: .milliseconds(100))
            webhook.maxAttempts = 3
            let server = try TestServer(webhook: webhook)
            try await server.test(.live) { client in
                try await client.createZone("notes")
                #expect(try await client.push("notes", [transaction(ReplicaID.random(), 1...1)]).status == .ok)
                try await dead.waitFor(3)
                try await Task.sleep(for: .milliseconds(500))
                #expect(dead.requests.count == 3)
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metrics.contains(#"strata_webhook_deliveries_total{outcome="dropped"} 1"#), "\(metrics)")
            }
        }
    }

    @Test("revoking a grant, leaving a share and deleting a zone wake the users who lost it; a receiver's 4xx refusal is not sent again")
    func lossesWakeTheLosers() async throws {
        let receiver = WebhookReceiver { index in (index == 0 ? .badRequest : .noContent, .zero) }
        try await receiver.serve { url in
            let server = try TestServer(webhook: try Self.configuration(url, coalesce: .milliseconds(200)))
            try await server.test(.live) { client in
                // Made shared with alice and carol: they are woken (the first answer, 400, is not retried).
                try await client.createZone("list", as: Token.bob, #"{"access": "shared", "grants": {"alice": "read", "carol": "read"}}"#)
                try await receiver.waitFor(1)
                try await Task.sleep(for: .milliseconds(600))
                #expect(receiver.requests.count == 1, "a 400 is not sent again")
                let shared = try JSONDecoder().decode(WebhookNotification.self, from: Data(receiver.requests[0].body))
                #expect(shared.changes.first?.users == ["alice", "bob", "carol"])

                // Carol's grant revoked: carol is woken with the others.
                let revoke = try await client.execute(uri: "/v1/zones/list", method: .put, headers: auth(Token.bob),
                                                      body: ByteBuffer(string: #"{"grants": {"alice": "read"}}"#))
                #expect(revoke.status == .ok)
                try await receiver.waitForNotifications(2)
                let revoked = try #require(receiver.notifications.dropFirst().first).notification
                #expect(revoked.changes.first?.users == ["alice", "bob", "carol"], "\(revoked)")

                // Deleted: everyone who could read it, marked deleted.
                #expect(try await client.execute(uri: "/v1/zones/list", method: .delete, headers: auth(Token.bob)).status == .noContent)
                try await receiver.waitForNotifications(3)
                let deleted = try #require(receiver.notifications.dropFirst(2).first).notification
                #expect(deleted.changes.first?.users == ["alice", "bob"] && deleted.changes.first?.deleted == true, "\(deleted)")
            }
        }
    }

    @Test("the webhook's deliveries run beside the server over HTTPS too, and a server run again after a stop delivers again")
    func overTLSAndRunAgain() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            let server = try TestServer(webhook: try Self.configuration(url, coalesce: .milliseconds(100)))
            let tls = try ResourceBoundsTests().selfSignedCertificate(in: server.directory).serverConfiguration()
            #expect(try server.app.buildApplication(tls: tls).services.count == 1, "the HTTPS application runs the webhook's deliveries")
            // The same server app run twice (stopped, then run again): each run delivers.
            for round in 1...2 {
                try await server.app.buildApplication().test(.live) { client in
                    if round == 1 { _ = try await client.createZone("notes") }
                    let replica = ReplicaID.random()
                    #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
                    try await receiver.waitFor(round)
                    #expect(receiver.requests.count == round, "round \(round)")
                }
            }
            try await server.storage.close()
        }
    }

    @Test("a receiver that holds every request never slows a push: pushes go on while its first notification waits, and the changes meanwhile gather into the next one")
    func deadReceiverNeverSlowsPushes() async throws {
        let hold = Duration.seconds(30)
        let receiver = WebhookReceiver { index in (.ok, index == 0 ? hold : .zero) }
        try await receiver.serve { url in
            var webhook = try Self.configuration(url, coalesce: .milliseconds(50))
            webhook.timeout = .seconds(60)
            let server = try TestServer(webhook: webhook)
            try await server.test(.live) { client in
                try await client.createZone("notes")
                try await client.createZone("other")
                let replica = ReplicaID.random()
                #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
                try await receiver.waitFor(1)
                let held = try #require(receiver.requests.first).at
                // The receiver holds the first notification for 30 s. Pushes go on meanwhile, for
                // 8 s: were they waiting for the receiver, not one would be answered in that time.
                let other = ReplicaID.random()
                var pushes = 0
                var sequence: UInt64 = 1
                while ContinuousClock.now - held < .seconds(8) {
                    sequence += 1
                    #expect(try await client.push("other", [transaction(other, (sequence - 1)...(sequence - 1))]).status == .ok)
                    #expect(try await client.push("notes", [transaction(replica, sequence...sequence)]).status == .ok)
                    pushes += 2
                }
                let stillHeld = ContinuousClock.now - held < hold
                #expect(pushes >= 2, "no push was answered while the receiver held its notification")
                if stillHeld { #expect(receiver.requests.count == 1, "one notification at a time: the first is still held") }
                // Once the receiver answers, the changes made meanwhile are sent (gathered: fewer
                // notifications than pushes).
                try await receiver.waitFor(2)
                try await Task.sleep(for: .milliseconds(500))
                let later = try receiver.requests.dropFirst().map { try JSONDecoder().decode(WebhookNotification.self, from: Data($0.body)) }
                #expect(Set(later.flatMap { $0.changes.map(\.zone) }) == ["notes", "other"])
                #expect(later.count < pushes, "\(later.count) notifications for \(pushes) pushes")
            }
        }
    }

}
