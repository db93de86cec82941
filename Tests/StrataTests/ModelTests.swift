import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

struct NoteModel: StrataModel, Equatable {
    static let entityName = "Note"
    var id: ObjectID
    var title: String
    var body: String?
    var pinned: Bool
    var rank: Int?
    var due: Date?
    var blob: Data?
    var folder: ObjectID?
    var tags: [ObjectID] = []
}

struct FolderModel: StrataModel, Equatable {
    static let entityName = "Folder"
    var id: ObjectID
    var name: String
    var notes: [ObjectID] = []
}

@Suite("Typed access through Codable models")
struct ModelTests {
    @Test("Models insert, update, read back (dates to the microsecond) and fetch")
    func roundTrip() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let folder = FolderModel(id: ObjectID(), name: "Inbox")
        let due = Date(timeIntervalSince1970: 1_767_225_600.123456)
        var note = NoteModel(id: ObjectID(), title: "Hello", body: nil, pinned: true, rank: 2, due: due,
                             blob: Data([9, 8]), folder: folder.id)
        try await store.transaction { tx in
            try tx.insert(folder)
            try tx.insert(note)
        }
        let read = try #require(try store.object(NoteModel.self, note.id))
        #expect(read.title == "Hello")
        #expect(read.due.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded()) } == 1_767_225_600_123_456)
        #expect(read.blob == Data([9, 8]))
        #expect(read.folder == folder.id)
        #expect(try store.object(FolderModel.self, folder.id)?.notes == [note.id])

