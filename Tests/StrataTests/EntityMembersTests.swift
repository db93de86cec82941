import Foundation
import Synchronization
import Testing
@_spi(StrataInternals) @testable import Strata
@testable import StrataCore

private let membersSchema = Schema {
    Entity("Big", attributes: [Attribute("n", .integer)])
    Entity("Other", attributes: [Attribute("n", .integer)])
    Entity("Tiny", attributes: [Attribute("n", .integer)])
}

private struct Abort: Error {}

/// An entity's objects are found through a set of its IDs while it is small, and by one pass over
/// the records once it holds a quarter of them (`EntityMembers`). Whichever way, every read must
/// give the entity's objects exactly: through entity changes of a reused ID, deletes, rolled-back
/// transactions, an open transaction, an index, and a snapshot.
@Suite("Entity members: sets for small entities, scans for large ones")
struct EntityMembersTests {
    /// Whether the projection finds `entity`'s objects by a scan.
    func scanned(_ store: Store, _ entity: String) -> Bool {
        store.core.withLock { core in
            guard let id = core.projection.nameID(entity), case .scan = core.projection.members.lookup(id) else { return false }
            return true
        }
    }

    func check(_ store: Store, _ expected: [String: Set<ObjectID>], _ step: String) {
        for (entity, ids) in expected {
            #expect(Set(store.fetch(entity).map(\.id)) == ids, "\(step): fetch \(entity)")
            #expect(store.count(entity) == ids.count, "\(step): count \(entity)")
            #expect(Set(store.fetch(entity, matching: .greater("n", .integer(-1))).map(\.id)) == ids, "\(step): filtered fetch \(entity)")
        }
    }

    func insert(_ store: Store, _ entity: String, _ count: Int, into expected: inout [String: Set<ObjectID>]) async throws {
        var left = count
        while left > 0 {
            let chunk = min(left, 2_000)
            let ids: [ObjectID] = try await store.transaction { tx in
                try (0..<chunk).map { i in try tx.insert(entity, ["n": .integer(Int64(i))]) }
            }
            expected[entity, default: []].formUnion(ids)
            left -= chunk
        }
    }

    @Test("reads agree with the objects as an entity crosses from a set to a scan and back, and after a snapshot")
    func membersFollowTheShares() async throws {
        let dir = StoreDirectory()
        var options = storeOptions()
        options.autoCompaction = .disabled
        options.indexes = [AttributeIndex("Big", on: "n")]
        var store = try await Store.open(at: dir.path, schema: membersSchema, options: options)
        var expected: [String: Set<ObjectID>] = ["Big": [], "Other": [], "Tiny": []]

        // Big alone passes 4,096 records: scanned. Tiny stays a set.
        try await insert(store, "Big", 5_000, into: &expected)
        try await insert(store, "Tiny", 10, into: &expected)
        #expect(scanned(store, "Big"))
        #expect(!scanned(store, "Tiny"))
        check(store, expected, "Big scanned")

        // Opened from a snapshot with Big scanned: its index is built by a scan of the records.
        _ = try await store.compact()
        try await store.close()
        store = try await Store.open(at: dir.path, schema: membersSchema, options: options)
        #expect(scanned(store, "Big"))
        #expect(!scanned(store, "Tiny"))
        #expect(store.core.withLock { $0.projection.indexSizes } == [5_000])
        check(store, expected, "Big scanned, reopened")

        // Deleted Big IDs reused: as Other (the record changes entity) and as Big again.
        let deleted = Array(expected["Big"]!.sorted().prefix(120))
        try await store.transaction { tx in for id in deleted { try tx.delete(id) } }
        expected["Big"]!.subtract(deleted)
        try await store.transaction { tx in
            for id in deleted[0..<60] { _ = try tx.insert("Other", id: id, ["n": .integer(1)]) }
            for id in deleted[60..<90] { _ = try tx.insert("Big", id: id, ["n": .integer(2)]) }
        }
        expected["Other"]!.formUnion(deleted[0..<60])
        expected["Big"]!.formUnion(deleted[60..<90])
        check(store, expected, "IDs reused")

        // A rolled-back transaction leaves nothing behind, and an open one sees its own inserts.
        await #expect(throws: Abort.self) {
            try await store.transaction { tx in
                for _ in 0..<30 { _ = try tx.insert("Big", ["n": .integer(3)]) }
                let tiny = try (0..<30).map { _ in try tx.insert("Tiny", ["n": .integer(3)]) }
                #expect(tx.fetch("Tiny").count == expected["Tiny"]!.count + 30)
                #expect(Set(tx.fetch("Tiny").map(\.id)).isSuperset(of: tiny))
                #expect(tx.fetch("Big").count == expected["Big"]!.count + 30)
                throw Abort()
            }
        }
        check(store, expected, "rolled back")

        // Other grows past 80,000 records: Big, now under an eighth, gets its set back at the
        // check after the table doubled; Other is scanned. At about 45,000 records Big is under
        // a quarter but not an eighth: still scanned.
        try await insert(store, "Other", 40_000, into: &expected)
        #expect(scanned(store, "Big"), "an entity between an eighth and a quarter switched back")
        try await insert(store, "Other", 36_000, into: &expected)
        #expect(!scanned(store, "Big"))
        #expect(scanned(store, "Other"))
        check(store, expected, "Other large")

        // Loaded from a snapshot: each entity's lookup is decided again.
        _ = try await store.compact()
        try await store.close()
        store = try await Store.open(at: dir.path, schema: membersSchema, options: options)
        #expect(!scanned(store, "Big"))
        #expect(scanned(store, "Other"))
        #expect(!scanned(store, "Tiny"))
        check(store, expected, "reopened from a snapshot")
        try await store.transaction { tx in
            for id in expected["Big"]!.sorted().prefix(10) { try tx.delete(id) }
        }
        expected["Big"] = Set(expected["Big"]!.sorted().dropFirst(10))
        check(store, expected, "deleted after reopening")
        try await store.close()
    }
}
