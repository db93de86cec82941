import Foundation
import HTTPTypes
import Hummingbird
import StrataCore
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Testing

/// Reads Server-Sent Events off a raw connection: the bytes as they come (chunked framing and all:
/// events are found by their lines, which chunk sizes never look like).
final class EventStreamReader: @unchecked Sendable {
    let connection: RawConnection
    private(set) var text = ""
    private(set) var closed = false

    init(_ connection: RawConnection) { self.connection = connection }

    struct Event: Sendable {
        var name: String
        var id: String?
        var data: String
    }

    /// The events whole so far (each ends with an empty line), and the heartbeats counted.
    var events: [Event] {
        var found: [Event] = []
        for block in text.components(separatedBy: "\n\n") {
            var name: String?
            var id: String?
            var data: String?
            for line in block.split(separator: "\r\n").flatMap({ $0.split(separator: "\n") }) {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            if let name, let data { found.append(Event(name: name, id: id, data: data)) }
        }
        return found
    }

    var heartbeats: Int { text.components(separatedBy: ": heartbeat").count - 1 }
    var head: String { text.components(separatedBy: "\r\n\r\n").first ?? "" }

    /// Reads until `done` holds, the connection closes, or 30 s pass (a liveness bound).
    func read(until done: (EventStreamReader) -> Bool) async {
        let start = ContinuousClock.now
        while !done(self), !closed, ContinuousClock.now - start < .seconds(30) {
            switch await connection.read() {
            case .bytes(let bytes): text += String(decoding: bytes, as: UTF8.self)
            case .closed: closed = true
            // Nothing within the connection's read limit: a loaded machine (CI's first round)
            // can be that slow; read on until the liveness bound.
            case .nothing: continue
            }
        }
    }

    struct Missing: Error, CustomStringConvertible {
        var description: String
    }

    /// The `index`th changes event; an error (not a crash) when the stream has fewer.
    func changes(_ index: Int) throws -> DatabaseChanges {
        let changes = events.filter { $0.name == "changes" }
        guard changes.indices.contains(index) else {
            throw Missing(description: "the stream holds \(changes.count) changes event(s), not \(index + 1): \(text.suffix(500))")
        }
        return try JSONDecoder().decode(DatabaseChanges.self, from: Data(changes[index].data.utf8))
    }
}

@Suite("The database changes as Server-Sent Events")
struct DatabaseStreamTests {
    func open(_ port: Int, token: String = Token.alice, query: String = "", lastEventID: String? = nil) throws -> EventStreamReader {
        let connection = try RawConnection(port: port, readLimit: 10)
        var head = "GET /v1/database/stream\(query) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n"
        if let lastEventID { head += "Last-Event-ID: \(lastEventID)\r\n" }
        #expect(connection.send(head + "\r\n"))
        return EventStreamReader(connection)
    }

    @Test("a stream lists the caller's zones, then sends an event as each changes (a push, a share), heartbeats while nothing does, resumes from Last-Event-ID without a listing, and ends with an error event when the caller is signed out", arguments: [StorageBackend.embedded, .postgres])
    func streamFollowsChanges(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let registry = UserRegistry(try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob]))
            var configuration = ServerConfiguration(port: 0)
            configuration.limits.streamHeartbeat = .milliseconds(200)
            let app = StrataServerApp(storage: storage, users: registry, configuration: configuration)
            try await withLiveServer(app: app) { port in
                let connection = try RawConnection(port: port)
                #expect(await connection.exchange("PUT", "/v1/zones/notes", token: Token.alice)?.status == 201)

                let stream = try open(port)
                await stream.read { $0.events.count >= 1 }
                #expect(stream.head.hasPrefix("HTTP/1.1 200"), "\(stream.head)")
                #expect(stream.head.lowercased().contains("content-type: text/event-stream"))
                let listing = try stream.changes(0)
                #expect(listing.reset && listing.zones.map(\.name) == ["notes"] && listing.user == "alice")
                #expect(stream.events.first?.id == listing.token)

                // Nothing changes: heartbeats.
                await stream.read { $0.heartbeats >= 2 }
                #expect(stream.heartbeats >= 2)

                // Alice pushes; Bob shares a zone with her: an event each (or one naming both).
                let replica = ReplicaID.random()
                let push = try await RawConnection(port: port).exchange("POST", "/v1/zones/notes/push", token: Token.alice,
                                                                       body: TransactionFrames.encode([transaction(replica, 1...1).encoded()]))
                #expect(push?.status == 200)
                let share = Array(#"{"access": "shared", "grants": {"alice": "read"}}"#.utf8)
                #expect(try await RawConnection(port: port).exchange("PUT", "/v1/zones/groceries", token: Token.bob, body: share)?.status == 201)
                await stream.read { reader in
                    let named = (1..<reader.events.count).flatMap { (try? reader.changes($0).zones.map(\.name)) ?? [] }
                    return Set(named).isSuperset(of: ["notes", "groceries"])
                }
                let later = try (1..<stream.events.count).map { try stream.changes($0) }
                #expect(later.allSatisfy { !$0.reset })
                #expect(Set(later.flatMap { $0.zones.map(\.name) }) == ["notes", "groceries"])
                let lastID = try #require(stream.events.last?.id)

                // A second stream resuming from the last event's ID: no listing, and the next change.
                let resumed = try open(port, lastEventID: lastID)
                await resumed.read { $0.heartbeats >= 1 }
                #expect(resumed.events.isEmpty, "nothing changed since the ID: \(resumed.events.map(\.data))")
                let again = try await RawConnection(port: port).exchange("POST", "/v1/zones/notes/push", token: Token.alice,
                                                                        body: TransactionFrames.encode([transaction(replica, 2...2).encoded()]))
                #expect(again?.status == 200)
                await resumed.read { $0.events.count >= 1 }
                #expect(try resumed.changes(0).zones.map(\.name) == ["notes"])

                // Alice is removed from the users: both streams end with an unauthorized error event.
                registry.replace(with: try UserDirectory(tokens: ["bob": Token.bob]))
                for reader in [stream, resumed] {
                    await reader.read { $0.closed || $0.events.contains { $0.name == "error" } }
                    let error = try #require(reader.events.last { $0.name == "error" })
                    #expect(error.data.contains(#""code":"unauthorized""#), "\(error.data)")
                    await reader.read { $0.closed || $0.text.hasSuffix("0\r\n\r\n") }
                    #expect(reader.closed || reader.text.hasSuffix("0\r\n\r\n"), "the stream ended")
                }
                // A stream asked for with a token that is not one: 400, and no stream.
                let bad = try await RawConnection(port: port).exchange("GET", "/v1/database/stream", token: Token.bob, headers: ["Last-Event-ID": "not-a-token"])
                #expect(bad?.status == 400)
            }
        }
    }
}
