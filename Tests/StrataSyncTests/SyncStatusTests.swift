import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Strata
import StrataLog
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A server that can be stopped and started again on the same port, so that an engine pointed at
/// it sees it down, then back.
struct RestartableServer: Sendable {
    let directory: String
    let port: Int
    let users: [String: String]
    var url: URL { URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/") }

    /// A port that was free a moment ago (a server bound it to port 0, then stopped).
    init(directory: String, users: [String: String] = ["alice": "alice-secret", "bob": "bob-secret"]) async throws {
        var found = 0
        try await RestartableServer(directory: directory, port: 0, users: users).serve { found = $0 }
        try #require(found > 0)
        self.init(directory: directory, port: found, users: users)
    }

    private init(directory: String, port: Int, users: [String: String]) {
        self.directory = directory
        self.port = port
        self.users = users
    }

    /// Serves the directory on the port (a free one when it is 0) while `body` runs, then stops.
    func serve(_ body: (_ port: Int) async throws -> Void) async throws {
        let storage = try EmbeddedZoneStorage(directory: directory, options: EmbeddedZoneStorage.Options(log: LogOptions(durability: .groupCommit)))
        let app = StrataServerApp(storage: storage, users: try UserDirectory(tokens: users), configuration: ServerConfiguration(port: port))
        let (running, started) = AsyncStream<Int>.makeStream()
        let task = Task { try await app.run { port in started.yield(port) } }
        var bound: Int?
        for await port in running { bound = port; break }
        do {
            try await body(try #require(bound))
        } catch {
            task.cancel()
            _ = await task.result
            try? await storage.close()
            throw error
        }
        task.cancel()
        _ = await task.result
        try await storage.close()
    }
}

/// Waits (on the real clock: the engine talks to a real server) until the engine's status meets
/// `condition`, for at most `seconds`; the status it ended with.
func waitForStatus(_ engine: SyncEngine, seconds: Double = 20, _ condition: @escaping @Sendable (SyncStatus) -> Bool) async -> SyncStatus {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let status = await engine.currentStatus
        if condition(status) { return status }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return await engine.currentStatus
}

@Suite("Sync status tells the truth: pending edits offline, readers, what an app can ask the store")
struct SyncStatusTests {
    @Test("continuous mode with the server down: a store that was only opened has nothing pending, a note just written is pending 1, and once the server is back it is pushed and pending goes back to 0")
    func pendingIsRightOffline() async throws {
        let dir = TemporaryDirectory()
        let server = try await RestartableServer(directory: dir.sub("server"))
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        var options = SyncOptions()
        options.initialBackoff = .milliseconds(20)
        options.maxBackoff = .milliseconds(200)
        options.maxRetries = 1
        let engine = try SyncEngine(store: store, server: server.url, zone: "notes", credentials: "alice-secret", options: options)
        await engine.start()

        let down = await waitForStatus(engine) { $0.phase == .backingOff }
        #expect(down.phase == .backingOff, "the engine never found the server down: \(down)")
        #expect(down.pending == 0, "the store's schema record counted as a pending edit: \(down)")

        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "written offline"]) }
        let offline = await waitForStatus(engine, seconds: 5) { $0.pending == 1 }
        #expect(offline.pending == 1, "a note written while the server is down is not counted: \(offline)")
        #expect(offline.pushed == 0)
        #expect(try store.unpushedChangeCount() == 1)
        #expect(try store.hasUnpushedChanges(note))

