import Foundation
import Synchronization
import Testing
@testable import Strata
@testable import StrataCore

@Suite("Change observation")
struct ObservationTests {
    @Test("Every commit is delivered exactly once, in commit order, with the right keys", arguments: [Durability.groupCommit, .buffered])
    func deliveredInOrder(durability: Durability) async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(durability))
        let stream = store.changes()
        let folder = try await store.transaction { tx in try tx.insert("Folder", ["name": "f"]) }
        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "a", "folder": .reference(folder)]) }
        try await store.transaction { tx in try tx.update(note, ["title": "b", "rank": 1]) }
        try await store.transaction { tx in try tx.update(note, ["title": "b"]) }  // no visible change
        try await store.transaction { tx in try tx.delete(note) }
        // Concurrent commits from many tasks: each delivered once, positions strictly increasing.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask { _ = try await store.transaction { tx in try tx.insert("Tag", ["label": .string("t\(i)")]) } }
            }
            try await group.waitForAll()
        }
        try await store.close()

        var sets: [ChangeSet] = []
        for await set in stream { sets.append(set) }
        #expect(sets.count == 4 + 40)
        #expect(zip(sets, sets.dropFirst()).allSatisfy { $0.positions.lowerBound < $1.positions.lowerBound })
        #expect(sets[0].inserted.map(\.id) == [folder])
        #expect(sets[1].inserted.map(\.id) == [note])
        // The folder's derived "notes" changed too.
        #expect(sets[1].updated.first { $0.id == folder }?.keys == ["notes"])
        #expect(sets[2].updated.first { $0.id == note }?.keys == ["title", "rank"])
        #expect(sets[3].deleted.map(\.id) == [note])
        #expect(sets[3].updated.first { $0.id == folder }?.keys == ["notes"])
        #expect(Set(sets.dropFirst(4).flatMap { $0.inserted.map(\.id) }).count == 40)
        #expect(sets.allSatisfy { $0.origin == .local })
    }

    @Test("Remote changes are delivered with their origin")
    func remoteOrigin() async throws {
        let p = try await Pair.make()
        let stream = p.b.changes()
        let note = try await p.a.transaction { tx in try tx.insert("Note", ["title": "x"]) }
        try await p.exchange()
        try await p.b.close()
        var sets: [ChangeSet] = []
        for await set in stream { sets.append(set) }
        #expect(sets.count == 1)
        #expect(sets.first?.origin == .remote)
        #expect(sets.first?.inserted.map(\.id) == [note])
    }
}
