import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// Two stores with controlled clocks, exchanging transactions by hand: the merge rule's cases.
struct Pair {
    let directory: StoreDirectory
    let clock: ManualClock
    let a: Store
    let b: Store

    static func make() async throws -> Pair {
        let dir = StoreDirectory("pair")
        let clock = ManualClock()
        var optionsA = storeOptions(clock: clock)
        optionsA.newReplicaID = ReplicaID(rawValue: 1)
        var optionsB = storeOptions(clock: clock)
        optionsB.newReplicaID = ReplicaID(rawValue: 2)
        let a = try await Store.open(at: dir.sub("a"), schema: notesSchema, options: optionsA)
        let b = try await Store.open(at: dir.sub("b"), schema: notesSchema, options: optionsB)
        return Pair(directory: dir, clock: clock, a: a, b: b)
    }

    init(directory: StoreDirectory, clock: ManualClock, a: Store, b: Store) {
        self.directory = directory
        self.clock = clock
        self.a = a
        self.b = b
    }

    /// Sends everything each store has to the other.
    func exchange() async throws {
        let fromA = try a.transactions(forSync: true).map(\.transaction)
        let fromB = try b.transactions(forSync: true).map(\.transaction)
        try await b.applyRemote(fromA)
        try await a.applyRemote(fromB)
    }
}

@Suite("The merge rule")
struct MergeRuleTests {
    @Test("Concurrent field updates: the newer HLC wins, ties go to the larger replica ID, on both sides")
    func lastWriterWins() async throws {
        let p = try await Pair.make()
        let note = try await p.a.transaction { tx in try tx.insert("Note", ["title": "v0", "rank": 0]) }
        try await p.exchange()
        p.clock.advance()
        try await p.a.transaction { tx in try tx.update(note, ["title": "from A", "rank": 1]) }
        p.clock.advance()
        try await p.b.transaction { tx in try tx.update(note, ["title": "from B"]) }  // newer: wins title
        try await p.exchange()
        for store in [p.a, p.b] {
            #expect(store.object(note)?["title"] == "from B")
            #expect(store.object(note)?["rank"] == 1)  // only A changed it
            #expect(store.provenance(note)["title"]?.event.replica == ReplicaID(rawValue: 2))
        }
        #expect(p.a.digest() == p.b.digest())
    }

    @Test("Delete versus a concurrent newer update: the object stays deleted (updates never revive)")
    func deleteBeatsUpdate() async throws {
        let p = try await Pair.make()
        let note = try await p.a.transaction { tx in try tx.insert("Note", ["title": "x"]) }
        try await p.exchange()
        p.clock.advance()
        try await p.a.transaction { tx in try tx.delete(note) }
        p.clock.advance()
        try await p.b.transaction { tx in try tx.update(note, ["title": "edited later"]) }
        try await p.exchange()
        #expect(p.a.object(note) == nil)
        #expect(p.b.object(note) == nil)
        #expect(p.a.digest() == p.b.digest())
    }

    @Test("An insert after a delete revives the object, with only the new insert's values")
    func insertAfterDelete() async throws {
        let p = try await Pair.make()
        let id = ObjectID()
        try await p.a.transaction { tx in try tx.insert("Note", id: id, ["title": "first", "body": "old body"]) }
        try await p.exchange()
        p.clock.advance()
        try await p.b.transaction { tx in try tx.delete(id) }
        try await p.exchange()
        p.clock.advance()
        try await p.a.transaction { tx in try tx.insert("Note", id: id, ["title": "second"]) }
        try await p.exchange()
        for store in [p.a, p.b] {
            #expect(store.object(id)?["title"] == "second")
            #expect(store.object(id)?["body"] == .null)
        }
        #expect(p.a.digest() == p.b.digest())
    }

    @Test("To-many sets are add-wins: a concurrent add survives a remove of the same member")
    func addWins() async throws {
        let p = try await Pair.make()
        let (note, tag) = try await p.a.transaction { tx in
            let note = try tx.insert("Note", ["title": "n"])
            let tag = try tx.insert("Tag", ["label": "t"])
            try tx.add(note, "tags", tag)
            return (note, tag)
        }
        try await p.exchange()
        p.clock.advance()
        try await p.a.transaction { tx in try tx.remove(note, "tags", tag) }
        try await p.b.transaction { tx in
            try tx.remove(note, "tags", tag)
            try tx.add(note, "tags", tag)  // a fresh add the other side has not seen
        }
        try await p.exchange()
        for store in [p.a, p.b] {
            #expect(store.related(note, "tags").map(\.id) == [tag])
            #expect(store.related(tag, "notes").map(\.id) == [note])
        }
        // Both remove what they have seen: gone everywhere.
        try await p.a.transaction { tx in try tx.remove(note, "tags", tag) }
        try await p.exchange()
        #expect(p.b.related(note, "tags").isEmpty)
        #expect(p.a.digest() == p.b.digest())
    }

