import Foundation
import Hummingbird
import Logging
import NIOEmbedded
import Synchronization
import StrataCore
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Testing

/// A client that stops waiting closes its connection — Strata's sync engines cut their long poll
/// short for every local commit. The server must let go of that poll at once: held to the end of
/// its wait, each would keep a connection, a descriptor and a task for a minute, and a fleet
/// committing a thousand times a second would pile up tens of thousands of them.
@Suite("Abandoned long polls end when their client goes away")
struct AbandonedLongPollTests {
    /// Polls `condition` every 10 ms for up to ten seconds (against a one-minute wait).
    func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<1_000 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test("a zone long poll and a database long poll whose connections close are let go long before their one-minute wait; a poll on a connection still open keeps waiting and is answered by a push",
          arguments: StorageBackend.allCases)
    func closedConnectionsEndTheirPolls(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let app = StrataServerApp(storage: storage, users: try UserDirectory(tokens: ["alice": Token.alice]),
                                      configuration: ServerConfiguration(port: 0))
            try await withLiveServer(app: app) { port in
                let setup = try RawConnection(port: port)
                defer { setup.close() }
                #expect(await setup.exchange("PUT", "/v1/zones/notes", token: Token.alice)?.status == 201)
                let described = try #require(await setup.exchange("GET", "/v1/zones/notes", token: Token.alice))
                let token = try JSONDecoder().decode(ZoneDescription.self, from: Data(described.body)).token
                let database = try #require(await setup.exchange("GET", StrataEndpoint.databaseChanges, token: Token.alice))
                let databaseToken = try #require((try JSONSerialization.jsonObject(with: Data(database.body)) as? [String: Any])?["token"] as? String)

                // One poll that stays, two that are abandoned.
                let staying = try RawConnection(port: port, readLimit: 90)
                #expect(staying.send("GET /v1/zones/notes/changes?after=\(token)&wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\n\r\n"))
                try await waitForWaiter(app.notifier, zone: "alice/notes")
                let leaving = try RawConnection(port: port)
                #expect(leaving.send("GET /v1/zones/notes/changes?after=\(token)&wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\n\r\n"))
                #expect(try await eventually { app.notifier.waiterCount(zone: "alice/notes") == 2 }, "the second long poll never waited")
                let leavingDatabase = try RawConnection(port: port)
                #expect(leavingDatabase.send("GET \(StrataEndpoint.databaseChanges)?after=\(databaseToken)&wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\n\r\n"))
                #expect(try await eventually { app.notifier.databaseWaiterCount == 1 }, "the database long poll never waited")

                leaving.close()
                leavingDatabase.close()
                #expect(try await eventually { app.notifier.waiterCount(zone: "alice/notes") == 1 },
                        "the long poll of a closed connection still waits (\(app.notifier.waiterCount(zone: "alice/notes")) waiting)")
                #expect(try await eventually { app.notifier.databaseWaiterCount == 0 }, "the database long poll of a closed connection still waits")

                // The poll whose client stayed still waits, and a push answers it.
                let push = TransactionFrames.encode([transaction(.random(), 1...1, title: "x").encoded()])
                #expect(await setup.exchange("POST", "/v1/zones/notes/push", token: Token.alice, body: push)?.status == 200)
                let answer = try #require(await staying.readAnswer(), "the long poll still connected was not answered")
                #expect(answer.status == 200)
                #expect(answer.headers["strata-next-token"] != token)
                staying.close()
            }
        }
    }

    @Test("a request's context holds its channel, so that the identity its long poll watches is not reused by another connection (whose client closing would cut the poll short) while the request lives")
    func contextHoldsItsChannel() throws {
        weak var released: EmbeddedChannel?
        let context: StrataRequestContext = {
            let channel = EmbeddedChannel()
            released = channel
            let context = StrataRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: Logger(label: "test")))
            // Closed, its pipeline lets go of it: only the context can keep it alive now.
            _ = try? channel.finish()
            return context
        }()
        #expect(released != nil, "the channel was freed while its request's context lives: its identity could be another connection's")
        if let channel = released { #expect(context.connection == ObjectIdentifier(channel)) }
        // And a closed mark on some other channel does not end this request's watch.
        let other = EmbeddedChannel()
        ConnectionWatch.shared.clientClosed(ObjectIdentifier(other))
        let fired = Mutex(false)
        let watching = ConnectionWatch.shared.onClose(context.connection) { fired.withLock { $0 = true } }
        #expect(!fired.withLock { $0 })
        ConnectionWatch.shared.forget(context.connection, watching)
        ConnectionWatch.shared.ended(ObjectIdentifier(other))
        _ = try? other.finish()
    }
}
