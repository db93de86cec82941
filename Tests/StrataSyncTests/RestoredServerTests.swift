import Foundation
import Strata
import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing

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
}
