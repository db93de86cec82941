import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

private let shuttingDown = HTTPField.Name(StrataHeader.shuttingDown)!

/// `/health`, `/ready` and the start of a shutdown (``StrataServerApp/beginShutdown()``).
@Suite("Operations endpoints and shutdown")
struct OperationsTests {
    func status(_ response: TestResponse) throws -> String? {
        let object = try JSONSerialization.jsonObject(with: response.body.data) as? [String: Any]
        return object?["status"] as? String
    }

    @Test("/health and /ready answer 200 without a token, and with any token, outside the rate limit")
    func withoutToken() async throws {
        var limits = ServerConfiguration.Limits()
        limits.rateLimit = RateLimit(requestsPerSecond: 1, burst: 2)
        let clock = ManualTime()
        let server = try TestServer(limits: limits, clock: ServerClock(elapsed: { clock.now }))
        for setup in [TestingSetup.router, .live] {
            try await server.app.buildApplication().test(setup) { client in
                for headers: HTTPFields in [[:], auth("wrong"), auth(Token.alice)] {
                    for _ in 0..<5 {
                        let health = try await client.execute(uri: "/health", method: .get, headers: headers)
                        #expect(health.status == .ok)
                        #expect(health.headers[.contentType] == "application/json")
                        #expect(try status(health) == "ok")
                        let ready = try await client.execute(uri: "/ready", method: .get, headers: headers)
                        #expect(ready.status == .ok)
                        #expect(try status(ready) == "ready")
                    }
                }
                // Thirty probes with alice's token took nothing from her bucket (burst 2).
                #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .ok)
                #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .ok)
                #expect(try await client.execute(uri: "/v1/zones", method: .get, headers: auth(Token.alice)).status == .tooManyRequests)
                clock.advance(by: .seconds(10))
                // Every other endpoint still wants a token; other methods on the probes too.
                let zones = try await client.execute(uri: "/v1/zones", method: .get, headers: [:])
                #expect(zones.status == .unauthorized)
                #expect(try errorBody(zones).code == "unauthorized")
                #expect(try await client.execute(uri: "/health", method: .post, headers: [:]).status == .unauthorized)
                #expect(try await client.execute(uri: "/health/x", method: .get, headers: [:]).status == .unauthorized)
            }
        }
        try await server.storage.close()
    }

    @Test("once shutdown began: /ready answers 503 shuttingDown, /health still 200, long polls end at once with the same token")
    func shutdown() async throws {
        let server = try TestServer()
        let app = server.app
        let replica = ReplicaID.random()
        try await server.test { client in
            try await client.createZone("notes")
            #expect(try await client.push("notes", [transaction(replica, 1...1)]).status == .ok)
            let token = try await client.endToken("notes")
            async let polled = client.pull("notes", query: "after=\(token)&wait=60")
            try await waitForWaiter(app.notifier, zone: "alice/notes")
            #expect(!app.isShuttingDown)

            #expect(try await client.pull("notes", query: "after=\(token)").headers[shuttingDown] == nil)
            app.beginShutdown()
            #expect(app.isShuttingDown)
            // Answered because of the shutdown, not because the 60 s wait ended (no timing needed).
            let response = try await polled
            #expect(response.headers[shuttingDown] == "true")
            #expect(response.status == .ok)
            #expect(response.body.readableBytes == 0)
            #expect(response.nextToken == token)
            #expect(response.moreComing == "false")

            // A new long poll no longer waits; a pull with something to read still reads it.
            let late = try await client.pull("notes", query: "after=\(token)&wait=60")
            #expect(late.headers[shuttingDown] == "true")
            #expect(late.status == .ok && late.body.readableBytes == 0 && late.nextToken == token)
            let all = try await client.pull("notes", query: "wait=60")
            #expect(try pulledTransactions(all).count == 1)

            let ready = try await client.execute(uri: "/ready", method: .get, headers: [:])
            #expect(ready.status == .serviceUnavailable)
            #expect(try status(ready) == "shuttingDown")
            let health = try await client.execute(uri: "/health", method: .get, headers: [:])
            #expect(health.status == .ok)
            app.beginShutdown()  // idempotent
            #expect(app.notifier.waiterCount(zone: "alice/notes") == 0)
        }
    }

    @Test("/ready answers 503 once the storage is closed")
    func storageClosed() async throws {
        let server = try TestServer()
        try await server.test { client in
            #expect(try await client.execute(uri: "/ready", method: .get, headers: [:]).status == .ok)
            try await server.storage.close()
            let ready = try await client.execute(uri: "/ready", method: .get, headers: [:])
            #expect(ready.status == .serviceUnavailable)
            #expect(try status(ready) == "storageUnavailable")
            #expect(try await client.execute(uri: "/health", method: .get, headers: [:]).status == .ok)
        }
    }

    @Test("the notifier's shutdown wakes every waiter of every zone and later waits return at once")
    func notifierShutdown() async throws {
        let notifier = ChangeNotifier()
        let waiters = ["a", "b", "c"].map { notifier.register(zone: $0) }
        let wakes = try await withThrowingTaskGroup(of: ChangeNotifier.Wake.self) { group in
            for waiter in waiters {
                group.addTask { await notifier.wait(waiter, timeout: .seconds(3600)) }
            }
            for zone in ["a", "b", "c"] { try await waitForWaiter(notifier, zone: zone) }
            try await Task.sleep(for: .milliseconds(50))
            notifier.shutDown()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(wakes == [.shutDown, .shutDown, .shutDown])
        let late = notifier.register(zone: "a")
        #expect(await notifier.wait(late, timeout: .seconds(3600)) == .shutDown)
        notifier.notify(zone: "a")  // the first reason stands
        #expect(await notifier.wait(late, timeout: .seconds(3600)) == .shutDown)
        #expect(notifier.isShutDown)
        for waiter in waiters + [late] { notifier.remove(waiter) }
        #expect(notifier.waiterCount(zone: "a") == 0)
    }
}
