import Foundation
import Strata
import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// A push reads only the transactions it pushes: the store knows where its own transactions are
/// in its log, so the cost of a sync follows the change, not the history. Counted through the
/// store's test hook (log entries the push path read), never timed.
@Suite("Push cost follows the change")
struct PushCostTests {
    func open(_ path: String) async throws -> Store {
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 16 * 1024
        return try await Store.open(at: path, schema: deviceSchema, options: options)
    }

    func commit(_ store: Store, _ prefix: String, count: Int) async throws {
        for i in 0..<count {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("\(prefix) \(i) \(UUID())")]) }
        }
    }

    func engine(_ store: Store, _ url: URL) throws -> SyncEngine {
        try SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret")
    }

    @Test("after 300 transactions of history (own and pulled), a sync of one new transaction reads one log entry to push; after a reopen too; and a store that compacted with three unpushed transactions reads those three")
    func pushReadsOnlyPending() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await open(dir.sub("device"))
            let other = try await open(dir.sub("other"))
            try await commit(device, "own", count: 200)
            try await commit(other, "theirs", count: 100)
            // Each store's first transaction records its schema.
            #expect(try await engine(other, url).sync().pushedTransactions == 101)
            // The first sync pushes the 201 and pulls the other device's 101.
            let first = try await engine(device, url).sync()
            #expect(first.pushedTransactions == 201)
            #expect(device.count("Folder") == 300)

            var read = device.entriesReadForSyncCount
            try await commit(device, "new", count: 1)
            let second = try await engine(device, url).sync()
            #expect(second.pushedTransactions == 1)
            #expect(device.entriesReadForSyncCount - read == 1, "the push read \(device.entriesReadForSyncCount - read) entries for one new transaction")

            // Reopened: the index is rebuilt by the open's own replay.
            try await device.close()
            var reopened = try await open(dir.sub("device"))
            read = reopened.entriesReadForSyncCount
            try await commit(reopened, "after reopen", count: 1)
            #expect(try await engine(reopened, url).sync().pushedTransactions == 1)
            #expect(reopened.entriesReadForSyncCount - read == 1)

            // Unpushed edits kept through a compaction (before the snapshot), then a reopen.
            try await commit(reopened, "offline", count: 3)
            try await reopened.compact()
            try await reopened.close()
            reopened = try await open(dir.sub("device"))
            #expect(reopened.openReport.snapshot != nil, "no snapshot: the test does not test")
            read = reopened.entriesReadForSyncCount
            #expect(try await engine(reopened, url).sync().pushedTransactions == 3)
            #expect(reopened.entriesReadForSyncCount - read == 3)

            // Everything arrived, once.
            try await engine(other, url).sync()
            #expect(other.count("Folder") == 305)
            #expect(other.digest() == reopened.digest())
            for store in [reopened, other] { try await store.close() }
        }
    }

    @Test("a second zone synced by the same store (nothing acknowledged there yet) gets every own transaction, read from the log, though the first zone's engine had them all acknowledged")
    func newZoneReadsEverything() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await open(dir.sub("device"))
            try await commit(device, "own", count: 30)
            // 30 and the transaction recording the schema.
            #expect(try await engine(device, url).sync().pushedTransactions == 31)
            let second = try SyncEngine(store: device, server: url, zone: "archive", credentials: "alice-secret")
            #expect(try await second.sync().pushedTransactions == 31)
            let probe = try await open(dir.sub("probe"))
            try await SyncEngine(store: probe, server: url, zone: "archive", credentials: "alice-secret").sync()
            #expect(probe.digest() == device.digest())
            for store in [device, probe] { try await store.close() }
        }
    }
}