        try await server.serve { _ in
            let synced = await waitForStatus(engine) { $0.pending == 0 && $0.pushed >= 2 }
            #expect(synced.pending == 0 && synced.pushed == 2, "schema and note pushed, nothing pending: \(synced)")
            #expect(try store.unpushedChangeCount() == 0)
            #expect(try !store.hasUnpushedChanges(note))
            await engine.stop()
            // The note reached the zone.
            let other = try await Store.open(at: dir.sub("other"), schema: deviceSchema)
            try await SyncEngine(store: other, server: server.url, zone: "notes", credentials: "alice-secret").sync()
            #expect(other.fetch("Note").map { $0["title"].stringValue } == ["written offline"])
            try await other.close()
        }
        try await store.close()
    }

    @Test("the store answers how many local changes are unpushed and whether an object has one: its own inserts, updates, deletes and to-many adds count until acknowledged; schema records and pulled edits never do; the answer survives a reopen")
    func storeAnswersUnpushedChanges() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            var store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
            #expect(try store.unpushedChangeCount() == 0, "opening a store is no change of the user's")
            let (folder, note) = try await store.transaction { tx in
                let folder = try tx.insert("Folder", ["name": "inbox"])
                return (folder, try tx.insert("Note", ["title": "one", "folder": .reference(folder)]))
            }
            #expect(try store.unpushedChangeCount() == 1)
            #expect(try store.hasUnpushedChanges(folder) && store.hasUnpushedChanges(note))
            #expect(try !store.hasUnpushedChanges(ObjectID.random()))

            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(try store.unpushedChangeCount() == 0)
            #expect(try !store.hasUnpushedChanges(folder) && !store.hasUnpushedChanges(note))

            // Another device's edit, pulled: nothing of ours to push.
            let other = try await Store.open(at: dir.sub("other"), schema: deviceSchema)
            let tag = try await other.transaction { tx in try tx.insert("Tag", ["label": "from elsewhere"]) }
            try await SyncEngine(store: other, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(store.fetch("Tag").count == 1)
            #expect(try store.unpushedChangeCount() == 0 && !store.hasUnpushedChanges(tag))

            // A to-many add names the object it adds to; a delete names what it deletes.
            try await store.transaction { tx in try tx.add(note, "tags", tag) }
            try await store.transaction { tx in try tx.delete(folder) }
            #expect(try store.unpushedChangeCount() == 2)
            #expect(try store.hasUnpushedChanges(note) && store.hasUnpushedChanges(folder))
            #expect(try !store.hasUnpushedChanges(tag), "the target of an add is not changed by it")

            try await store.close()
            store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
            #expect(try store.unpushedChangeCount() == 2, "the count after a reopen")
            #expect(try store.hasUnpushedChanges(note) && store.hasUnpushedChanges(folder))
            let report = try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.pushedTransactions == 2)
            #expect(try store.unpushedChangeCount() == 0 && !store.hasUnpushedChanges(note))
            try await store.close()
            try await other.close()
        }
    }

    @Test("a reader that never edited is blocked by nothing and has nothing pending; its schema record still reaches the zone once it may write")
    func readerWithOnlyItsSchema() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let owner = try await Store.open(at: dir.sub("owner"), schema: deviceSchema)
            try await owner.transaction { tx in _ = try tx.insert("Folder", ["name": "owner's"]) }
            try await SyncEngine(store: owner, server: url, zone: "board", credentials: "alice-secret").sync()
            let admin = HTTPSyncTransport(server: url, bearer: "alice-secret")
            try await admin.setAccess("board", #"{"access": "shared", "grants": {"bob": "read"}}"#)

            let reader = try await Store.open(at: dir.sub("bob"), schema: deviceSchema)
            let engine = try SyncEngine(store: reader, server: url, zone: "board", owner: "alice", credentials: "bob-secret")
            let report = try await engine.sync()
            #expect(report.unpushable == 0)
            let status = await engine.currentStatus
            #expect(status.blocked == nil && status.pending == 0, "\(status)")
            #expect(try reader.unpushedChangeCount() == 0)

            try await admin.setAccess("board", #"{"grants": {"bob": "readWrite"}}"#)
            let granted = try await engine.sync()
            #expect(granted.pushedTransactions == 1, "the schema record goes out once Bob may write")
            #expect(await engine.currentStatus.pending == 0)
            let replicas = try await admin.replicas(zone: ZoneReference("board"))
            #expect(replicas.contains { $0.replica == reader.replicaID && $0.acknowledged >= 1 })
            try await reader.close()
            try await owner.close()
        }
    }
}
