import Foundation
import Observation
import Synchronization
import Testing
@testable import Strata
@testable import StrataCore

/// Waits for the next element, failing the test (rather than hanging it) when none comes within
/// `seconds` — a liveness bound, not a speed assertion.
func firstElement<S: AsyncSequence & Sendable>(_ sequence: S, within seconds: Double = 30, _ comment: Comment? = nil,
                                        where accept: @escaping @Sendable (S.Element) -> Bool = { _ in true }) async throws -> S.Element?
where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            for try await element in sequence where accept(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            Issue.record(comment ?? "no matching element within \(seconds) s")
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

@Suite("Observed queries")
struct ObservedQueryTests {
    @Test("an observed query starts with the current result and delivers a new one after each commit that changes it")
    func initialThenUpdates() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "b"]) }
        var results = store.observe("Note", sortedBy: [SortKey("title")]).makeAsyncIterator()
        #expect(await results.next()?.map { $0["title"] } == ["b"])
        let a = try await store.transaction { tx in try tx.insert("Note", ["title": "a"]) }
        #expect(await results.next()?.map { $0["title"] } == ["a", "b"])
        try await store.transaction { tx in try tx.update(a, ["title": "c"]) }
        #expect(await results.next()?.map { $0["title"] } == ["b", "c"])
        try await store.transaction { tx in try tx.delete(a) }
        #expect(await results.next()?.map { $0["title"] } == ["b"])
        try await store.close()
        #expect(await results.next() == nil, "the sequence ends when the store closes")
    }

    @Test("only commits that touch the entity evaluate the query, and a result equal to the last is not delivered again")
    func onlyTouchingCommitsEvaluate() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let x = try await store.transaction { tx in try tx.insert("Note", ["title": "x1"]) }
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "a1"]) }
        let calls = Atomic<Int>(0)
        var results = store.observe("Note", where: { note in
            calls.add(1, ordering: .relaxed)
            return note["title"].stringValue?.hasPrefix("a") == true
        }, sortedBy: [SortKey("title")]).makeAsyncIterator()
        #expect(await results.next()?.map { $0["title"] } == ["a1"])
        #expect(calls.load(ordering: .relaxed) == 2, "the first result evaluates each of the two notes once")
        // Other entities: not evaluated at all (each evaluation calls the filter once per note).
        try await store.transaction { tx in _ = try tx.insert("Tag", ["label": "t"]) }
        try await store.transaction { tx in _ = try tx.insert("Person", ["name": "p"]) }
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "a2"]) }
        #expect(await results.next()?.map { $0["title"] } == ["a1", "a2"])
        #expect(calls.load(ordering: .relaxed) == 2 + 3, "the first result, then the a2 insert; the Tag and Person commits none")
        // A note outside the filter changes: evaluated, but the result is the same, so the next
        // result delivered is the one after a3.
        try await store.transaction { tx in try tx.update(x, ["title": "x2"]) }
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "a3"]) }
        #expect(await results.next()?.map { $0["title"] } == ["a1", "a2", "a3"], "the unchanged result was not delivered again")
        try await store.close()
    }

    @Test("no commit is missed between the first result and the subscription: observers started while other tasks commit all reach the final result")
    func noCommitMissedUnderConcurrentCommits() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(.groupCommit))
        let total = 200
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<total {
                group.addTask { _ = try await store.transaction { tx in try tx.insert("Note", ["title": .string("n\(i)")]) } }
            }
            // Observers start while the commits land; each must see the final count.
            for o in 0..<20 {
                group.addTask {
                    if o % 2 == 0 { await Task.yield() }
                    let final = try await firstElement(store.observe("Note"), "observer \(o) never saw all \(total) notes") { $0.count == total }
                    #expect(final?.count == total)
                }
            }
            try await group.waitForAll()
        }
        try await store.close()
    }

    @Test("changes pulled from another replica are observed like local ones")
    func remoteAppliesObserved() async throws {
        let p = try await Pair.make()
        var results = p.b.observe("Note").makeAsyncIterator()
        #expect(await results.next()?.isEmpty == true)
        let note = try await p.a.transaction { tx in try tx.insert("Note", ["title": "from a"]) }
        try await p.exchange()
        #expect(await results.next()?.map(\.id) == [note])
        try await p.a.close()
        try await p.b.close()
    }

    @Test("one object observed: its changes, nil once deleted, nothing for other objects")
    func oneObject() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "one"]) }
        let other = try await store.transaction { tx in try tx.insert("Note", ["title": "other"]) }
        var values = store.observe(note).makeAsyncIterator()
        #expect(await values.next()??["title"] == "one")
        try await store.transaction { tx in try tx.update(other, ["title": "other 2"]) }
        try await store.transaction { tx in try tx.update(note, ["title": "two"]) }
        #expect(await values.next()??["title"] == "two", "the other object's commit delivered nothing")
        try await store.transaction { tx in try tx.delete(note) }
        let deleted = await values.next()
        #expect(deleted != nil && deleted! == nil)
        try await store.close()
    }

    @Test("typed fetches and observed queries sort by key paths of the model (ties in ID order), cut to the limit")
    func keyPathSorting() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let notes = [("b", 2), ("a", 2), ("c", 1)].map { NoteModel(id: ObjectID(), title: $0.0, pinned: false, rank: $0.1) }
        try await store.transaction { tx in for note in notes { try tx.insert(note) } }
        let byRankThenTitle = [KeyPathComparator(\NoteModel.rank, order: .reverse), KeyPathComparator(\NoteModel.title)]
        #expect(try store.fetch(NoteModel.self, sortedBy: byRankThenTitle).map(\.title) == ["a", "b", "c"])
        #expect(try store.fetch(NoteModel.self, sortedBy: [KeyPathComparator(\NoteModel.title, order: .reverse)], limit: 2).map(\.title) == ["c", "b"])
        #expect(try store.read { try $0.fetch(NoteModel.self, sortedBy: byRankThenTitle) }.map(\.title) == ["a", "b", "c"])
        var observed = store.observe(NoteModel.self, sortedBy: [KeyPathComparator(\NoteModel.title)], limit: 2).makeAsyncIterator()
        #expect(try await observed.next()?.map(\.title) == ["a", "b"])
        try await store.transaction { tx in try tx.insert(NoteModel(id: ObjectID(), title: "0", pinned: false)) }
        #expect(try await observed.next()?.map(\.title) == ["0", "a"])
        try await store.close()
    }

    @Test("typed models observed, and a LiveQuery (Observation) that tells SwiftUI when its results change")
    @MainActor
    func typedAndLive() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let first = NoteModel(id: ObjectID(), title: "first", pinned: false)
        try await store.transaction { tx in try tx.insert(first) }
        var typed = store.observe(NoteModel.self, sortedBy: [SortKey("title")]).makeAsyncIterator()
        #expect(try await typed.next() == [first])

        let live = LiveQuery<NoteModel>(store, where: { $0.pinned }, sortedBy: [SortKey("title")])
        await waitUntil { live.isLoaded }
        #expect(live.isLoaded && live.results.isEmpty)
        let pinned = NoteModel(id: ObjectID(), title: "pinned", pinned: true)
        try await store.transaction { tx in try tx.insert(pinned) }
        #expect(try await typed.next()?.map(\.title) == ["first", "pinned"])
        await waitUntil { !live.results.isEmpty }
        #expect(live.results == [pinned])
        #expect(live.error == nil)
        try await store.close()
    }

    /// Waits until `condition` holds, woken by Observation's own change tracking of what it
    /// reads; fails the test after 30 s without it.
    @MainActor
    private func waitUntil(_ condition: @escaping @MainActor () -> Bool) async {
        while !condition() {
            // Nothing on the main actor runs between the check and the tracking: no change is missed.
            let changed = AsyncStream<Void>.makeStream()
            withObservationTracking({ _ = condition() }, onChange: { changed.continuation.yield() })
            guard (try? await firstElement(changed.stream, "the live query did not change")) != nil else { return }
        }
    }
}
