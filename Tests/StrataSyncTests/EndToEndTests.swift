import Foundation
import Hummingbird
import HummingbirdTesting
@_spi(StrataInternals) import Strata
import StrataLog
import StrataPostgres
import StrataServer
import StrataProtocol
import StrataSync
import StrataTestSupport
import Testing
import Synchronization
import StrataCore

let deviceSchema = Schema {
    Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
           relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
    Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("rank", .integer)],
           relationships: [Relationship("folder", to: "Folder", inverse: "notes"),
                           Relationship("tags", to: "Tag", toMany: true, inverse: "notes")])
    Entity("Tag", attributes: [Attribute("label", .string, optional: false)],
           relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "tags")])
}

/// Runs `body` against a real server on a real port (HummingbirdTesting `.live`), with storage in
/// `directory` and the users alice and bob.
func withServer(_ directory: String, segmentSize: Int = 64 << 20, users tokens: [String: String] = ["alice": "alice-secret", "bob": "bob-secret"],
                limits: ServerConfiguration.Limits = ServerConfiguration.Limits(),
                _ body: @Sendable (URL, EmbeddedZoneStorage) async throws -> Void) async throws {
    var log = LogOptions(durability: .groupCommit)
    log.segmentSize = segmentSize
    let storage = try EmbeddedZoneStorage(directory: directory, options: EmbeddedZoneStorage.Options(log: log))
    try await serve(storage, users: tokens, limits: limits) { url in try await body(url, storage) }
}

/// The backends the end-to-end tests run on.
enum ServerBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded, postgres
    var testDescription: String { rawValue }
}

/// ``withServer(_:segmentSize:users:limits:_:)`` on `backend`: a data directory, or a database of
/// the tests' PostgreSQL cluster that stands for `directory` (the same database each time the
/// same directory is served: a restart).
func withServer(_ directory: String, backend: ServerBackend, segmentSize: Int = 64 << 20,
                users tokens: [String: String] = ["alice": "alice-secret", "bob": "bob-secret"],
                _ body: @Sendable (URL, any ZoneStorage) async throws -> Void) async throws {
    switch backend {
    case .embedded:
        try await withServer(directory, segmentSize: segmentSize, users: tokens) { url, storage in try await body(url, storage) }
    case .postgres:
        let url = try TestDatabases.url(standingFor: directory)
        // The storage runs (connection pool, schema) for as long as the server serves.
        // Under the full suite's load the shared cluster has taken more than 10 s to answer.
        try await PostgresZoneStorage(url: PostgresConnectionURL(parsing: url), connectTimeout: .seconds(60)).withRunning { storage in
            try await serve(storage, users: tokens, limits: ServerConfiguration.Limits()) { url in try await body(url, storage) }
        }
    }
}

/// The tests' databases, one per server directory they stand for.
enum TestDatabases {
    private static let urls = Mutex<[String: String]>([:])

    static func url(standingFor directory: String) throws -> String {
        try urls.withLock { urls in
            if let url = urls[directory] { return url }
            let url = try PostgresCluster.shared().createDatabase()
            urls[directory] = url
            return url
        }
    }
}

/// Serves `storage` on a real port while `body` runs, then closes it.
private func serve(_ storage: any ZoneStorage, users tokens: [String: String], limits: ServerConfiguration.Limits,
                   _ body: @Sendable (URL) async throws -> Void) async throws {
    let users = try UserDirectory(tokens: tokens)
    let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0, limits: limits))
    do {
        try await app.buildApplication().test(.live) { client in
            let port = try #require(client.port)
            try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
        }
    } catch {
        try? await storage.close()
        throw error
    }
    try await storage.close()
}

@Suite("Sync end to end: real server, real port, real HTTP client")
struct EndToEndTests {
    @Test("Three devices with offline conflicting edits, a delete against an update and to-many changes converge", arguments: ServerBackend.allCases)
    func threeDevicesConverge(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            var devices: [Store] = []
            for name in ["phone", "laptop", "tablet"] {
                devices.append(try await Store.open(at: dir.sub(name), schema: deviceSchema, options: StoreOptions(durability: .groupCommit)))
            }
            let engines = try devices.map { try SyncEngine(store: $0, server: url, zone: "notes", credentials: "alice-secret") }
            let (folder, note, doomed, tag) = try await devices[0].transaction { tx in
                let folder = try tx.insert("Folder", ["name": "Home"])
                let note = try tx.insert("Note", ["title": "shared", "folder": .reference(folder)])
                let doomed = try tx.insert("Note", ["title": "doomed", "folder": .reference(folder)])
                let tag = try tx.insert("Tag", ["label": "todo"])
                try tx.add(note, "tags", tag)
                return (folder, note, doomed, tag)
            }
            for engine in engines { try await engine.sync() }
            for device in devices { #expect(device.count("Note") == 2) }

            // Offline edits.
            try await devices[0].transaction { tx in try tx.update(note, ["title": "phone", "rank": 1]) }
            try await Task.sleep(for: .milliseconds(3))
            try await devices[1].transaction { tx in
                try tx.update(note, ["title": "laptop"])
                try tx.delete(doomed)
                try tx.remove(note, "tags", tag)
            }
            try await Task.sleep(for: .milliseconds(3))
            try await devices[2].transaction { tx in
                try tx.update(doomed, ["title": "edited after the delete"])
                let other = try tx.insert("Tag", ["label": "later"])
                try tx.add(note, "tags", other)
            }
            for _ in 0..<2 { for engine in engines { try await engine.sync() } }

            let digests = devices.map { $0.digest() }
            #expect(Set(digests).count == 1, "devices diverged")
            for device in devices {
                #expect(device.object(note)?["title"] == "laptop")   // the newest write
                #expect(device.object(note)?["rank"] == 1)           // only the phone set it
                #expect(device.object(doomed) == nil)                // the update did not revive it
                #expect(device.related(note, "tags").map { $0["label"] } == ["later"])
                #expect(device.related(folder, "notes").map(\.id) == [note])
            }
            for device in devices { try await device.close() }
        }
    }