        note.title = "Changed"
        note.rank = nil
        try await store.transaction { tx in try tx.update(note) }
        #expect(try store.object(NoteModel.self, note.id)?.title == "Changed")
        #expect(try store.object(NoteModel.self, note.id)?.rank == nil)
        #expect(try store.fetch(NoteModel.self, where: { $0.pinned }).map(\.id) == [note.id])
    }

    @Test("saving a model writes only the fields that changed: one edited field is a one-field event, an unchanged model writes nothing, and with its original a field another device changed meanwhile is not written back")
    func updateWritesChangedFields() async throws {
        let p = try await Pair.make()
        var note = NoteModel(id: ObjectID(), title: "Hello", body: "text", pinned: false, rank: 1)
        try await p.a.transaction { tx in try tx.insert(note) }
        func lastEvents(_ store: Store) throws -> [Event] { try store.transactions().last?.transaction.events ?? [] }

        note.title = "Edited"
        try await p.a.transaction { tx in try tx.update(note) }
        let edit = try lastEvents(p.a)
        #expect(edit.count == 1)
        if case .update(_, _, let fields)? = edit.first?.change { #expect(Array(fields.keys) == ["title"]) } else { Issue.record("not an update: \(edit)") }

        let before = try p.a.transactions().count
        try await p.a.transaction { tx in try tx.update(note) }
        #expect(try p.a.transactions().count == before, "an unchanged model wrote a transaction")

        // b edits the rank; a, still holding the model it read, edits the body: both edits stay.
        try await p.exchange()
        let read = try #require(try p.a.object(NoteModel.self, note.id))
        let other = try #require(p.b.object(note.id))
        try await p.b.transaction { tx in try tx.update(other.id, ["rank": 7]) }
        try await p.exchange()
        var edited = read
        edited.body = "new text"
        try await p.a.transaction { tx in try tx.update(edited, from: read) }
        try await p.exchange()
        for store in [p.a, p.b] {
            let final = try #require(try store.object(NoteModel.self, note.id))
            #expect(final.rank == 7 && final.body == "new text" && final.title == "Edited")
        }
        try await p.a.close()
        try await p.b.close()
    }

    @Test("models round-trip every attribute type straight to values (no JSON): integer widths, Float, raw-value enums, dates to the microsecond, bytes, UUIDs, to-one and to-many; nil properties as null")
    func everyAttributeType() async throws {
        struct Full: StrataModel, Equatable {
            static let entityName = "Note"
            enum Kind: String, Codable { case memo, list }
            var id: ObjectID
            var title: String
            var body: Kind?
            var pinned: Bool
            var rank: Int32?
            var score: Float?
            var due: Date?
            var blob: Data?
            var ref: UUID?
            var folder: ObjectID?
            var tags: [ObjectID] = []
        }
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let folder = FolderModel(id: ObjectID(), name: "Inbox")
        let tag = try await store.transaction { tx in
            try tx.insert(folder)
            return try tx.insert("Tag", ["label": "t"])
        }
        var note = Full(id: ObjectID(), title: "Hello", body: .list, pinned: true, rank: -7, score: 1.5,
                        due: Date(timeIntervalSince1970: 1_767_225_600.000_001), blob: Data([0, 255]), ref: UUID(), folder: folder.id)
        try await store.transaction { tx in
            try tx.insert(note)
            try tx.add(note.id, "tags", tag)
        }
        note.tags = [tag]
        #expect(try store.object(Full.self, note.id) == note)
        let stored = try #require(store.object(note.id))
        #expect(stored["body"] == "list" && stored["rank"] == .integer(-7) && stored["score"] == .double(1.5))
        #expect(stored["due"] == .date(1_767_225_600_000_001))

        var cleared = note
        cleared.body = nil; cleared.rank = nil; cleared.score = nil; cleared.due = nil; cleared.blob = nil; cleared.ref = nil; cleared.folder = nil
        try await store.transaction { tx in try tx.update(cleared) }
        #expect(try store.object(Full.self, note.id) == cleared)
        #expect(store.object(note.id)?["rank"] == .null)

        // A stored value the property cannot hold is named, not truncated.
        try await store.transaction { tx in try tx.update(note.id, ["rank": .integer(1 << 40)]) }
        #expect { try store.object(Full.self, note.id) } throws: { error in
            (error as? StoreError)?.code == .encoding && "\(error)".contains("rank")
        }
        try await store.close()
    }

    @Test("a property of the wrong type, or a nested structure, is refused with the entity and property named")
    func refusedProperties() async throws {
        struct WrongType: StrataModel {
            static let entityName = "Note"
            var id: ObjectID
            var rank: String
        }
        struct Nested: StrataModel {
            static let entityName = "Note"
            struct Pair: Codable { var a = 1, b = 2 }
            var id: ObjectID
            var title: Pair
        }
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        await #expect { try await store.transaction { tx in try tx.insert(WrongType(id: ObjectID(), rank: "high")) } } throws: { error in
            let error = error as? StoreError
            return error?.code == .typeMismatch && error?.attribute == "rank" && error?.entity == "Note"
        }
        await #expect { try await store.transaction { tx in try tx.insert(Nested(id: ObjectID(), title: .init())) } } throws: { error in
            (error as? StoreError)?.code == .encoding && "\(error)".contains("nested")
        }
        #expect(store.fetch("Note").isEmpty, "nothing was written")
        try await store.close()
    }

    @Test("Schema(models:) collects the entities declared next to the models, and names a model that declares none or one of another name")
    func schemaFromModels() async throws {
        struct Declared: StrataModel {
            static let entityName = "Memo"
            static let entity: Entity? = Entity("Memo", attributes: [Attribute("text", .string, default: "")])
            var id: ObjectID
            var text: String
        }
        struct Misnamed: StrataModel {
            static let entityName = "Memo"
            static let entity: Entity? = Entity("Note")
            var id: ObjectID
        }
        let schema = try Schema(models: Declared.self)
        #expect(schema.entities.map(\.name) == ["Memo"])
        #expect { try Schema(models: Declared.self, NoteModel.self) } throws: { error in
            (error as? StoreError)?.code == .invalidSchema && "\(error)".contains("NoteModel declares no entity")
        }
        #expect { try Schema(models: Misnamed.self) } throws: { error in (error as? StoreError)?.code == .invalidSchema }
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: schema, options: storeOptions())
        let memo = Declared(id: ObjectID(), text: "hi")
        try await store.transaction { tx in try tx.insert(memo) }
        #expect(try store.object(Declared.self, memo.id)?.text == "hi")
        try await store.close()
    }

    @Test("A model with a property the schema does not know is refused by name")
    func unknownProperty() async throws {
        struct Odd: StrataModel {
            static let entityName = "Note"
            var id: ObjectID
            var colour: String
        }
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        do {
            try await store.transaction { tx in try tx.insert(Odd(id: ObjectID(), colour: "red")) }
            Issue.record("accepted an unknown property")
        } catch let error as StoreError {
            #expect(error.code == .unknownAttribute)
            #expect(error.attribute == "colour")
        }
    }
}
