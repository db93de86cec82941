import Foundation
import Strata
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

/// Tools read a store's sync cursors with the engine's own reader: checked the same way, so a
/// damaged cursor is never shown as if it were one.
@Suite("Sync cursor files, as tools read them")
struct CursorFilesTests {
    @Test("SyncCursor.cursors lists a store's cursor files with what the engine saved, a damaged one as nil, and not the sync pins")
    func cursorsOfAStore() async throws {
        let dir = TemporaryDirectory()
        let transport = InMemoryTransport()
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("inbox")]) }
        let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
        try await engine.sync()
        let saved = await engine.currentCursor
        try await store.close()

        // A second cursor, damaged: its token changed without its checksum.
        let good = try String(contentsOfFile: dir.sub("device") + "/sync-notes.json", encoding: .utf8)
        let damaged = good.replacingOccurrences(of: "\"acknowledged\":\(saved.acknowledged)", with: "\"acknowledged\":\(saved.acknowledged + 5)")
        #expect(damaged != good, "the test did not damage the copy")
        try damaged.write(toFile: dir.sub("device") + "/sync-archive.json", atomically: true, encoding: .utf8)

        let cursors = SyncCursor.cursors(inStoreAt: dir.sub("device"))
        #expect(cursors.map(\.file) == ["sync-archive.json", "sync-notes.json"])
        #expect(cursors[0].cursor == nil, "a damaged cursor was read as one")
        #expect(cursors[1].cursor?.acknowledged == saved.acknowledged && cursors[1].cursor?.token == saved.token)
    }

    @Test("a push no pull has brought back is kept in the cursor file (pulledBack), checked by its checksum; a confirmed cursor has the same fields as one written before pulledBack existed")
    func unconfirmedPushInTheFile() async throws {
        let dir = TemporaryDirectory()
        let transport = InMemoryTransport()
        let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
        let path = dir.sub("device") + "/sync-notes.json"
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("inbox")]) }
        var options = SyncOptions()
        options.maxRetries = 0
        try await SyncEngine(store: store, transport: transport, zone: "notes", options: options).sync()
        let confirmed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!confirmed.contains("pulledBack"), "a confirmed cursor reads like one written before the field: \(confirmed)")
        let synced = try #require(SyncCursor.cursors(inStoreAt: dir.sub("device")).first?.cursor)
        #expect(synced.pulledBack == synced.acknowledged)

        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("archive")]) }
        let failing = try SyncEngine(store: store, transport: PullRefusingTransport(transport, refusing: true), zone: "notes", options: options)
        await #expect(throws: SyncError.self) { try await failing.sync() }
        let saved = await failing.currentCursor
        try await store.close()
        #expect(saved.acknowledged > synced.acknowledged && saved.pulledBack == synced.acknowledged)
        let unconfirmed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(SyncCursor.cursors(inStoreAt: dir.sub("device")).first?.cursor == saved)

        // Raising pulledBack by hand would hide the push from the check: the checksum refuses it.
        let raised = unconfirmed.replacingOccurrences(of: "\"pulledBack\":\(saved.pulledBack)", with: "\"pulledBack\":\(saved.acknowledged)")
        #expect(raised != unconfirmed, "the test did not change the file")
        try raised.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(SyncCursor.cursors(inStoreAt: dir.sub("device")).first?.cursor == nil)
    }
}
