import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

struct TagModel: StrataModel, Equatable {
    static let entityName = "Tag"
    var id = ObjectID()
    var label: String
    var notes: [ObjectID] = []
}

@Suite("Typed models store their to-many relationships")
struct TypedToManyTests {
    /// A store with three tags.
    static func store(_ dir: StoreDirectory) async throws -> (Store, [ObjectID]) {
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let tags = [TagModel(label: "home"), TagModel(label: "work"), TagModel(label: "later")]
        try await store.transaction { tx in for tag in tags { try tx.insert(tag) } }
        return (store, tags.map(\.id))
    }

    static func note(tags: [ObjectID] = [], folder: ObjectID? = nil) -> NoteModel {
        NoteModel(id: ObjectID(), title: "Hello", body: nil, pinned: false, rank: nil, folder: folder, tags: tags)
    }

    /// The add and remove events of the store's last transaction, as (relationship, target, isAdd).
    static func memberEvents(_ store: Store) throws -> [String] {
        try (store.transactions().last?.transaction.events ?? []).map { event in
            switch event.change {
            case .add(let entity, _, let relationship, let target): "add \(entity).\(relationship) \(target)"
            case .remove(let entity, _, let relationship, let target, _): "remove \(entity).\(relationship) \(target)"
            case .update(let entity, _, let fields): "update \(entity) \(fields.keys.sorted())"
            default: "\(event.change)"
            }
        }
    }

    @Test("inserting a model adds the members of its to-many property: they read back typed, from both sides, and after reopening")
    func insertStoresMembers() async throws {
        let dir = StoreDirectory()
        var (store, tags) = try await Self.store(dir)
        let note = Self.note(tags: [tags[1], tags[0]])
        try await store.transaction { tx in try tx.insert(note) }
        let expected = [tags[0], tags[1]].sorted()
        #expect(try store.object(NoteModel.self, note.id)?.tags == expected)
        #expect(try store.object(TagModel.self, tags[0])?.notes == [note.id])
        #expect(try store.object(TagModel.self, tags[2])?.notes == [])
        try await store.close()
        store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(try store.object(NoteModel.self, note.id)?.tags == expected)
        #expect(try store.fetch(NoteModel.self).map(\.tags) == [expected])
        try await store.close()
    }

    @Test("inserting a model whose to-many is stored on the other side (a folder's notes) points the members at it")
    func insertDerivedMembers() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let notes = [Self.note(), Self.note()]
        let folder = FolderModel(id: ObjectID(), name: "Inbox", notes: notes.map(\.id))
        try await store.transaction { tx in
            for note in notes { try tx.insert(note) }
            try tx.insert(folder)
        }
        #expect(try store.object(FolderModel.self, folder.id)?.notes == notes.map(\.id).sorted())
        for note in notes { #expect(try store.object(NoteModel.self, note.id)?.folder == folder.id) }
        try await store.close()
    }

    @Test("updating a model makes its to-many exactly the model's members, writing an add per member gained and a remove per member lost and nothing else; after reopening too")
    func updateWritesTheDifference() async throws {
        let dir = StoreDirectory()
        var (store, tags) = try await Self.store(dir)
        var note = Self.note(tags: [tags[0], tags[1]])
        try await store.transaction { tx in try tx.insert(note) }

        note.tags = [tags[1], tags[2]]
        try await store.transaction { tx in try tx.update(note) }
        #expect(try Self.memberEvents(store).sorted() == ["add Note.tags \(tags[2])", "remove Note.tags \(tags[0])"])
        #expect(try store.object(NoteModel.self, note.id)?.tags == [tags[1], tags[2]].sorted())

        // Nothing changed, nothing written.
        let count = try store.transactions().count
        try await store.transaction { tx in try tx.update(note) }
        #expect(try store.transactions().count == count)

        // A title edit and a member removed: one update of the title, one remove.
        note.title = "Edited"
        note.tags = [tags[2]]
        try await store.transaction { tx in try tx.update(note) }
        #expect(try Self.memberEvents(store).sorted() == ["remove Note.tags \(tags[1])", "update Note [\"title\"]"])

        note.tags = []
        try await store.transaction { tx in try tx.update(note) }
        try await store.close()
        store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let read = try #require(try store.object(NoteModel.self, note.id))
        #expect(read == note)
        #expect(try store.object(TagModel.self, tags[2])?.notes == [])
        try await store.close()
    }