    @Test("A reference to an object deleted concurrently reads as absent on both sides")
    func danglingReference() async throws {
        let p = try await Pair.make()
        let folder = try await p.a.transaction { tx in try tx.insert("Folder", ["name": "f"]) }
        try await p.exchange()
        try await p.a.transaction { tx in try tx.delete(folder) }
        let note = try await p.b.transaction { tx in try tx.insert("Note", ["title": "orphan", "folder": .reference(folder)]) }
        try await p.exchange()
        for store in [p.a, p.b] {
            #expect(store.object(note)?["folder"] == .null)
            #expect(store.object(folder) == nil)
        }
        #expect(p.a.digest() == p.b.digest())
    }

    @Test("Cascade deletes related objects; nullify clears references; deny refuses")
    func deleteRules() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let (folder, notes, tag) = try await store.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "f"])
            let notes = try (0..<3).map { _ in try tx.insert("Note", ["folder": .reference(folder)]) }
            let tag = try tx.insert("Tag", ["label": "t"])
            for note in notes { try tx.add(note, "tags", tag) }
            return (folder, notes, tag)
        }
        // Cascade: the folder takes its notes; the tag (nullify) stays and lets them go.
        try await store.transaction { tx in try tx.delete(folder) }
        for note in notes { #expect(store.object(note) == nil) }
        #expect(store.object(tag) != nil)
        #expect(store.related(tag, "notes").isEmpty)

        // Nullify from the to-many side: deleting a tag clears it from notes.
        let (note, tag2) = try await store.transaction { tx in
            let note = try tx.insert("Note", [:])
            let tag2 = try tx.insert("Tag", ["label": "u"])
            try tx.add(note, "tags", tag2)
            return (note, tag2)
        }
        try await store.transaction { tx in try tx.delete(tag2) }
        #expect(store.related(note, "tags").isEmpty)

        // One-to-one with cascade: the passport goes with its person.
        let (person, passport) = try await store.transaction { tx in
            let person = try tx.insert("Person", ["name": "p"])
            let passport = try tx.insert("Passport", ["number": "X1", "owner": .reference(person)])
            return (person, passport)
        }
        #expect(store.object(person)?["passport"] == .reference(passport))
        try await store.transaction { tx in try tx.delete(person) }
        #expect(store.object(passport) == nil)

        // Deny: a project with tasks cannot be deleted; without them it can.
        let (project, task) = try await store.transaction { tx in
            let project = try tx.insert("Project", ["name": "p"])
            let task = try tx.insert("Task", ["project": .reference(project)])
            return (project, task)
        }
        let position = store.segmentLog.nextPosition
        do {
            try await store.transaction { tx in try tx.delete(project) }
            Issue.record("deny did not refuse")
        } catch let error as StoreError {
            #expect(error.code == .deleteDenied)
            #expect(error.entity == "Project")
            #expect(error.object == project)
            #expect(error.attribute == "tasks")
        }
        #expect(store.segmentLog.nextPosition == position)
        #expect(store.object(project) != nil)
        try await store.transaction { tx in
            try tx.delete(task)
            try tx.delete(project)
        }
        #expect(store.object(project) == nil)
    }

    @Test("One-to-one: claiming a target takes it from its previous owner")
    func oneToOne() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let (alice, bob, passport) = try await store.transaction { tx in
            let alice = try tx.insert("Person", ["name": "a"])
            let bob = try tx.insert("Person", ["name": "b"])
            let passport = try tx.insert("Passport", ["owner": .reference(alice)])
            return (alice, bob, passport)
        }
        try await store.transaction { tx in try tx.set(bob, "passport", .reference(passport)) }
        #expect(store.object(passport)?["owner"] == .reference(bob))
        #expect(store.object(bob)?["passport"] == .reference(passport))
        #expect(store.object(alice)?["passport"] == .null)
    }

    @Test("Local-only attributes are stored and kept, never exported for sync, and not in the digest")
    func localOnly() async throws {
        let p = try await Pair.make()
        let note = try await p.a.transaction { tx in try tx.insert("Note", ["title": "t", "draft": "secret draft"]) }
        #expect(p.a.object(note)?["draft"] == "secret draft")
        let exported = try p.a.transactions(forSync: true).flatMap(\.transaction.events)
        #expect(!exported.contains { event in
            if case .insert(_, _, let fields) = event.change { return fields["draft"] != nil }
            return false
        })
        try await p.exchange()
        #expect(p.b.object(note)?["draft"] == .null)
        #expect(p.a.digest() == p.b.digest())
        try await p.a.close()
        let reopened = try await Store.open(at: p.directory.sub("a"), schema: notesSchema, options: storeOptions())
        #expect(reopened.object(note)?["draft"] == "secret draft")
    }

    @Test("Applying the same remote transactions twice, or out of order, changes nothing more")
    func duplicatesAndOrder() async throws {
        let p = try await Pair.make()
        for i in 0..<5 {
            p.clock.advance()
            try await p.a.transaction { tx in try tx.insert("Note", ["title": .string("n\(i)")]) }
        }
        let all = try p.a.transactions(forSync: true).map(\.transaction)
        #expect(try await p.b.applyRemote(Array(all.reversed())) > 0)
        let digest = p.b.digest()
        let position = p.b.segmentLog.nextPosition
        #expect(try await p.b.applyRemote(all + all) == 0)
        #expect(p.b.digest() == digest)
        #expect(p.b.segmentLog.nextPosition == position)  // nothing stored twice
        #expect(p.b.digest() == p.a.digest())
    }
}
