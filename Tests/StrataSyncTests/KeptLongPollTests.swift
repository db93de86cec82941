import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// An exchange that sends through URLSession and records which long polls (pulls and database
/// polls with a `wait`) ended by being cancelled — which closes their connection.
final class PollRecordingExchange: HTTPExchange {
    // The process's shared session, as the engines use by default.
    private let inner = URLSessionExchange.shared
    private let counts = Mutex<(polls: Int, cancelledPolls: Int, requests: Int)>((0, 0, 0))

    var polls: Int { counts.withLock { $0.polls } }
    var cancelledPolls: Int { counts.withLock { $0.cancelledPolls } }
    var requests: Int { counts.withLock { $0.requests } }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        let waits = request.url.contains("\(StrataQuery.wait)=")
        counts.withLock {
            $0.requests += 1
            if waits { $0.polls += 1 }
        }
        do {
            return try await inner.send(request)
        } catch {
            if waits, Task.isCancelled { counts.withLock { $0.cancelledPolls += 1 } }
            throw error
        }
    }
}

/// What is tested is the client's use of its connections, the same whatever the server stores in;
/// the server's side of long polls on PostgreSQL is `AbandonedLongPollTests` and the end-to-end
/// suites'. (On PostgreSQL these cases also ran, and passed alone, but under the whole suite's
/// load the shared cluster answered a first request of theirs only after the client's 30 s
/// timeout.)
@Suite("Continuous mode keeps its long poll: local commits are pushed while it waits", .timeLimit(.minutes(2)))
struct KeptLongPollTests {
    @Test("two devices in continuous mode, each committing in turn: every commit reaches the other, and no long poll is cut short by a commit (its connection stays open)",
          arguments: [ServerBackend.embedded])
    func commitsDoNotCancelThePoll(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            let first = try await Store.open(at: dir.sub("first"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let second = try await Store.open(at: dir.sub("second"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let exchanges = [PollRecordingExchange(), PollRecordingExchange()]
            let engines = try [first, second].enumerated().map { index, store in
                try SyncEngine(store: store, transport: HTTPSyncTransport(server: url, tokens: .fixed("alice-secret"), exchange: exchanges[index]),
                               zone: "kept")
            }
            for engine in engines { try await engine.sync() }
            for engine in engines { await engine.start() }
            // Each commit is made while both engines' polls wait (the other's last commit has
            // arrived, and the committer's own poll has come back with it and waits again).
            var made: [(store: Store, id: ObjectID)] = []
            for round in 0..<6 {
                let (writer, reader) = round % 2 == 0 ? (first, second) : (second, first)
                try await waitForPolls(exchanges, atLeast: made.count * 2 + 2)
                let id = try await writer.transaction { tx in try tx.insert("Note", ["title": .string("note \(round)"), "rank": .integer(Int64(round))]) }
                made.append((writer, id))
                let committed = ContinuousClock.now
                try await eventually("note \(round) to reach the other device") { reader.object(id) != nil }
                print("kept poll: note \(round) arrived after \(ContinuousClock.now - committed)")
            }
            let cancelled = exchanges.map(\.cancelledPolls)
            // Idle, each settles in its poll: a second goes by without a request (nothing spins).
            try await expectSettles(exchanges)
            let stopping = ContinuousClock.now
            for engine in engines { await engine.stop() }
            print("kept poll: stopped after \(ContinuousClock.now - stopping)")
            #expect(cancelled == [0, 0], "long polls cancelled by commits: \(cancelled)")
            #expect(first.digest() == second.digest())
            try await first.close()
            try await second.close()
        }
    }

    @Test("two databases in continuous mode, each committing in turn: every commit reaches the other, and no database long poll is cut short by a commit",
          arguments: [ServerBackend.embedded])
    func databaseCommitsDoNotCancelThePoll(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            let first = try await Database.open(at: dir.sub("first"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let second = try await Database.open(at: dir.sub("second"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let exchanges = [PollRecordingExchange(), PollRecordingExchange()]
            let engines = [first, second].enumerated().map { index, database in
                DatabaseSyncEngine(database: database, transport: HTTPSyncTransport(server: url, tokens: .fixed("alice-secret"), exchange: exchanges[index]),
                                   server: url.absoluteString)
            }
            for engine in engines { try await engine.sync() }
            for engine in engines { try await engine.sync() }
            for engine in engines { await engine.start() }
            for round in 0..<6 {
                let (writer, reader) = round % 2 == 0 ? (first, second) : (second, first)
                try await waitForPolls(exchanges, atLeast: round * 2 + 2)
                let title = "note \(round)"
                let committed = ContinuousClock.now
                try await writer.transaction { tx in _ = try tx.insert("Note", ["title": .string(title)]) }
                try await eventually("\(title) to reach the other database") {
                    ((try? reader.fetch("Note")) ?? []).contains { $0["title"] == .string(title) }
                }
                print("kept database poll (\(backend)): \(title) arrived after \(ContinuousClock.now - committed)")
            }
            let cancelled = exchanges.map(\.cancelledPolls)
            // Idle, each settles in its poll: a second goes by without a request (nothing spins).
            try await expectSettles(exchanges)
            for engine in engines { await engine.stop() }
            #expect(cancelled == [0, 0], "database long polls cancelled by commits: \(cancelled)")
            #expect(try first.fetch("Note").count == 6)
            #expect(try second.fetch("Note").count == 6)
            try await first.close()
            try await second.close()
        }
    }

    /// Expects a whole second without a request from either exchange within 20 s (the polls
    /// answered last are sent again first, late under load): an engine that spins never settles.
    private func expectSettles(_ exchanges: [PollRecordingExchange]) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        var before = exchanges.map(\.requests)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .seconds(1))
            let now = exchanges.map(\.requests)
            if now == before { return }
            before = now
        }
        Issue.record("requests kept going out while idle: \(before)")
    }

    /// Waits until the two exchanges together have sent at least `count` long polls, and a moment
    /// more for the last to reach the server.
    private func waitForPolls(_ exchanges: [PollRecordingExchange], atLeast count: Int) async throws {
        try await eventually("\(count) long polls") { exchanges.map(\.polls).reduce(0, +) >= count }
        try await Task.sleep(for: .milliseconds(100))
    }

    private func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
