import Foundation
import Synchronization
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// The first app version's model of an entry.
struct EntryV1: StrataModel, Equatable {
    static let entityName = "Entry"
    static let entity: Entity? = Entity("Entry", attributes: [Attribute("title", .string, optional: false, default: "")])
    var id: ObjectID
    var title: String
}

/// The second version: adds a required attribute with a default.
struct EntryV2: StrataModel, Equatable {
    static let entityName = "Entry"
    static let entity: Entity? = Entity("Entry", attributes: [
        Attribute("title", .string, optional: false, default: ""),
        Attribute("mood", .string, optional: false, default: "calm"),
    ])
    var id: ObjectID
    var title: String
    var mood: String
}

/// A version that adds a required attribute without a default (allowed on a fresh store only).
struct EntryV3: StrataModel, Equatable {
    static let entityName = "Entry"
    static let entity: Entity? = Entity("Entry", attributes: [
        Attribute("title", .string, optional: false, default: ""),
        Attribute("stars", .integer, optional: false),
    ])
    var id: ObjectID
    var title: String
    var stars: Int
}

/// Sends every transaction of `from` to `to`, as sync does.
private func deliver(_ from: Store, to: Store) async throws {
    try await to.applyRemote(try from.transactions().map(\.transaction))
}

/// Keeps the newest result of an observed query, and how the stream ended.
private final class Observed<M: StrataModel & Equatable>: Sendable {
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
                state.ended.withLock { $0 = "finished" }
            } catch {
                state.ended.withLock { $0 = "\(error)" }
            }
        }
    }

    /// How the stream ended (`nil` while it runs).
    var ended: String? { state.ended.withLock { $0 } }

    /// Waits (at most 30 s: a liveness bound) until the newest result satisfies `accept`.
    func wait(until accept: ([M]) -> Bool) async throws -> [M]? {
        for _ in 0..<3000 {
            if let value = state.latest.withLock({ $0 }), accept(value) { return value }
            if ended != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        return state.latest.withLock { $0 }
    }
}


@Suite("Schema changes across app versions")
struct SchemaEvolutionTests {
    @Test("objects written before an attribute was added read as its default, untyped and typed, and are not rewritten")
    func defaultsApplyOnRead() async throws {
        let dir = StoreDirectory()
        var store = try await Store.open(at: dir.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        let old = EntryV1(id: ObjectID(), title: "written by version 1")
        try await store.transaction { tx in try tx.insert(old) }
        let digest = store.digest()
        try await store.close()

        store = try await Store.open(at: dir.path, schema: try Schema(models: EntryV2.self), options: storeOptions())
        #expect(store.object(old.id)?["mood"] == "calm")
        #expect(store.fetch("Entry", where: { $0["mood"] == "calm" }).map(\.id) == [old.id])
        #expect(try store.fetch(EntryV2.self) == [EntryV2(id: old.id, title: "written by version 1", mood: "calm")])
        var observed = store.observe(EntryV2.self).makeAsyncIterator()
        #expect(try await observed.next()?.map(\.mood) == ["calm"])
        #expect(store.digest() == digest, "a default is what reads show, not a write")
        try await store.close()
    }

    @Test("a model whose entity declares a default reads it where the store's schema does not know the attribute")
    func modelDefaultsWhereTheStoreHasNone() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        let entry = EntryV1(id: ObjectID(), title: "t")
        try await store.transaction { tx in try tx.insert(entry) }
        #expect(try store.object(EntryV2.self, entry.id) == EntryV2(id: entry.id, title: "t", mood: "calm"))
        try await store.close()
    }

    @Test("a schema pulled from a newer app version is merged at once: the older app keeps reading, inserting and updating, and the newer one's values are kept")
    func remoteSchemaMergesAtOnce() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        let v2 = try await Store.open(at: dirs.1.path, schema: try Schema(models: EntryV2.self), options: storeOptions())
        let observed = Observed(v1.observe(EntryV1.self, sortedBy: [SortKey("title")]))

        // Version 1 writes before it has seen version 2's schema: version 2 reads its default.
        let early = EntryV1(id: ObjectID(), title: "a early v1")
        try await v1.transaction { tx in try tx.insert(early) }
        let happy = EntryV2(id: ObjectID(), title: "b from v2", mood: "happy")
        try await v2.transaction { tx in try tx.insert(happy) }
        try await deliver(v1, to: v2)
        try await deliver(v2, to: v1)
        #expect(try v2.object(EntryV2.self, early.id)?.mood == "calm")

