import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataLog
import Synchronization
import StrataCore

@Suite("Automatic compaction: thresholds, sync pins, open, close")
struct AutoCompactionTests {
    /// Small segments (so that compaction has whole segments to retire) and a small threshold.
    func options(events: Int? = 50, bytes: Int? = nil, retainsUnpushed: Bool = true) -> StoreOptions {
        var options = storeOptions(.buffered)
        options.segmentSize = 4096
        options.autoCompaction = AutoCompaction(eventsSinceSnapshot: events, bytesSinceSnapshot: bytes)
        options.retainsUnpushed = retainsUnpushed
        return options
    }

    func disabled() -> StoreOptions {
        var options = self.options()
        options.autoCompaction = .disabled
        return options
    }

    /// Commits `count` folders, one event per transaction, with names long enough to fill segments.
    func commit(_ store: Store, _ prefix: String, count: Int, afterEach: (() throws -> Void)? = nil) async throws {
        for i in 0..<count {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("\(prefix) \(i) \(UUID()) \(UUID())")]) }
            try afterEach?()
        }
    }

    /// The highest sequence of the store's own replica (what a sync engine that pushed everything
    /// would have had acknowledged).
    func ownHighest(_ store: Store) -> UInt64 {
        store.appliedSequences().first { $0.replica == store.replicaID }?.highest ?? 0
    }

    @Test("Committing past the event threshold writes a snapshot in the background and retires segments; the store reopens to the same digest, replaying at most the threshold")
    func eventThreshold() async throws {
        let dir = StoreDirectory()
        // Without a sync to wait for, everything the snapshot covers may go.
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options(retainsUnpushed: false))
        try await commit(store, "folder", count: 200)
        await store.waitForAutoCompaction()
        #expect(try !store.segmentLog.snapshots().isEmpty)
        #expect(store.segmentLog.startPosition > 0, "automatic compaction retired nothing")
        #expect(store.historySinceSnapshot.events <= 50)
        #expect(try store.segmentLog.snapshots().count <= 2)
        let digest = store.digest()
        try await store.close()

        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options(retainsUnpushed: false))
        #expect(reopened.digest() == digest)
        #expect(reopened.count("Folder") == 200)
        #expect(reopened.openReport.snapshot != nil)
        #expect(reopened.openReport.replayedEvents <= 50)
        #expect(reopened.historySinceSnapshot.events == reopened.openReport.replayedEvents)
        try await reopened.close()
    }

    @Test("The byte threshold compacts a history of few, large events")
    func byteThreshold() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options(events: nil, bytes: 16 << 10, retainsUnpushed: false))
        let body = String(repeating: "lorem ipsum ", count: 400)  // ≈ 4.7 KB per event
        for i in 0..<10 {
            try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("note \(i)"), "body": .string(body)]) }
        }
        await store.waitForAutoCompaction()
        #expect(try !store.segmentLog.snapshots().isEmpty)
        #expect(store.historySinceSnapshot.bytes <= 16 << 10)
        #expect(store.historySinceSnapshot.events < 10)
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options(events: nil, bytes: 16 << 10))
        #expect(reopened.digest() == digest)
        #expect(reopened.openReport.replayedBytes <= 16 << 10)
        try await reopened.close()
    }

    @Test("A store that has not synced keeps its own transactions (it may sync later) but is still snapshotted, so opens stay short")
    func unsyncedKeepsOwnHistory() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options())
        try await commit(store, "folder", count: 200)
        await store.waitForAutoCompaction()
        #expect(try !store.segmentLog.snapshots().isEmpty)
        #expect(store.segmentLog.startPosition == 0)
        #expect(try store.transactions().count == 201)  // the schema, then the folders
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options())
        #expect(reopened.digest() == digest)
        #expect(reopened.openReport.replayedEvents <= 50)
        try await reopened.close()
    }

    @Test("Unpushed edits pinned by sync stay in the log through automatic compactions; a fork of them still finds its snapshot; once pushed, they are retired")
    func keepsUnpushed() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options())
        // Online: a sync engine has every commit acknowledged soon after it is made.
        try store.pinUnpushed("zone", acknowledged: ownHighest(store))
        try await commit(store, "pushed", count: 80) { try store.pinUnpushed("zone", acknowledged: self.ownHighest(store)) }
        await store.waitForAutoCompaction()
        #expect(store.segmentLog.startPosition > 0, "automatic compaction retired nothing while everything was pushed")
        let acknowledged = ownHighest(store)

        // Offline: several automatic compactions while nothing is pushed.
        try await commit(store, "offline", count: 180)
        await store.waitForAutoCompaction()
        // At most the threshold (50 events) past the newest snapshot: exactly 50 committed during
        // the last compaction (a loaded machine) do not call for another.
        let newestSnapshot = try store.segmentLog.snapshots().map(\.position).max() ?? 0
        #expect(newestSnapshot >= store.segmentLog.nextPosition - 50, "newest snapshot \(newestSnapshot), log end \(store.segmentLog.nextPosition)")
        let kept = try store.transactions(from: store.segmentLog.startPosition)
            .filter { $0.transaction.replica == store.replicaID }
            .flatMap { $0.transaction.events.map(\.id.sequence) }
        let unpushed = Set((acknowledged + 1)...ownHighest(store))
        #expect(unpushed.isSubset(of: Set(kept)), "automatic compaction retired unpushed edits")
        #expect(unpushed.count == 180)
        let names = Set(store.fetch("Folder").map { $0["name"] })

        // What sync does when the server holds these sequences from another copy: re-author them.
        // That needs a snapshot older than the first of them within the retained log.
        let fork = try await store.fork(keepingThrough: acknowledged)
        #expect(fork.reauthored == 180)
        #expect(Set(store.fetch("Folder").map { $0["name"] }) == names)
        #expect(store.count("Folder") == 260)
        let digest = store.digest()
        try await store.close()

        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options())
        #expect(reopened.digest() == digest)
        // Pushed at last: the next automatic compaction retires them.
        try reopened.pinUnpushed("zone", acknowledged: ownHighest(reopened))
        let before = reopened.segmentLog.startPosition
        try await commit(reopened, "more", count: 60)
        await reopened.waitForAutoCompaction()
        #expect(reopened.segmentLog.startPosition > before)
        try await reopened.close()
    }

    @Test("An open that replays more than the threshold compacts afterwards, so the next open is short")
    func compactsAfterOpen() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: disabled())
        try await commit(store, "folder", count: 150)
        let digest = store.digest()
        try await store.close()

        let long = try await Store.open(at: dir.path, schema: notesSchema, options: options(retainsUnpushed: false))
        #expect(long.openReport.replayedEvents > 150)
        await long.waitForAutoCompaction()
        #expect(try !long.segmentLog.snapshots().isEmpty)
        #expect(long.historySinceSnapshot.events == 0)
        try await long.close()

        let short = try await Store.open(at: dir.path, schema: notesSchema, options: options())
        #expect(short.openReport.replayedEvents == 0)
        #expect(short.digest() == digest)
        try await short.close()

        // A tool's open (the recorded schema) does the same.
        let dir2 = StoreDirectory()
        let other = try await Store.open(at: dir2.path, schema: notesSchema, options: disabled())
        try await commit(other, "folder", count: 150)
        try await other.close()
        let tool = try Store.open(at: dir2.path, options: options())
        await tool.waitForAutoCompaction()
        #expect(try !tool.segmentLog.snapshots().isEmpty)
        try await tool.close()
    }

    @Test(".disabled never compacts, on commit or on open")
    func disabledNeverCompacts() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: disabled())
        try await commit(store, "folder", count: 300)
        await store.waitForAutoCompaction()
        #expect(try store.segmentLog.snapshots().isEmpty)
        #expect(store.segmentLog.startPosition == 0)
        #expect(store.historySinceSnapshot.events == 301)
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: disabled())
        await reopened.waitForAutoCompaction()
        #expect(try reopened.segmentLog.snapshots().isEmpty)
        #expect(reopened.openReport.replayedEvents == 301)
        try await reopened.close()
    }

    @Test("A store closed right after crossing the threshold closes cleanly and reopens to the same state")
    func closeRightAfterCrossing() async throws {
        for round in 0..<8 {
            let dir = StoreDirectory()
            let store = try await Store.open(at: dir.path, schema: notesSchema, options: options(retainsUnpushed: round.isMultiple(of: 2)))
            try await commit(store, "folder", count: 51 + round * 7)
            let digest = store.digest()
            try await store.close()
            await store.waitForAutoCompaction()  // nothing left running
            #expect(store.core.withLock { $0.autoCompaction.task == nil })
            let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: disabled())
            #expect(reopened.digest() == digest, "round \(round)")
            #expect(reopened.count("Folder") == 51 + round * 7)
            try await reopened.close()
        }
    }

    @Test("Concurrent committers and explicit compactions: one compaction at a time, nothing lost")
    func concurrentCommitsAndCompactions() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options(events: 20, retainsUnpushed: false))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<6 {
                group.addTask { try await self.commit(store, "writer \(writer)", count: 40) }
            }
            group.addTask {
                for _ in 0..<5 { try await store.compact() }
            }
            try await group.waitForAll()
        }
        await store.waitForAutoCompaction()
        #expect(store.count("Folder") == 240)
        #expect(store.historySinceSnapshot.events <= 20)
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options(events: 20))
        #expect(reopened.digest() == digest)
        try await reopened.close()
    }

    @Test("The default policy: 100,000 events or 64 MiB past the newest snapshot")
    func defaults() {
        let options = StoreOptions()
        #expect(options.autoCompaction == .default)
        #expect(options.autoCompaction.eventsSinceSnapshot == 100_000)
        #expect(options.autoCompaction.bytesSinceSnapshot == 64 << 20)
        #expect(options.autoCompaction.isEnabled)
        #expect(!AutoCompaction.disabled.isEnabled)
        #expect(!options.autoCompaction.isExceeded(events: 100_000, bytes: 64 << 20))
        #expect(options.autoCompaction.isExceeded(events: 100_001, bytes: 0))
        #expect(options.autoCompaction.isExceeded(events: 0, bytes: (64 << 20) + 1))
    }
}
