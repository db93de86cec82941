import Foundation
import Strata
import StrataSync
import StrataTestSupport
import Testing

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
}
