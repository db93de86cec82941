import Foundation
import Synchronization
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// The versions of one app's `Person`, as a fleet runs them side by side.
enum PersonVersions {
    static let v1 = Schema {
        Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .string)])
    }
    static let v2 = Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "fullName", in: 2)]) {
        Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .string)])
    }
    static let v3 = Schema(version: 3, migrations: [
        .renameAttribute("Person", "name", to: "fullName", in: 2),
        .changeType("Person", "age", from: .string, to: .integer, in: 3),
    ]) {
        Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .integer)])
    }
    static let v4 = Schema(version: 4, migrations: v3.migrations + [
        .split("Person", "fullName", into: ["first", "last"], separator: " ", in: 4),
    ]) {
        Entity("Person", attributes: [
            Attribute("first", .string), Attribute("last", .string), Attribute("age", .integer),
            Attribute("nickname", .string, optional: false, default: "none"),
        ])
    }
}

/// Sends every transaction of `from` that `to` lacks, as sync does.
private func deliver(_ from: Store, to: Store) async throws {
    try await to.applyRemote(try from.transactions().map(\.transaction))
}

@Suite("Versioned schemas: renames, type changes, splits across a fleet")
struct SchemaMigrationTests {
    @Test("a rename keeps the stored key: version 1 and version 2 read and write the same field, each under its own name")
    func renameSharesTheField() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let old = try await Store.open(at: dirs.0.path, schema: PersonVersions.v1, options: storeOptions())
        let new = try await Store.open(at: dirs.1.path, schema: PersonVersions.v2, options: storeOptions())
        let id = try await old.transaction { tx in try tx.insert("Person", ["name": "Ada", "age": "36"]) }
        try await deliver(old, to: new)
        #expect(new.object(id)?["fullName"] == "Ada")
        #expect(new.object(id)?.values["name"] == nil, "the old name is not shown beside the new one")
        #expect(new.fetch("Person", where: { $0["fullName"] == "Ada" }).map(\.id) == [id])
        try await new.transaction { tx in try tx.update(id, ["fullName": "Ada Lovelace"]) }
        try await deliver(new, to: old)
        #expect(old.object(id)?["name"] == "Ada Lovelace")
        // The events carry the stored key: a tool without app code reads `name`.
        let lastEvent = try #require(try new.transactions().last?.transaction.events.last)
        guard case .update(_, _, let fields) = lastEvent.change else { Issue.record("expected an update, got \(lastEvent.change)"); return }
        #expect(Array(fields.keys) == ["name"])
        #expect(old.digest() == new.digest(), "both hold the same events")
        try await old.close()
        try await new.close()
    }

    @Test("a type change: each version reads the newest write in its own type, through both conversions; a value that does not convert reads as the default and stays stored")
    func typeChangeConvertsBothWays() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: PersonVersions.v1, options: storeOptions())
        let v3 = try await Store.open(at: dirs.1.path, schema: PersonVersions.v3, options: storeOptions())
        let id = try await v1.transaction { tx in try tx.insert("Person", ["name": "Ada", "age": "36"]) }
        try await deliver(v1, to: v3)
        #expect(v3.object(id)?["age"] == .integer(36))
        try await v3.transaction { tx in try tx.update(id, ["age": .integer(37)]) }
        try await deliver(v3, to: v1)
        #expect(v1.object(id)?["age"] == "37", "version 1 reads version 3's integer as its string")
        try await v1.transaction { tx in try tx.update(id, ["age": "38"]) }
        try await deliver(v1, to: v3)
        #expect(v3.object(id)?["age"] == .integer(38), "the newer write wins, whichever version made it")
        try await v1.transaction { tx in try tx.update(id, ["age": "thirty-nine"]) }
        try await deliver(v1, to: v3)
        #expect(v3.object(id)?["age"] == .null, "not an integer: version 3 reads its default")
        #expect(v1.object(id)?["age"] == "thirty-nine", "and version 1 keeps what it wrote")
        // An insert by version 3 is read by version 1.
        let other = try await v3.transaction { tx in try tx.insert("Person", ["fullName": "Grace", "age": .integer(85)]) }
        try await deliver(v3, to: v1)
        #expect(v1.object(other)?["name"] == "Grace")
        #expect(v1.object(other)?["age"] == "85")
        #expect(v1.digest() == v3.digest())
        try await v1.close()
        try await v3.close()
    }

    @Test("a split: version 4 reads first and last from version 1's name and version 1 reads them joined; an attribute added with a default reads as it")
    func splitAndJoin() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: PersonVersions.v1, options: storeOptions())
        let v4 = try await Store.open(at: dirs.1.path, schema: PersonVersions.v4, options: storeOptions())
        let id = try await v1.transaction { tx in try tx.insert("Person", ["name": "Ada Lovelace", "age": "36"]) }
        try await deliver(v1, to: v4)
        let read = try #require(v4.object(id))
        #expect(read["first"] == "Ada")
        #expect(read["last"] == "Lovelace")
        #expect(read["age"] == .integer(36), "through two steps: the rename and the type change")
        #expect(read["nickname"] == "none")
        try await v4.transaction { tx in try tx.update(id, ["last": "King"]) }
        try await deliver(v4, to: v1)
        #expect(v1.object(id)?["name"] == "Ada King", "version 1 reads the parts joined")
        try await v1.transaction { tx in try tx.update(id, ["name": "Grace Brewster Hopper"]) }
        try await deliver(v1, to: v4)
        #expect(v4.object(id)?["first"] == "Grace")
        #expect(v4.object(id)?["last"] == "Brewster Hopper", "the last part takes the rest")
        try await v1.close()
        try await v4.close()
    }

    @Test("an entity rename: each version fetches, inserts and observes under its own name, the objects are the same")
    func entityRename() async throws {
        let old = Schema { Entity("Note", attributes: [Attribute("text", .string)]) }
        let new = Schema(version: 2, migrations: [.renameEntity("Note", to: "Memo", in: 2), .renameAttribute("Memo", "text", to: "body", in: 2)]) {
            Entity("Memo", attributes: [Attribute("body", .string)])
        }
        let dirs = (StoreDirectory(), StoreDirectory())
        let v1 = try await Store.open(at: dirs.0.path, schema: old, options: storeOptions())
        let v2 = try await Store.open(at: dirs.1.path, schema: new, options: storeOptions())
        var changes = v2.changes().makeAsyncIterator()
        let id = try await v1.transaction { tx in try tx.insert("Note", ["text": "hello"]) }
        try await deliver(v1, to: v2)
        #expect(v2.fetch("Memo").map(\.id) == [id])
        #expect(v2.object(id)?.entity == "Memo")
        #expect(v2.object(id)?["body"] == "hello")
        #expect(v2.count("Memo") == 1)
        let seen = try #require(try await changes.next())
        #expect(seen.changes.contains { $0.entity == "Memo" && $0.id == id }, "observers see the app's entity name: \(seen.changes)")
        try await v2.transaction { tx in
            try tx.update(id, ["body": "hello again"])
            _ = try tx.insert("Memo", ["body": "second"])
        }
        try await deliver(v2, to: v1)
        #expect(v1.fetch("Note").count == 2)
        #expect(v1.object(id)?["text"] == "hello again")
        try await v1.close()
        try await v2.close()
    }

    @Test("the log records stored names, the version and the steps; reopened without app code the store reads stored names, and JSON round-trips (an unknown step kind is kept, not applied)")
    func recordedForTools() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: PersonVersions.v4, options: storeOptions())
        try await store.close()
        let reader = try Store.open(at: dir.path, options: storeOptions())
        let recorded = reader.schema
        #expect(recorded.version == 4)
        #expect(recorded.migrations == PersonVersions.v4.migrations)
        #expect(Set(recorded.entity("Person")?.attributes.map(\.name) ?? []) == ["first@4", "last@4", "age@3", "nickname"])
        try await reader.close()

        let json = PersonVersions.v4.jsonData()
        #expect(try Schema.fromJSON(json) == PersonVersions.v4)
        let future = Data(#"{"entities": [], "version": 9, "migrations": [{"version": 9, "kind": "teleport", "entity": "X"}]}"#.utf8)
        let decoded = try Schema.fromJSON(future)
        #expect(decoded.migrations.map(\.change) == [.unrecognized(kind: "teleport")])
        // Written back whole, so that a Strata that knows the kind reads it as it was.
        let again = String(decoding: decoded.jsonData(), as: UTF8.self)
        #expect(again.contains(#"{"entity":"X","kind":"teleport","version":9}"#), "\(again)")
        // A schema without versions encodes as before (logs and fixtures stay byte for byte).
        #expect(String(decoding: PersonVersions.v1.jsonData(), as: UTF8.self).contains("version") == false)
    }

    @Test("opening refuses an app whose shipped steps differ from those the store recorded, and a step leading to a name the schema does not declare")
    func shippedStepsAreKept() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: PersonVersions.v3, options: storeOptions())
        try await store.close()
        // Version 3 again, its version-2 rename dropped: fullName would be a new, empty field.
        let dropped = Schema(version: 3, migrations: [.changeType("Person", "age", from: .string, to: .integer, in: 3)]) {
            Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .integer)])
        }
        let refusal = await #expect(throws: StoreError.self) { try await Store.open(at: dir.path, schema: dropped, options: storeOptions()) }
        #expect(refusal?.code == .incompatibleSchema)
        #expect(refusal?.message.contains("recorded, not the app's: v2: Person.name renamed fullName") == true, "\(String(describing: refusal?.message))")
        // An older version (its steps a prefix of the recorded ones) and a newer one still open.
        try await Store.open(at: dir.path, schema: PersonVersions.v2, options: storeOptions()).close()
        try await Store.open(at: dir.path, schema: PersonVersions.v4, options: storeOptions()).close()

        let misspelled = Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "fullname", in: 2)]) {
            Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .string)])
        }
        #expect(misspelled.problems().contains { $0.contains("it leads to Person.fullname, which the schema does not declare") }, "\(misspelled.problems())")
        let unraised = Schema(entities: PersonVersions.v2.entities, version: 1, migrations: PersonVersions.v2.migrations)
        #expect(unraised.problems().contains { $0.contains("raise Schema.version to 2") }, "\(unraised.problems())")
    }

    @Test("typed models under a versioned schema: version 1's model and version 2's (a renamed property) read and write the same objects")
    func typedModels() async throws {
        struct PersonV1: StrataModel, Equatable {
            static let entityName = "Person"
            static let entity: Entity? = Entity("Person", attributes: [Attribute("name", .string, optional: false, default: "")])
            var id: ObjectID
            var name: String
        }
        struct PersonV2: StrataModel, Equatable {
            static let entityName = "Person"
            static let entity: Entity? = Entity("Person", attributes: [Attribute("displayName", .string, optional: false, default: "")])
            var id: ObjectID
            var displayName: String
        }
        let dirs = (StoreDirectory(), StoreDirectory())
        let old = try await Store.open(at: dirs.0.path, schema: try Schema(models: PersonV1.self), options: storeOptions())
        let new = try await Store.open(at: dirs.1.path, schema: try Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "displayName", in: 2)],
                                                                             models: PersonV2.self), options: storeOptions())
        let ada = PersonV1(id: ObjectID(), name: "Ada")
        try await old.transaction { tx in try tx.insert(ada) }
        try await deliver(old, to: new)
        #expect(try new.fetch(PersonV2.self) == [PersonV2(id: ada.id, displayName: "Ada")])
        try await new.transaction { tx in try tx.update(PersonV2(id: ada.id, displayName: "Ada Lovelace")) }
        try await deliver(new, to: old)
        #expect(try old.object(PersonV1.self, ada.id) == PersonV1(id: ada.id, name: "Ada Lovelace"))
        try await old.close()
        try await new.close()
    }

    @Test("a move to another zone (one event writing every representation) keeps the newest value in every version")
    func moveKeepsTheNewest() async throws {
        let dir = StoreDirectory()
        var db = try await Database.open(at: dir.path, schema: PersonVersions.v1)
        let id = try await db.transaction { tx in try tx.insert("Person", ["name": "Ada", "age": "42"]) }
        try await db.close()
        db = try await Database.open(at: dir.path, schema: PersonVersions.v3)
        try await db.transaction { tx in try tx.update(id, ["age": .integer(41)]) }
        let work = ZoneReference("work")
        try await db.addZone(work)
        try await db.move(id, to: work)
        #expect(db.zone(of: id) == work)
        #expect(db.object(id)?["age"] == .integer(41))
        #expect(db.object(id)?["fullName"] == "Ada")
        try await db.close()
        db = try await Database.open(at: dir.path, schema: PersonVersions.v1)
        #expect(db.object(id)?["age"] == "41", "version 1 reads the newest age after the move, not its own older one")
        #expect(db.object(id)?["name"] == "Ada")
        try await db.close()
    }

    @Test("a move widening the destination's schema works after an insert of the same entity in one transaction, and a rolled-back one leaves the destination's schema as it was")
    func moveWideningAndRollback() async throws {
        let dir = StoreDirectory()
        var db = try await Database.open(at: dir.path, schema: PersonVersions.v1)
        let id = try await db.transaction { tx in try tx.insert("Person", ["name": "Ada", "age": "42"]) }
        try await db.close()
        db = try await Database.open(at: dir.path, schema: PersonVersions.v3)
        let work = ZoneReference("work")
        let workStore = try await db.addZone(work)
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await db.transaction { tx in
                try tx.move(id, to: work)
                throw Abort()
            }
        }
        #expect(workStore.schema.entity("Person")?.attribute("age") == nil, "a rolled-back move widened the destination's schema")
        #expect(db.zone(of: id) == ZoneReference("default"))
        try await db.transaction { tx in
            _ = try tx.insert("Person", ["fullName": "Grace", "age": .integer(85)], in: work)
            try tx.move(id, to: work)
        }
        #expect(db.zone(of: id) == work)
        #expect(db.object(id)?["age"] == .integer(42))
        try await db.close()
    }

    @Test("another device's recorded steps do not keep this app from opening its store")
    func othersStepsDoNotBlock() async throws {
        let dirs = (StoreDirectory(), StoreDirectory())
        let other = try await Store.open(at: dirs.1.path, schema: .empty, options: storeOptions())
        let junk = Schema(entities: PersonVersions.v1.entities, version: 2, migrations: [.deprecate("Person", "age", in: 2)])
        try await other.transaction { tx in try tx.recordSchema(junk.stored) }
        var mine = try await Store.open(at: dirs.0.path, schema: PersonVersions.v1, options: storeOptions())
        try await deliver(other, to: mine)
        try await mine.close()
        // An additive update of version 1 records its schema: its own, not the merge with the junk.
        var added = PersonVersions.v1
        added.entities[0].attributes.append(Attribute("email", .string))
        mine = try await Store.open(at: dirs.0.path, schema: added, options: storeOptions())
        try await mine.close()
        mine = try await Store.open(at: dirs.0.path, schema: PersonVersions.v2, options: storeOptions())
        try await mine.close()
        try await other.close()
    }

    @Test("a hostile recorded schema (two splits of one attribute, entities and fields named like stored keys) neither loops nor crashes a reader")
    func hostileLineage() async throws {
        let hostile = Schema(entities: [Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .string), Attribute("a@99", .string)])],
                             version: 99, migrations: [
                                .split("Person", "name", into: ["a", "b"], separator: " ", in: 99),
                                .split("Person", "name", into: ["a", "c"], separator: " ", in: 99),
                                .merge("Person", ["a", "b"], into: "name", separator: " ", in: 99),
                             ])
        let dirs = (StoreDirectory(), StoreDirectory())
        let victim = try await Store.open(at: dirs.0.path, schema: PersonVersions.v1, options: storeOptions())
        let id = try await victim.transaction { tx in try tx.insert("Person", ["name": "Ada Lovelace", "age": "3"]) }
        // The hostile device records its schema (as it would through sync: unchecked).
        let attacker = try await Store.open(at: dirs.1.path, schema: .empty, options: storeOptions())
        try await attacker.transaction { tx in try tx.recordSchema(hostile.stored) }
        try await deliver(attacker, to: victim)
        #expect(victim.object(id)?["age"] == "3")
        #expect(victim.object(id)?["name"] != nil)
        #expect(victim.fetch("Person").count == 1)
        try await victim.close()
        try await attacker.close()

        let twoAsOne = Schema(version: 3, migrations: [.renameEntity("Person", to: "Contact", in: 2)]) {
            Entity("Contact", attributes: [Attribute("name", .string)])
            Entity("Person", attributes: [Attribute("name", .string)])
        }
        #expect(twoAsOne.problems().contains { $0.contains("entities Person and Contact are both stored as Person") }, "\(twoAsOne.problems())")
    }

    @Test("a version-1 store that has never seen a migration reads as before: no view, the same digest")
    func noViewWithoutMigrations() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: PersonVersions.v1, options: storeOptions())
        #expect(store.core.withLock { $0.projection.view == nil })
        try await store.close()
    }
}