        // Version 1 now runs with the merged schema, without reopening.
        #expect(v1.schema.entity("Entry")?.attribute("mood")?.defaultValue == "calm")
        #expect(try await observed.wait { $0.count == 2 } == [early, EntryV1(id: happy.id, title: "b from v2")],
                "version 1 decodes version 2's entry, ignoring the attribute it does not know")

        // Its insert stores version 2's attribute (the default); its update leaves version 2's value alone.
        let late = EntryV1(id: ObjectID(), title: "c late v1")
        try await v1.transaction { tx in
            try tx.insert(late)
            try tx.update(EntryV1(id: happy.id, title: "b renamed by v1"))
        }
        let inserted = try #require(try v1.transactions().last?.transaction.events.first)
        guard case .insert(_, _, let fields) = inserted.change else { Issue.record("not an insert: \(inserted)"); return }
        #expect(fields["mood"] == "calm")
        try await deliver(v1, to: v2)
        #expect(try v2.fetch(EntryV2.self, sortedBy: [SortKey("title")]) == [
            EntryV2(id: early.id, title: "a early v1", mood: "calm"),
            EntryV2(id: happy.id, title: "b renamed by v1", mood: "happy"),
            EntryV2(id: late.id, title: "c late v1", mood: "calm"),
        ])
        #expect(try await observed.wait { $0.count == 3 }?.map(\.title) == ["a early v1", "b renamed by v1", "c late v1"])
        #expect(observed.ended == nil, "version 1's observed query is still running")
        #expect(v1.digest() == v2.digest())
        observed.task.cancel()
        try await v1.close()
        try await v2.close()
    }

    @Test("an observed query evaluates again when another version's schema arrives alone, showing the new attribute's default")
    func observersSeeMergedDefaults() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        let v2 = try await Store.open(at: dirs.1.path, schema: try Schema(models: EntryV2.self), options: storeOptions())
        let entry = try await v1.transaction { tx in try tx.insert("Entry", ["title": "t"]) }
        var results = v1.observe("Entry").makeAsyncIterator()
        #expect(await results.next()?.map { $0["mood"] } == [.null])
        try await deliver(v2, to: v1)  // version 2's store holds its schema and nothing else
        #expect(await results.next()?.map { $0["mood"] } == ["calm"])
        #expect(v1.object(entry)?["mood"] == "calm")
        try await v1.close()
        try await v2.close()
    }

    @Test("a required attribute a newer version added without a default reads as its type's zero value, and the older version keeps inserting")
    func requiredWithoutDefault() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        let v3 = try await Store.open(at: dirs.1.path, schema: try Schema(models: EntryV3.self), options: storeOptions())
        let observed = Observed(v1.observe(EntryV1.self, sortedBy: [SortKey("title")]))
        let old = EntryV1(id: ObjectID(), title: "a from v1")
        try await v1.transaction { tx in try tx.insert(old) }
        let starred = EntryV3(id: ObjectID(), title: "b from v3", stars: 5)
        try await v3.transaction { tx in try tx.insert(starred) }
        try await deliver(v1, to: v3)
        try await deliver(v3, to: v1)

        let late = EntryV1(id: ObjectID(), title: "c from v1")
        try await v1.transaction { tx in try tx.insert(late) }
        try await deliver(v1, to: v3)
        #expect(try await observed.wait { $0.count == 3 }?.map(\.title) == ["a from v1", "b from v3", "c from v1"])
        #expect(observed.ended == nil, "version 1's observed query is still running")
        #expect(try v3.fetch(EntryV3.self, sortedBy: [SortKey("title")]).map(\.stars) == [0, 5, 0])
        #expect(v1.digest() == v3.digest())

        // Reopening the newer version neither fails nor records its schema again.
        let count = try v3.transactions().count
        try await v3.close()
        let reopened = try await Store.open(at: dirs.1.path, schema: try Schema(models: EntryV3.self), options: storeOptions())
        #expect(try reopened.transactions().count == count)
        #expect(try reopened.fetch(EntryV3.self, sortedBy: [SortKey("title")]).map(\.stars) == [0, 5, 0])
        observed.task.cancel()
        try await reopened.close()
        try await v1.close()
    }

    @Test("opening a store with a schema that adds a required attribute without a default is refused, naming it")
    func upgradeWithoutDefaultIsRefused() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: try Schema(models: EntryV1.self), options: storeOptions())
        try await store.close()
        let error = await #expect(throws: StoreError.self) {
            try await Store.open(at: dir.path, schema: try Schema(models: EntryV3.self), options: storeOptions())
        }
        #expect(error?.code == .incompatibleSchema)
        #expect(error?.message.contains("Entry.stars") == true)
    }

    @Test("merging schemas gives an attribute only one definition has, required without a default, its zero value in either order, and merging again changes nothing")
    func mergeIsOrderIndependentForDefaults() throws {
        let v1 = try Schema(models: EntryV1.self)
        let v3 = try Schema(models: EntryV3.self)
        for merged in [v1.merged(with: v3), v3.merged(with: v1)] {
            #expect(merged.entity("Entry")?.attribute("stars")?.defaultValue == .integer(0))
            #expect(merged.entity("Entry")?.attribute("stars")?.isOptional == false)
            #expect(merged.merged(with: v1) == merged)
            #expect(merged.merged(with: v3) == merged)
            #expect(v1.merged(with: merged) == merged)
            #expect(v3.merged(with: merged).entity("Entry")?.attribute("stars") == merged.entity("Entry")?.attribute("stars"))
        }
        #expect(v3.merged(with: v3) == v3, "a schema merged with itself is unchanged (its own required attributes keep no default)")
    }
}