    @Test("updating a folder model moves notes in and out of it (a to-many stored on the other side)")
    func updateDerivedMembers() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let notes = [Self.note(), Self.note(), Self.note()]
        var folder = FolderModel(id: ObjectID(), name: "Inbox", notes: [notes[0].id, notes[1].id])
        try await store.transaction { tx in
            for note in notes { try tx.insert(note) }
            try tx.insert(folder)
        }
        folder.notes = [notes[1].id, notes[2].id]
        try await store.transaction { tx in try tx.update(folder) }
        #expect(try store.object(FolderModel.self, folder.id)?.notes == [notes[1].id, notes[2].id].sorted())
        #expect(try store.object(NoteModel.self, notes[0].id)?.folder == nil)
        #expect(try store.object(NoteModel.self, notes[2].id)?.folder == folder.id)
        try await store.close()
    }

    @Test("an update from the model as read keeps a member another transaction added meanwhile, and adds the app's own")
    func updateFromOriginalKeepsOthersMembers() async throws {
        let dir = StoreDirectory()
        let (store, tags) = try await Self.store(dir)
        let note = Self.note(tags: [tags[0]])
        try await store.transaction { tx in try tx.insert(note) }
        let read = try #require(try store.object(NoteModel.self, note.id))
        try await store.transaction { tx in try tx.add(note.id, "tags", tags[2]) }  // as sync would
        var edited = read
        edited.tags.append(tags[1])
        try await store.transaction { tx in try tx.update(edited, from: read) }
        #expect(try store.object(NoteModel.self, note.id)?.tags == tags.sorted())
        try await store.close()
    }

    @Test("a model with a member that does not exist, or is of another entity, is refused naming the entity and property, and nothing of it is written")
    func refusedMembersWriteNothing() async throws {
        let dir = StoreDirectory()
        let (store, tags) = try await Self.store(dir)
        let folder = FolderModel(id: ObjectID(), name: "Inbox")
        try await store.transaction { tx in try tx.insert(folder) }
        for wrong in [ObjectID(), folder.id] {
            let note = Self.note(tags: [tags[0], wrong])
            let written = try await store.transaction { tx -> Bool in
                do {
                    try tx.insert(note)
                    Issue.record("a note with member \(wrong) was inserted")
                } catch let error as StoreError {
                    #expect(error.code == .invalidReference)
                    #expect(error.entity == "Note" && error.attribute == "tags")
                }
                return tx.exists(note.id) || !tx.related(tags[0], "notes").isEmpty
            }
            #expect(!written, "a refused insert left part of the note behind")
        }
        // An update likewise: neither the title nor the valid member is written.
        var note = Self.note(tags: [tags[0]])
        try await store.transaction { tx in try tx.insert(note) }
        note.title = "Edited"
        note.tags = [tags[1], ObjectID()]
        await #expect(throws: StoreError.self) { try await store.transaction { tx in try tx.update(note) } }
        let count = try store.transactions().count
        try await store.transaction { tx in
            do { try tx.update(note) } catch {}
        }
        #expect(try store.transactions().count == count, "a refused update wrote something")
        #expect(try store.object(NoteModel.self, note.id)?.tags == [tags[0]])
        #expect(try store.object(NoteModel.self, note.id)?.title == "Hello")
        try await store.close()
    }

    @Test("a to-many property of a type that is not object IDs, or object IDs for a to-one relationship, is refused naming the entity and property")
    func wrongTypesAreRefused() async throws {
        struct SingleTag: StrataModel {
            static let entityName = "Note"
            var id = ObjectID()
            var title = ""
            var tags: ObjectID?
        }
        struct ManyFolders: StrataModel {
            static let entityName = "Note"
            var id = ObjectID()
            var title = ""
            var folder: [ObjectID] = []
        }
        let dir = StoreDirectory()
        let (store, tags) = try await Self.store(dir)
        try await store.transaction { tx in
            do {
                try tx.insert(SingleTag(tags: tags[0]))
                Issue.record("a to-many written from one ObjectID")
            } catch let error as StoreError {
                #expect(error.code == .typeMismatch && error.entity == "Note" && error.attribute == "tags")
            }
            do {
                try tx.insert(ManyFolders())
                Issue.record("a to-one written from [ObjectID]")
            } catch let error as StoreError {
                #expect(error.code == .typeMismatch && error.entity == "Note" && error.attribute == "folder")
            }
        }
        #expect(store.count("Note") == 0)
        try await store.close()
    }

    @Test("a to-many property may be a Set of object IDs, and a model without the property leaves the members as they are")
    func setsAndAbsentProperties() async throws {
        struct SetNote: StrataModel, Equatable {
            static let entityName = "Note"
            var id = ObjectID()
            var title = ""
            var tags: Set<ObjectID> = []
        }
        struct TitleOnly: StrataModel {
            static let entityName = "Note"
            var id: ObjectID
            var title: String
        }
        let dir = StoreDirectory()
        let (store, tags) = try await Self.store(dir)
        var note = SetNote(title: "a", tags: [tags[0], tags[2]])
        try await store.transaction { tx in try tx.insert(note) }
        #expect(try store.object(SetNote.self, note.id) == note)
        note.tags = [tags[1]]
        try await store.transaction { tx in try tx.update(note) }
        #expect(try store.object(SetNote.self, note.id) == note)

        try await store.transaction { tx in try tx.update(TitleOnly(id: note.id, title: "b")) }
        #expect(try store.object(SetNote.self, note.id)?.tags == [tags[1]])
        #expect(try store.object(SetNote.self, note.id)?.title == "b")
        try await store.close()
    }
}