@Suite("strata schema check: what is safe to ship to a fleet running the old version")
struct SchemaFleetCheckTests {
    func errors(_ old: Schema, _ new: Schema) -> [String] {
        new.fleetFindings(from: old).filter { $0.severity == .error }.map { "\($0.subject): \($0.message)" }
    }

    func warnings(_ old: Schema, _ new: Schema) -> [String] {
        new.fleetFindings(from: old).filter { $0.severity == .warning }.map { "\($0.subject): \($0.message)" }
    }

    @Test("safe: additions, a declared rename, a type change, a split, a deprecation; a lossy conversion is a warning")
    func safeChanges() {
        #expect(errors(PersonVersions.v1, PersonVersions.v2).isEmpty)
        #expect(errors(PersonVersions.v2, PersonVersions.v3).isEmpty)
        #expect(errors(PersonVersions.v1, PersonVersions.v4).isEmpty)
        #expect(errors(PersonVersions.v3, PersonVersions.v4).isEmpty)
        let warned = warnings(PersonVersions.v2, PersonVersions.v3)
        #expect(warned.count == 1 && warned[0].contains("some string values have no integer value"), "\(warned)")
        let added = Schema { Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .string), Attribute("email", .string)]) }
        #expect(errors(PersonVersions.v1, added).isEmpty)
        let deprecated = Schema(version: 2, migrations: [.deprecate("Person", "age", in: 2)]) { Entity("Person", attributes: [Attribute("name", .string)]) }
        #expect(errors(PersonVersions.v1, deprecated).isEmpty)
    }

    @Test("unsafe, each with its message")
    func unsafeChanges() {
        let v1 = PersonVersions.v1
        func only(_ new: Schema, _ expected: String, from old: Schema = PersonVersions.v1) {
            let found = errors(old, new)
            #expect(found.count == 1 && found.first?.contains(expected) == true, "expected one error containing \"\(expected)\", got \(found)")
        }
        // A rename without a migration: a remove plus an add.
        only(Schema { Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .string)]) },
             "Person.name: the attribute is gone without a migration")
        // A type change without a migration.
        only(Schema { Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .integer)]) },
             "type changed from string to integer")
        // A new required attribute without a default.
        only(Schema { Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .string), Attribute("email", .string, optional: false)]) },
             "a new attribute must be optional or have a default")
        // An entity dropped.
        only(Schema { Entity("Animal", attributes: [Attribute("name", .string)]) }, "Person: the entity is gone without a migration")
        // A step naming what the old version does not have.
        only(Schema(version: 2, migrations: [.renameAttribute("Person", "nmae", to: "fullName", in: 2)]) {
            Entity("Person", attributes: [Attribute("fullName", .string), Attribute("name", .string), Attribute("age", .string)])
        }, "the version before it has no Person.nmae")
        // The old steps rewritten.
        let rewritten = Schema(version: 3, migrations: [.renameAttribute("Person", "name", to: "displayName", in: 2), .changeType("Person", "age", from: .string, to: .integer, in: 3)]) {
            Entity("Person", attributes: [Attribute("displayName", .string), Attribute("age", .integer)])
        }
        only(rewritten, "the old version's steps are not kept as they were", from: PersonVersions.v2)
        // A new step at an old version.
        let late = Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "fullName", in: 2), .deprecate("Person", "age", in: 2)]) {
            Entity("Person", attributes: [Attribute("fullName", .string)])
        }
        only(late, "a new step needs a version above the old one's (2)", from: PersonVersions.v2)
        // A type change with no conversion is not even a valid schema.
        let noConversion = Schema(version: 2, migrations: [.changeType("Person", "age", from: .string, to: .bytes, in: 2)]) {
            Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .bytes)])
        }
        only(noConversion, "there is no conversion from string to bytes")
        // Splitting a non-string.
        let numbers = Schema { Entity("Person", attributes: [Attribute("name", .string), Attribute("age", .integer)]) }
        let splitNumber = Schema(version: 2, migrations: [.split("Person", "age", into: ["a", "b"], separator: "-", in: 2)]) {
            Entity("Person", attributes: [Attribute("name", .string), Attribute("a", .string), Attribute("b", .string)])
        }
        only(splitNumber, "only a string attribute splits (this one is of type integer)", from: numbers)
        #expect(errors(v1, v1).isEmpty)
    }

    @Test("a store refuses to open with a schema whose steps are not valid")
    func invalidStepsRefused() async throws {
        let dir = StoreDirectory()
        let collide = Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "fullName", in: 2)]) {
            Entity("Person", attributes: [Attribute("fullName", .string), Attribute("name", .string)])
        }
        await #expect(throws: StoreError.self) { try await Store.open(at: dir.path, schema: collide, options: storeOptions()) }
        #expect(collide.problems().contains { $0.contains("are both stored as name") }, "\(collide.problems())")
    }
}
