import Foundation
import Strata
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// The first app version's memo.
struct MemoV1: StrataModel, Equatable {
    static let entityName = "Memo"
    static let entity: Entity? = Entity("Memo", attributes: [
        Attribute("title", .string, optional: false, default: ""),
        Attribute("done", .bool, optional: false, default: false),
    ])
    var id: ObjectID
    var title: String
    var done: Bool
}

/// The second version: adds a required attribute with a default.
struct MemoV2: StrataModel, Equatable {
    static let entityName = "Memo"
    static let entity: Entity? = Entity("Memo", attributes: [
        Attribute("title", .string, optional: false, default: ""),
        Attribute("done", .bool, optional: false, default: false),
        Attribute("color", .string, optional: false, default: "plain"),
    ])
    var id: ObjectID
    var title: String
    var done: Bool
    var color: String

    /// What the first version reads of this memo.
    var asV1: MemoV1 { MemoV1(id: id, title: title, done: done) }
}

/// Follows an observed query in the background: its newest result, and how it ended.
private final class Following<M: StrataModel & Equatable>: Sendable {
    final class State: Sendable {
        let latest = Mutex<[M]?>(nil)
        let ended = Mutex<String?>(nil)
    }
    let state = State()
    let task: Task<Void, Never>

    init(_ stream: AsyncThrowingStream<[M], any Error>) {
        let state = self.state
        task = Task {
            do {
                for try await models in stream { state.latest.withLock { $0 = models } }
                state.ended.withLock { $0 = "the stream finished" }
            } catch {
                state.ended.withLock { $0 = "the stream failed: \(error)" }
            }
        }
    }

    /// How the stream ended (`nil` while it runs).
    var ended: String? { state.ended.withLock { $0 } }
    var latest: [M]? { state.latest.withLock { $0 } }

    /// Waits until the newest result is `expected` — at most 30 s, a liveness bound — and says
    /// whether it came.
    func reaches(_ expected: [M]) async throws -> Bool {
        for _ in 0..<3000 {
            if latest == expected { return true }
            if ended != nil { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}

@Suite("Two app versions syncing one zone through a real server")
struct AppVersionsEndToEndTests {
    @Test("an older and a newer app version (an attribute added with a default) both observe, insert and update throughout, keep the newer attribute, and converge")
    func twoAppVersionsKeepWorking() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            var polling = SyncOptions()
            polling.longPoll = .milliseconds(300)
            let old = try await Store.open(at: dir.sub("v1"), schema: try Schema(models: MemoV1.self), options: StoreOptions(durability: .buffered))
            let first = MemoV1(id: ObjectID(), title: "a first", done: false)
            try await old.transaction { tx in try tx.insert(first) }
            let oldSeen = Following(old.observe(MemoV1.self, sortedBy: [SortKey("title")]))
            let oldSync = try SyncEngine(store: old, server: url, zone: "memos", credentials: "alice-secret", options: polling)
            await oldSync.start()

            // The newer version joins later: the older one's memo reads with the new attribute's default.
            let new = try await Store.open(at: dir.sub("v2"), schema: try Schema(models: MemoV2.self), options: StoreOptions(durability: .buffered))
            let newSeen = Following(new.observe(MemoV2.self, sortedBy: [SortKey("title")]))
            let newSync = try SyncEngine(store: new, server: url, zone: "memos", credentials: "alice-secret", options: polling)
            await newSync.start()
            #expect(try await newSeen.reaches([MemoV2(id: first.id, title: "a first", done: false, color: "plain")]), "\(newSeen.ended ?? "")")

            // The newer version inserts a memo and colors the older one's.
            let second = MemoV2(id: ObjectID(), title: "b second", done: false, color: "red")
            try await new.transaction { tx in
                try tx.insert(second)
                try tx.update(MemoV2(id: first.id, title: "a first", done: false, color: "green"))
            }
            #expect(try await oldSeen.reaches([first, second.asV1]), "\(oldSeen.ended ?? "")")

            // The older version updates both memos and inserts one: the colors stay, its insert
            // reads with the default on the newer version.
            let third = MemoV1(id: ObjectID(), title: "c third", done: false)
            try await old.transaction { tx in
                try tx.update(MemoV1(id: second.id, title: "b second", done: true))
                try tx.update(MemoV1(id: first.id, title: "a first, edited by v1", done: false))
                try tx.insert(third)
            }
            // And the newer version edits the older one's new memo.
            let expected = [
                MemoV2(id: first.id, title: "a first, edited by v1", done: false, color: "green"),
                MemoV2(id: second.id, title: "b second", done: true, color: "red"),
                MemoV2(id: third.id, title: "c third", done: false, color: "plain"),
            ]
            #expect(try await newSeen.reaches(expected), "\(newSeen.latest ?? []) \(newSeen.ended ?? "")")
            try await new.transaction { tx in try tx.update(MemoV2(id: third.id, title: "c third", done: false, color: "blue")) }
            var final = expected
            final[2].color = "blue"
            #expect(try await newSeen.reaches(final), "\(newSeen.ended ?? "")")
            #expect(try await oldSeen.reaches(final.map(\.asV1)), "\(oldSeen.latest ?? []) \(oldSeen.ended ?? "")")

            // Both stores converge, and both observed queries are still running.
            var converged = false
            for _ in 0..<300 where !converged {
                converged = old.digest() == new.digest()
                if !converged { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(converged, "the two versions' stores differ")
            #expect(oldSeen.ended == nil, "the older version's observed query ended: \(oldSeen.ended ?? "")")
            #expect(newSeen.ended == nil, "the newer version's observed query ended: \(newSeen.ended ?? "")")
            #expect(old.schema.entity("Memo")?.attribute("color")?.defaultValue == "plain", "the newer schema was merged without a reopen")
            #expect(try old.object(MemoV2.self, third.id)?.color == "blue", "the older store keeps the newer version's values")

            await oldSync.stop()
            await newSync.stop()
            oldSeen.task.cancel()
            newSeen.task.cancel()
            try await old.close()
            try await new.close()
        }
    }
}
