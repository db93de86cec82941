import Foundation
@_spi(StrataInternals) import Strata
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

/// A heal the server cannot take yet, on a device whose own pushed history is compacted away.
@Suite("A deferred heal holds the pushes it must come before")
struct DeferredHealTests {
    @Test("a heal refused because its state names a photo neither the device nor the restored server holds any more, on a device that compacted what the server lost: the new edits wait (pending, with why) rather than fail every sync, the sync names the missing photo, and once the photo is back every edit goes out")
    func pushesWaitForADeferredHeal() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 4096
        let device = try await Store.open(at: dir.sub("device"), schema: photoSchema, options: options)
        let bytes = Data(assetBytes(3000, seed: 44))
        try await withServer(server) { url, _ in
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").ensureZone(ZoneReference("notes"), create: true)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        // The device pushes a note with a photo and many more, lets the uploaded photo go under a
        // zero cache budget, and compacts the pushed history out of its log ...
        try await withServer(server) { url, _ in
            let photo = try await device.importAsset(bytes, mediaType: "image/jpeg")
            try await device.transaction { tx in _ = try tx.insert("Note", ["title": "with the photo", "photo": .asset(photo)]) }
            for i in 0..<40 {
                try await device.transaction { tx in _ = try tx.insert("Note", ["title": .string("note \(i) " + String(repeating: "x", count: 200))]) }
            }
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            device.assetCacheBudget = 0
            _ = try await device.trimAssetCache()
            #expect(device.localFile(for: photo) == nil, "the uploaded photo was not evicted: the test needs it gone")
        }
        _ = try await device.compact()
        let firstInLog = try device.firstOwnSequenceInLog()
        try #require(firstInLog.map { $0 > 1 } ?? true, "the compaction kept the pushed events in the log: the test needs them gone")
        // ... and the server is restored from a backup taken before any of it.
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await device.transaction { tx in _ = try tx.insert("Note", ["title": "new, while the heal waits"]) }
        try await withServer(server) { url, _ in
            let engine = try SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret")
            for _ in 0..<2 {
                let refusal = await #expect(throws: SyncError.self) { try await engine.sync() }
                #expect(refusal?.code == .assetMissing, "the sync says why the heal waits (got \(String(describing: refusal)))")
                #expect(refusal?.assets == [AssetHash.of(Array(bytes))], "the sync names the photo no one holds")
                let status = await engine.currentStatus
                #expect(status.pending >= 1, "the new edit (and what the server lost that the log still holds) waits")
                #expect(status.blocked != nil, "the status says why the edit waits")
            }
            // The user adds the photo again (the same bytes): the heal carries it, then the edits.
            _ = try await device.importAsset(bytes, mediaType: "image/jpeg")
            let report = try await engine.sync()
            #expect(report.stateUploads == 1)
            #expect(await engine.currentStatus.pending == 0)
            let fresh = try await Store.open(at: dir.sub("fresh"), schema: photoSchema)
            try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(fresh.fetch("Note").count == 42)
            #expect(fresh.digest() == device.digest())
            try await fresh.close()
        }
        try await device.close()
    }
}
