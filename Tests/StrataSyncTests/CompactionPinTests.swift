import Foundation
@_spi(StrataInternals) import Strata
import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("Compaction that respects sync, end to end")
struct CompactionPinTests {
    func open(_ path: String) async throws -> Store {
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 4096
        return try await Store.open(at: path, schema: deviceSchema, options: options)
    }

    /// Commits `count` folders, one transaction each, with names long enough to fill segments.
    func commit(_ store: Store, _ prefix: String, count: Int) async throws {
        for i in 0..<count {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("\(prefix) \(i) \(UUID()) \(UUID())")]) }
        }
    }

    @Test("a store that synced before and compacts with unpushed edits still pushes every one of them; once pushed, they are retired")
    func compactionKeepsUnpushed() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            // Synced once, then offline edits and a compaction.
            let synced = try await open(dir.sub("synced"))
            try await commit(synced, "pushed", count: 40)
            try await SyncEngine(store: synced, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await commit(synced, "offline", count: 60)
            try await synced.compact()
            #expect(synced.segmentLog.startPosition > 0, "compaction retired nothing: the test does not test")

            let report = try await SyncEngine(store: synced, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.pushedTransactions == 60)
            let probe = try await open(dir.sub("probe"))
            try await SyncEngine(store: probe, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(probe.count("Folder") == 100)
            #expect(probe.digest() == synced.digest())

            // Once pushed, the next compaction retires them.
            let before = synced.segmentLog.startPosition
            try await synced.compact()
            #expect(synced.segmentLog.startPosition > before)
            for store in [synced, probe] { try await store.close() }
        }
    }
}
