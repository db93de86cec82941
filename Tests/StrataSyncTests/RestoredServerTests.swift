import Foundation
import Strata
import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("A server restored from a backup, end to end")
struct RestoredServerTests {
    @Test("after the server's data directory is restored from an older copy, every device syncs again (410 zoneRewound, never 400) and the zone gets back every event the devices hold")
    func restoredServer() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let a = try await Store.open(at: dir.sub("a"), schema: deviceSchema)
        let b = try await Store.open(at: dir.sub("b"), schema: deviceSchema)
        @Sendable func sync(_ url: URL, _ store: Store) async throws -> SyncReport {
            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        try await withServer(server) { url, _ in
            try await a.transaction { tx in _ = try tx.insert("Folder", ["name": "a1"]) }
            _ = try await sync(url, a)
            try await b.transaction { tx in _ = try tx.insert("Folder", ["name": "b1"]) }
            _ = try await sync(url, b)
            _ = try await sync(url, a)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await a.transaction { tx in _ = try tx.insert("Folder", ["name": "a2"]) }
            _ = try await sync(url, a)
            try await b.transaction { tx in _ = try tx.insert("Folder", ["name": "b2"]) }
            _ = try await sync(url, b)
            _ = try await sync(url, a)
        }
        // The disk is lost; the backup comes back.
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, _ in
            let first = try await sync(url, a)
            #expect(first.rewinds == 1)
            _ = try await sync(url, b)
            _ = try await sync(url, a)
            let names = Set(a.fetch("Folder").compactMap { $0["name"].stringValue })
            #expect(names == ["a1", "b1", "a2", "b2"])
            #expect(a.digest() == b.digest())
            let fresh = try await Store.open(at: dir.sub("fresh"), schema: deviceSchema)
            _ = try await sync(url, fresh)
            #expect(fresh.digest() == a.digest())
            try await fresh.close()
        }
        try await a.close()
        try await b.close()
    }

    @Test("a push the server acknowledged but whose pull failed, then the server restored from a copy taken after the device's last pull (its token still matches): the next sync finds the server lacks the push, pushes it again, and every device converges")
    func restoredBetweenPushAndPull() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let a = try await Store.open(at: dir.sub("a"), schema: deviceSchema)
        let b = try await Store.open(at: dir.sub("b"), schema: deviceSchema)
        let options = { var options = SyncOptions(); options.maxRetries = 0; return options }()
        @Sendable func engine(_ url: URL, _ store: Store, failingPulls: Bool = false) throws -> SyncEngine {
            let http = HTTPSyncTransport(server: url, bearer: "alice-secret")
            return try SyncEngine(store: store, transport: PullRefusingTransport(http, refusing: failingPulls), zone: "notes", options: options)
        }
        try await withServer(server) { url, _ in
            try await a.transaction { tx in _ = try tx.insert("Folder", ["name": "a1"]) }
            _ = try await engine(url, a).sync()
            _ = try await engine(url, b).sync()
        }
        let synced = try #require(SyncCursor.cursors(inStoreAt: a.directory).first?.cursor)
        #expect(synced.acknowledged > 0 && synced.pulledBack == synced.acknowledged)
        // The backup's end is where device a pulled to: a's token stays valid against it.
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await a.transaction { tx in _ = try tx.insert("Folder", ["name": "a2"]) }
            await #expect(throws: SyncError.self) { try await engine(url, a, failingPulls: true).sync() }
            let cursor = try #require(SyncCursor.cursors(inStoreAt: a.directory).first?.cursor)
            #expect(cursor.acknowledged > synced.acknowledged && cursor.pulledBack == synced.acknowledged, "the push is acknowledged, and no pull brought it back: \(cursor)")
        }
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, _ in
            let report = try await engine(url, a).sync()
            #expect(report.rewinds == 1, "the server lacks what it acknowledged: a pushes it again")
            let cursor = try #require(SyncCursor.cursors(inStoreAt: a.directory).first?.cursor)
            #expect(cursor.acknowledged > synced.acknowledged && cursor.pulledBack == cursor.acknowledged, "the pull brought the push back: \(cursor)")
            _ = try await engine(url, b).sync()
            #expect(Set(b.fetch("Folder").compactMap { $0["name"].stringValue }) == ["a1", "a2"])
            #expect(a.digest() == b.digest())
            // Confirmed by a pull, the next sync asks nothing more.
            let again = try await engine(url, a).sync()
            #expect(again.rewinds == 0 && again.pushedTransactions == 0)
        }
        try await a.close()
        try await b.close()
    }
}
