import Foundation
import Testing
@testable import Strata

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
