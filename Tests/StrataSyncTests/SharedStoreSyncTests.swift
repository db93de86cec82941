import Foundation
@_spi(StrataInternals) import Strata
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// Sync of a store shared by processes (`StoreSharing.processes`) when the server's answer calls
/// for what only an exclusive store can do: a fork (this store is a copy of another that pushed
/// first). The engine refuses with a typed error before changing anything, and an exclusive open
/// then forks and syncs as any copy would.
@Suite("Sync of a store shared by processes")
struct SharedStoreSyncTests {
    static let schema = Schema { Entity("Note", attributes: [Attribute("title", .string)]) }

    @Test("a shared copy that must fork says exclusiveAccessRequired, keeps its edits and its cursor; opened exclusively, it forks and converges")
    func sharedCopyMustForkExclusively() async throws {
        let dir = TemporaryDirectory()
        let shared: StoreOptions = {
            var options = StoreOptions()
            options.sharing = .processes
            return options
        }()
        try await withServer(dir.sub("server")) { url, _ in
            let original = try await Store.open(at: dir.sub("a"), schema: Self.schema)
            try await original.transaction { tx in _ = try tx.insert("Note", ["title": "synced"]) }
            try await SyncEngine(store: original, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await original.close()
            try FileManager.default.copyItem(atPath: dir.sub("a"), toPath: dir.sub("b"))
            let a = try await Store.open(at: dir.sub("a"), schema: Self.schema)
            var b = try await Store.open(at: dir.sub("b"), schema: Self.schema, options: shared)
            #expect(b.sharing == .processes && a.sharing == .exclusive)
            try await a.transaction { tx in _ = try tx.insert("Note", ["title": "from a"]) }
            try await b.transaction { tx in _ = try tx.insert("Note", ["title": "from b"]) }
            try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync()

            var cursors: [Data] = []
            for _ in 0..<2 {
                let refused = await #expect(throws: SyncError.self) {
                    _ = try await SyncEngine(store: b, server: url, zone: "notes", credentials: "alice-secret").sync()
                }
                #expect(refused?.code == .exclusiveAccessRequired, "\(String(describing: refused))")
                cursors.append(try Data(contentsOf: URL(fileURLWithPath: dir.sub("b") + "/sync-notes.json")))
            }
            #expect(b.identity.lineage.isEmpty, "nothing forked")
            #expect(b.fetch("Note").contains { $0["title"].stringValue == "from b" }, "the edit stays")
            // Not cleared for a fork that did not happen: the second refusal found it as the first left it.
            #expect(cursors[0] == cursors[1])

            // Every process closed; the app opens it exclusively once, and the fork goes through.
            try await b.close()
            b = try await Store.open(at: dir.sub("b"), schema: Self.schema)
            let report = try await SyncEngine(store: b, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.forks.count == 1)
            try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(a.digest() == b.digest())
            #expect(Set(a.fetch("Note").compactMap { $0["title"].stringValue }) == ["synced", "from a", "from b"])
            try await a.close()
            try await b.close()
        }
    }
}
