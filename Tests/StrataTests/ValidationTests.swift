import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

@Suite("Validation: typed errors that name entity, object and attribute; nothing written")
struct ValidationTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let code: StoreError.Code
        let entity: String?
        let attribute: String?
        let body: @Sendable (Transaction, Fixture) throws -> Void
        var description: String { name }
    }

    struct Fixture: Sendable {
        let folder: ObjectID
        let note: ObjectID
        let tag: ObjectID
        let project: ObjectID
    }

    static let cases: [Case] = [
        Case(name: "unknown entity", code: .unknownEntity, entity: "Nope", attribute: nil) { tx, _ in try tx.insert("Nope", [:]) },
        Case(name: "unknown attribute", code: .unknownAttribute, entity: "Note", attribute: "colour") { tx, _ in try tx.insert("Note", ["colour": "red"]) },
        Case(name: "unknown attribute on update", code: .unknownAttribute, entity: "Note", attribute: "colour") { tx, f in try tx.update(f.note, ["colour": "red"]) },
        Case(name: "wrong type", code: .typeMismatch, entity: "Note", attribute: "rank") { tx, _ in try tx.insert("Note", ["rank": "three"]) },
        Case(name: "wrong type on update", code: .typeMismatch, entity: "Note", attribute: "pinned") { tx, f in try tx.update(f.note, ["pinned": 1]) },
        Case(name: "missing required value", code: .missingRequiredValue, entity: "Folder", attribute: "name") { tx, _ in try tx.insert("Folder", [:]) },
        Case(name: "required set to null", code: .missingRequiredValue, entity: "Folder", attribute: "name") { tx, f in try tx.update(f.folder, ["name": .null]) },
        Case(name: "insert of an existing ID", code: .objectExists, entity: "Note", attribute: nil) { tx, f in try tx.insert("Note", id: f.note, [:]) },
        Case(name: "to-one target that does not exist", code: .invalidReference, entity: "Note", attribute: "folder") { tx, _ in try tx.insert("Note", ["folder": .reference(ObjectID())]) },
        Case(name: "to-one target of the wrong entity", code: .invalidReference, entity: "Note", attribute: "folder") { tx, f in try tx.insert("Note", ["folder": .reference(f.tag)]) },
        Case(name: "to-many target that does not exist", code: .invalidReference, entity: "Note", attribute: "tags") { tx, f in try tx.add(f.note, "tags", ObjectID()) },
        Case(name: "to-many set through update", code: .typeMismatch, entity: "Note", attribute: "tags") { tx, f in try tx.update(f.note, ["tags": .reference(f.tag)]) },
        Case(name: "deny rule", code: .deleteDenied, entity: "Project", attribute: "tasks") { tx, f in try tx.delete(f.project) },
        Case(name: "update of a missing object", code: .objectNotFound, entity: nil, attribute: nil) { tx, _ in try tx.update(ObjectID(), ["title": "x"]) },
        Case(name: "an error after valid changes", code: .typeMismatch, entity: "Note", attribute: "rank") { tx, f in
            try tx.update(f.note, ["title": "changed"])
            try tx.insert("Folder", ["name": "new"])
            try tx.update(f.note, ["rank": 2.5])
        },
    ]

    @Test("Every validation error is typed, says where, and commits nothing", arguments: cases)
    func validationError(_ c: Case) async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let fixture = try await store.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "f"])
            let note = try tx.insert("Note", ["title": "n", "folder": .reference(folder)])
            let tag = try tx.insert("Tag", ["label": "t"])
            let project = try tx.insert("Project", ["name": "p"])
            try tx.insert("Task", ["project": .reference(project)])
            return Fixture(folder: folder, note: note, tag: tag, project: project)
        }
        let digest = store.digest()
        let position = store.segmentLog.nextPosition
        do {
            try await store.transaction { tx in try c.body(tx, fixture) }
            Issue.record("\(c.name): no error")
        } catch let error as StoreError {
            #expect(error.code == c.code, "\(error)")
            #expect(error.entity == c.entity, "\(error)")
            #expect(error.attribute == c.attribute, "\(error)")
            #expect(!error.description.isEmpty)
        }
        #expect(store.digest() == digest)
        #expect(store.segmentLog.nextPosition == position)
        #expect(store.object(fixture.note)?["title"] == "n")
        // The store goes on working.
        try await store.transaction { tx in try tx.update(fixture.note, ["title": "after"]) }
        #expect(store.object(fixture.note)?["title"] == "after")
    }

    @Test("Schemas are checked; the recorded schema only accepts additive changes")
    func schemaChecks() async throws {
        #expect(throws: StoreError.self) {
            try Schema.fromJSON(Data(#"{"entities":[{"name":"A","relationships":[{"name":"b","destination":"B"}]}]}"#.utf8))
        }
        #expect(throws: StoreError.self) {
            try Schema.fromJSON(Data(#"{"entities":[{"name":"A","attributes":[{"name":"x","type":"integer","default":"no"}]}]}"#.utf8))
        }
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "kept"]) }
        try await store.close()

        // Additive: a new entity and a new optional attribute.
        var newer = notesSchema
        newer.entities.append(Entity("Label", attributes: [Attribute("text", .string)]))
        newer.entities[1].attributes.append(Attribute("colour", .string))
        let upgraded = try await Store.open(at: dir.path, schema: newer, options: storeOptions())
        try await upgraded.transaction { tx in try tx.update(note, ["colour": "red"]) }
        try await upgraded.close()

        // The old app still opens it; it keeps (and shows) what it does not know.
        let old = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(old.object(note)?["colour"] == "red")
        #expect(old.schema.entity("Label") != nil)
        try await old.close()

        // Not additive: a type change.
        var breaking = notesSchema
        breaking.entities[1].attributes[0] = Attribute("title", .integer)
        do {
            _ = try await Store.open(at: dir.path, schema: breaking, options: storeOptions())
            Issue.record("a type change was accepted")
        } catch let error as StoreError {
            #expect(error.code == .incompatibleSchema)
            #expect(error.message.contains("Note.title"))
        }
    }
}