    @Test("A server restart between pushes loses nothing; a repeated push is appended once", arguments: ServerBackend.allCases)
    func restartAndRetry(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
        for i in 0..<5 { try await device.transaction { tx in try tx.insert("Folder", ["name": .string("f\(i)")]) } }
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            try await SyncEngine(store: device, server: url, zone: "z", credentials: "alice-secret").sync()
        }
        for i in 5..<8 { try await device.transaction { tx in try tx.insert("Folder", ["name": .string("f\(i)")]) } }
        // Forget the cursor: the engine pushes everything again; the server appends only what it lacks.
        try FileManager.default.removeItem(atPath: device.directory + "/sync-z.json")
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            try await SyncEngine(store: device, server: url, zone: "z", credentials: "alice-secret").sync()
            let fresh = try await Store.open(at: dir.sub("fresh"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            try await SyncEngine(store: fresh, server: url, zone: "z", credentials: "alice-secret").sync()
            #expect(fresh.count("Folder") == 8)
            #expect(fresh.digest() == device.digest())
            // Every transaction is in the zone's log exactly once: the schema one and eight inserts.
            let pulled = try fresh.transactions().filter { $0.transaction.replica == device.replicaID }
            #expect(pulled.count == 9)
            try await fresh.close()
        }
        try await device.close()
    }

    @Test("A device offline past the server's retention catches up through the snapshot, keeps its unpushed edits and sees the remote deletes", arguments: ServerBackend.allCases)
    func offlinePastRetention(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, segmentSize: 4096) { url, storage in
            let busy = try await Store.open(at: dir.sub("busy"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let away = try await Store.open(at: dir.sub("away"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            var small = SyncOptions()
            small.pushBatchSize = 8  // many pushes, so the zone's log spans several segments
            let busyEngine = try SyncEngine(store: busy, server: url, zone: "z", credentials: "alice-secret", options: small)
            let awayEngine = try SyncEngine(store: away, server: url, zone: "z", credentials: "alice-secret")
            let (keep, doomed) = try await busy.transaction { tx in
                (try tx.insert("Folder", ["name": "keep"]), try tx.insert("Folder", ["name": "doomed"]))
            }
            try await busyEngine.sync()
            try await awayEngine.sync()
            #expect(away.count("Folder") == 2)

            // The away device edits offline; meanwhile the busy one deletes a folder and writes a lot,
            // and the server compacts everything older than its newest 5 transactions.
            let mine = try await away.transaction { tx in
                try tx.update(keep, ["name": "renamed while away"])
                return try tx.insert("Folder", ["name": "made while away"])
            }
            try await busy.transaction { tx in try tx.delete(doomed) }
            for i in 0..<60 {
                try await busy.transaction { tx in try tx.insert("Note", ["title": .string("note \(i) \(UUID()) \(UUID()) \(UUID())")]) }
            }
            try await busyEngine.sync()
            try await storage.compact(zone: ZoneID(owner: "alice", name: "z"), retaining: 5)
            #expect(try await storage.startPosition(zone: ZoneID(owner: "alice", name: "z")) > 0)

            let report = try await awayEngine.sync()
            #expect(report.bootstraps == 1)
            try await busyEngine.sync()
            #expect(away.object(doomed) == nil)                                  // the remote delete arrived
            #expect(away.object(mine)?["name"] == "made while away")              // the unpushed insert stayed
            #expect(busy.object(mine)?["name"] == "made while away")              // … and was pushed
            #expect(busy.object(keep)?["name"] == "renamed while away")
            #expect(away.count("Note") == 60)
            #expect(away.digest() == busy.digest())
            try await busy.close()
            try await away.close()
        }
    }

    @Test("Continuous mode: a long-polling device receives another's commit promptly, pushes its own, and stops cleanly", arguments: ServerBackend.allCases)
    func continuousMode(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            let watcher = try await Store.open(at: dir.sub("watcher"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let writer = try await Store.open(at: dir.sub("writer"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            var polling = SyncOptions()
            polling.longPoll = .seconds(2)  // the server holds a cancelled poll until its wait ends
            let watching = try SyncEngine(store: watcher, server: url, zone: "live", credentials: "alice-secret", options: polling)
            let writing = try SyncEngine(store: writer, server: url, zone: "live", credentials: "alice-secret")
            try await writing.sync()
            let changes = watcher.changes()
            await watching.start()
            let started = ContinuousClock.now
            let folder = try await writer.transaction { tx in try tx.insert("Folder", ["name": "live"]) }
            try await writing.sync()
            // The watcher's long poll wakes on the push and applies it.
            var arrived = false
            for await change in changes where change.origin == .remote {
                if change.inserted.contains(where: { $0.id == folder }) { arrived = true; break }
            }
            #expect(arrived)
            print("continuous: remote change arrived after \(ContinuousClock.now - started)")
            // Its own commits go out on the next round of the loop.
            let note = try await watcher.transaction { tx in try tx.insert("Note", ["title": "from the watcher"]) }
            var pushed = false
            for _ in 0..<100 where !pushed {
                try await Task.sleep(for: .milliseconds(50))
                try await writing.sync()
                pushed = writer.object(note) != nil
            }
            #expect(pushed)
            print("continuous: local commit pushed after \(ContinuousClock.now - started)")
            await watching.stop()
            print("continuous: stopped after \(ContinuousClock.now - started)")
            #expect(watcher.digest() == writer.digest())
            try await watcher.close()
            try await writer.close()
        }
    }
}
