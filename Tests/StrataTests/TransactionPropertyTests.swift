import Foundation
import Testing
import StrataTestSupport
@testable import Strata
@testable import StrataCore

/// Boxes cascade to their items; items have a box (to-one, stored on the item), tags (many-to-many,
/// stored on the item, nullified when a tag is deleted) and a `next` item that denies their delete
/// while it exists.
let transactionPropertySchema = Schema {
    Entity("Box", attributes: [Attribute("label", .string, default: "")],
           relationships: [Relationship("items", to: "Item", toMany: true, inverse: "box", deleteRule: .cascade)])
    Entity("Item", attributes: [Attribute("name", .string, default: ""), Attribute("size", .integer)],
           relationships: [Relationship("box", to: "Box", inverse: "items"),
                           Relationship("tags", to: "Tag", toMany: true, inverse: "items"),
                           Relationship("next", to: "Item", deleteRule: .deny)])
    Entity("Tag", attributes: [Attribute("label", .string, default: "")],
           relationships: [Relationship("items", to: "Item", toMany: true, inverse: "tags")])
}

/// One change a transaction can make, over a small pool of objects so that the same objects are
/// inserted, deleted and re-inserted again and again.
enum TransactionOp: CustomStringConvertible, Sendable {
    case insert(String, ObjectID, [String: Value])
    case update(ObjectID, [String: Value])
    case delete(ObjectID)
    case add(ObjectID, String, ObjectID)
    case remove(ObjectID, String, ObjectID)

    func run(_ tx: Transaction) throws {
        switch self {
        case .insert(let entity, let id, let values): try tx.insert(entity, id: id, values)
        case .update(let id, let values): try tx.update(id, values)
        case .delete(let id): try tx.delete(id)
        case .add(let id, let relationship, let target): try tx.add(id, relationship, target)
        case .remove(let id, let relationship, let target): try tx.remove(id, relationship, target)
        }
    }

    /// The op and the pool's names of its objects (`b0`, `i2`, `t1`).
    var description: String {
        func values(_ v: [String: Value]) -> String {
            v.sorted { $0.key < $1.key }.map { "\($0.key): \(ObjectPool.describe($0.value))" }.joined(separator: ", ")
        }
        switch self {
        case .insert(let entity, let id, let v): return "insert \(entity) \(ObjectPool.name(id)) [\(values(v))]"
        case .update(let id, let v): return "update \(ObjectPool.name(id)) [\(values(v))]"
        case .delete(let id): return "delete \(ObjectPool.name(id))"
        case .add(let id, let r, let t): return "add \(ObjectPool.name(id)).\(r) \(ObjectPool.name(t))"
        case .remove(let id, let r, let t): return "remove \(ObjectPool.name(id)).\(r) \(ObjectPool.name(t))"
        }
    }
}

/// The objects the test works on: IDs fixed per entity, named for printing.
enum ObjectPool {
    static let boxes = (0..<2).map { ObjectID(rawValue: 0x100 + UInt128($0)) }
    static let items = (0..<3).map { ObjectID(rawValue: 0x200 + UInt128($0)) }
    static let tags = (0..<2).map { ObjectID(rawValue: 0x300 + UInt128($0)) }
    static let all = boxes + items + tags

    static func entity(of id: ObjectID) -> String {
        boxes.contains(id) ? "Box" : items.contains(id) ? "Item" : "Tag"
    }

    static func name(_ id: ObjectID) -> String {
        if let i = boxes.firstIndex(of: id) { return "b\(i)" }
        if let i = items.firstIndex(of: id) { return "i\(i)" }
        if let i = tags.firstIndex(of: id) { return "t\(i)" }
        return id.description
    }

    static func describe(_ value: Value) -> String {
        if case .reference(let id) = value { return name(id) }
        return value.description
    }
}

/// What the operations mean, written as plainly as possible: per object whether it exists, its
/// attributes, where its references point and which tags it holds in its current life. What
/// readers see is derived from that (a reference or member whose target does not exist reads as
/// absent; a box's items and a tag's items are read from the items).
struct ExpectedStore {
    struct Object {
        var entity: String
        var exists = false
        var attributes: [String: Value] = [:]
        var box: ObjectID?
        var next: ObjectID?
        var tags: Set<ObjectID> = []
    }

    var objects: [ObjectID: Object] = [:]

    func exists(_ id: ObjectID) -> Bool { objects[id]?.exists ?? false }

    /// An existing object of `entity`, or `nil`.
    func existing(_ id: ObjectID, as entity: String) -> Object? {
        guard let object = objects[id], object.exists, object.entity == entity else { return nil }
        return object
    }

    static let attributeDefaults: [String: [String: Value]] = [
        "Box": ["label": .string("")], "Item": ["name": .string(""), "size": .null], "Tag": ["label": .string("")],
    ]
    static let attributeTypes: [String: AttributeType] = ["label": .string, "name": .string, "size": .integer]

    /// Applies `op`, returning the code of the error it must fail with (and then changes nothing).
    mutating func apply(_ op: TransactionOp) -> StoreError.Code? {
        switch op {
        case .insert(let entity, let id, let values):
            if exists(id) { return .objectExists }
            if let failure = checkValues(values, entity: entity, inserting: true) { return failure }
            var object = Object(entity: entity, exists: true)
            object.attributes = Self.attributeDefaults[entity] ?? [:]
            assign(values, to: &object)
            objects[id] = object  // a new life: the old one's members are gone
            return nil
        case .update(let id, let values):
            guard var object = objects[id], object.exists else { return .objectNotFound }
            if let failure = checkValues(values, entity: object.entity, inserting: false) { return failure }
            assign(values, to: &object)
            objects[id] = object
            return nil
        case .delete(let id):
            guard let object = objects[id], object.exists else { return .objectNotFound }
            var doomed: Set<ObjectID> = [id]
            if object.entity == "Box" {
                for (item, o) in objects where o.exists && o.entity == "Item" && o.box == id { doomed.insert(item) }
            }
            for item in doomed where objects[item]?.entity == "Item" {
                if let next = objects[item]?.next, existing(next, as: "Item") != nil, !doomed.contains(next) {
                    return .deleteDenied
                }
            }
            if object.entity == "Tag" {
                for (item, o) in objects where o.exists && o.entity == "Item" { objects[item]?.tags.remove(id) }
            }
            for gone in doomed { objects[gone]?.exists = false }
            return nil
        case .add(let id, let relationship, let target), .remove(let id, let relationship, let target):
            guard let object = objects[id], object.exists else { return .objectNotFound }
            let isAdd = if case .add = op { true } else { false }
            switch (object.entity, relationship) {
            case ("Item", "tags"):
                if isAdd {
                    guard existing(target, as: "Tag") != nil else { return .invalidReference }
                    objects[id]?.tags.insert(target)
                } else {
                    objects[id]?.tags.remove(target)
                }
            case ("Tag", "items"):
                if isAdd {
                    guard existing(target, as: "Item") != nil else { return .invalidReference }
                    objects[target]?.tags.insert(id)
                } else if exists(target) {
                    objects[target]?.tags.remove(id)
                }
            case ("Box", "items"):
                if isAdd {
                    guard existing(target, as: "Item") != nil else { return .invalidReference }
                    objects[target]?.box = id
                } else if exists(target), objects[target]?.box == id {
                    objects[target]?.box = nil
                }
            case ("Item", "box"), ("Item", "next"):
                return .typeMismatch
            default:
                return .unknownAttribute
            }
            return nil
        }
    }

    /// The first thing wrong with `values` for `entity`, in the order the store checks them:
    /// an insert checks every attribute, then the references in the schema's order; an update
    /// checks the values in the order it is given them.
    private func checkValues(_ values: [String: Value], entity: String, inserting: Bool) -> StoreError.Code? {
        for key in values.keys where Self.attributeDefaults[entity]?[key] == nil {
            if entity == "Item" && (key == "box" || key == "next") { continue }
            return entity == "Item" && key == "tags" || entity != "Item" && key == "items" ? .typeMismatch : .unknownAttribute
        }
        func check(_ key: String, _ value: Value) -> StoreError.Code? {
            if let type = Self.attributeTypes[key], Self.attributeDefaults[entity]?[key] != nil {
                return value != .null && value.attributeType != type ? .typeMismatch : nil
            }
            switch value {
            case .null: return nil
            case .reference(let target): return existing(target, as: key == "box" ? "Box" : "Item") == nil ? .invalidReference : nil
            default: return .typeMismatch
            }
        }
        let ordered: [(String, Value)]
        if inserting {
            let attributes = values.filter { Self.attributeTypes[$0.key] != nil }.map { ($0.key, $0.value) }
            ordered = attributes + ["box", "next"].compactMap { key in values[key].map { (key, $0) } }
        } else {
            ordered = values.map { ($0.key, $0.value) }
        }
        for (key, value) in ordered {
            if let failure = check(key, value) { return failure }
        }
        return nil
    }

    private func assign(_ values: [String: Value], to object: inout Object) {
        for (key, value) in values {
            let target: ObjectID? = if case .reference(let t) = value { t } else { nil }
            switch key {
            case "box": object.box = target
            case "next": object.next = target
            default: object.attributes[key] = value
            }
        }
    }

    /// What a reader sees: every existing object as the store's snapshot of it.
    func visible() -> [ObjectID: ObjectSnapshot] {
        var result: [ObjectID: ObjectSnapshot] = [:]
        let liveItems = objects.filter { $0.value.exists && $0.value.entity == "Item" }
        for (id, object) in objects where object.exists {
            var values = object.attributes
            var toMany: [String: [ObjectID]] = [:]
            switch object.entity {
            case "Item":
                values["box"] = object.box.flatMap { existing($0, as: "Box") != nil ? Value.reference($0) : nil } ?? .null
                values["next"] = object.next.flatMap { existing($0, as: "Item") != nil ? Value.reference($0) : nil } ?? .null
                toMany["tags"] = object.tags.filter { existing($0, as: "Tag") != nil }.sorted()
            case "Box":
                toMany["items"] = liveItems.filter { $0.value.box == id }.map(\.key).sorted()
            default:
                toMany["items"] = liveItems.filter { $0.value.tags.contains(id) }.map(\.key).sorted()
            }
            result[id] = ObjectSnapshot(id: id, entity: object.entity, values: values, toMany: toMany)
        }
        return result
    }
}

/// Random op sequences, mostly valid, with now and then one wrong thing (a missing object, a
/// reference of the wrong entity, a value of the wrong type, a to-one used as to-many).
struct TransactionOpGenerator {
    var rng: SeededGenerator

    mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
    mutating func pick<T>(_ options: [T]) -> T { options[Int(rng.next() % UInt64(options.count))] }

    mutating func reference(_ entity: String) -> Value {
        if chance(15) { return .null }
        if chance(5) { return .reference(pick(ObjectPool.all)) }  // perhaps of the wrong entity
        return .reference(pick(entity == "Box" ? ObjectPool.boxes : ObjectPool.items))
    }

    mutating func values(for entity: String, all: Bool) -> [String: Value] {
        var values: [String: Value] = [:]
        switch entity {
        case "Item":
            if all || chance(50) { values["name"] = .string(pick(["a", "b", "c"])) }
            if all || chance(40) { values["size"] = pick([.null, .integer(1), .integer(2)]) }
            if all || chance(40) { values["box"] = reference("Box") }
            if all || chance(30) { values["next"] = reference("Item") }
            if chance(3) { values["size"] = .string("big") }
        default:
            if all || chance(70) { values["label"] = .string(pick(["x", "y"])) }
            if chance(3) { values["label"] = .integer(1) }
        }
        if !all && values.isEmpty { values[entity == "Item" ? "name" : "label"] = .string("z") }
        // Leave some defaults to the schema on insert.
        if all && chance(30), let key = values.keys.sorted().first { values[key] = nil }
        return values
    }

    mutating func op() -> TransactionOp {
        let id = pick(ObjectPool.all)
        let entity = ObjectPool.entity(of: id)
        switch rng.next() % 100 {
        case 0..<25: return .insert(entity, id, values(for: entity, all: true))
        case 25..<45: return .update(id, values(for: entity, all: false))
        case 45..<65: return .delete(id)
        default:
            let relationship: String
            let target: ObjectID
            switch entity {
            case "Item":
                relationship = chance(95) ? "tags" : pick(["box", "next"])
                target = chance(95) ? pick(ObjectPool.tags) : pick(ObjectPool.all)
            default:
                relationship = "items"
                target = chance(95) ? pick(ObjectPool.items) : pick(ObjectPool.all)
            }
            return rng.next() % 100 < 55 ? .add(id, relationship, target) : .remove(id, relationship, target)
        }
    }

    mutating func transaction() -> [TransactionOp] {
        (0..<(1 + Int(rng.next() % 10))).map { _ in op() }
    }
}

/// Seeds: `STRATA_TX_PROPERTY_SEED` runs one seed; otherwise `STRATA_TX_PROPERTY_SEEDS` seeds
/// (default 400 scaled by `STRATA_SIM_SCALE`, see `SweepScale`, of 25 transactions each) from a
/// random base, printed on failure.
private func transactionPropertySeeds() -> [UInt64] {
    let environment = ProcessInfo.processInfo.environment
    if let seed = environment["STRATA_TX_PROPERTY_SEED"].flatMap(UInt64.init) { return [seed] }
    let runs = environment["STRATA_TX_PROPERTY_SEEDS"].flatMap(Int.init) ?? SweepScale.scaled(400)
    let base = UInt64.random(in: 1...UInt64.max / 2)
    return (0..<runs).map { base + UInt64($0) }
}

/// The visible state of the pool's objects in a store.
private func visibleState(_ store: Store) -> [ObjectID: ObjectSnapshot] {
    var result: [ObjectID: ObjectSnapshot] = [:]
    for id in ObjectPool.all { if let snapshot = store.object(id) { result[id] = snapshot } }
    return result
}

private func describe(_ state: [ObjectID: ObjectSnapshot]) -> String {
    state.sorted { $0.key < $1.key }.map { id, s in
        let values = s.values.sorted { $0.key < $1.key }.map { "\($0.key)=\(ObjectPool.describe($0.value))" }
        let members = s.toMany.sorted { $0.key < $1.key }.map { "\($0.key)=[\($0.value.map(ObjectPool.name).joined(separator: ","))]" }
        return "\(ObjectPool.name(id)) \(s.entity) " + (values + members).joined(separator: " ")
    }.joined(separator: "\n    ")
}

private func code(_ error: any Error) -> StoreError.Code {
    (error as? StoreError)?.code ?? StoreError.Code("not a StoreError: \(error)")
}

@Suite("Transactions mean what they say")
struct TransactionPropertyTests {
    static let transactionsPerSeed = 25

    /// Commits `ops` as one transaction (catching each op's error and going on, as an app may)
    /// and returns each op's error code.
    static func commitTogether(_ ops: [TransactionOp], to store: Store) async throws -> [StoreError.Code?] {
        try await store.transaction { tx in
            ops.map { op -> StoreError.Code? in
                do { try op.run(tx); return nil } catch { return code(error) }
            }
        }
    }

    /// Commits each op as a transaction of its own and returns each op's error code.
    static func commitSeparately(_ ops: [TransactionOp], to store: Store) async -> [StoreError.Code?] {
        var outcomes: [StoreError.Code?] = []
        for op in ops {
            do {
                try await store.transaction { tx in try op.run(tx) }
                outcomes.append(nil)
            } catch {
                outcomes.append(code(error))
            }
        }
        return outcomes
    }

    @Test("any sequence of inserts, updates, deletes, re-inserts, adds and removes commits in one transaction the same state, and the same errors, as one transaction per operation, and as a plain model of the rules says")
    func oneTransactionEqualsSeparateOnes() async throws {
        var transactions = 0
        var operations = 0
        for seed in transactionPropertySeeds() {
            let (t, o) = try await run(seed: seed)
            transactions += t
            operations += o
        }
        #expect(transactions >= Self.transactionsPerSeed)
        print("transaction property: \(transactions) random transactions of \(operations) operations")
    }

    /// One seed: fresh stores, `transactionsPerSeed` random transactions, and the stores reopened
    /// at the end (the log must mean what the projection showed). Returns the counts run.
    func run(seed: UInt64) async throws -> (transactions: Int, operations: Int) {
        let dir = StoreDirectory()
        var together = try await Store.open(at: dir.sub("together"), schema: transactionPropertySchema, options: storeOptions())
        var separate = try await Store.open(at: dir.sub("separate"), schema: transactionPropertySchema, options: storeOptions())
        var generator = TransactionOpGenerator(rng: SeededGenerator(seed: seed))
        var expected = ExpectedStore()
        var history: [[TransactionOp]] = []
        var operations = 0
        func failure(_ what: String) -> Comment {
            let ops = history.enumerated().map { "  tx \($0.offset): " + $0.element.map(\.description).joined(separator: "; ") }
            return Comment(rawValue: "seed \(seed) (STRATA_TX_PROPERTY_SEED=\(seed)): \(what)\n" + ops.joined(separator: "\n"))
        }
        for _ in 0..<Self.transactionsPerSeed {
            let ops = generator.transaction()
            history.append(ops)
            operations += ops.count
            let outcomesTogether = try await Self.commitTogether(ops, to: together)
            let outcomesSeparate = await Self.commitSeparately(ops, to: separate)
            let outcomesExpected = ops.map { expected.apply($0) }
            let want = expected.visible()
            let gotTogether = visibleState(together)
            let gotSeparate = visibleState(separate)
            guard outcomesTogether == outcomesExpected, outcomesSeparate == outcomesExpected,
                  gotTogether == want, gotSeparate == want else {
                let outcomes = "errors expected \(outcomesExpected), in one transaction \(outcomesTogether), separately \(outcomesSeparate)"
                Issue.record(failure("""
                    \(outcomes)
                    expected:
                        \(describe(want))
                    one transaction:
                        \(describe(gotTogether))
                    separate transactions:
                        \(describe(gotSeparate))
                    """))
                return (0, 0)
            }
        }
        // What the log holds gives the same state again.
        try await together.close()
        try await separate.close()
        together = try await Store.open(at: dir.sub("together"), schema: transactionPropertySchema, options: storeOptions())
        separate = try await Store.open(at: dir.sub("separate"), schema: transactionPropertySchema, options: storeOptions())
        let want = expected.visible()
        if visibleState(together) != want || visibleState(separate) != want {
            Issue.record(failure("after reopening:\n    \(describe(visibleState(together)))\n  separate:\n    \(describe(visibleState(separate)))\n  expected:\n    \(describe(want))"))
        }
        try await together.close()
        try await separate.close()
        return (Self.transactionsPerSeed, operations)
    }

    // MARK: Fixed cases

    /// Runs `ops` as one transaction and as separate ones on fresh stores, and returns the
    /// visible states (after checking they agree with each other and with the plain model).
    func check(_ ops: [TransactionOp], setup: [TransactionOp] = [], sourceLocation: SourceLocation = #_sourceLocation) async throws -> [ObjectID: ObjectSnapshot] {
        let dir = StoreDirectory()
        let together = try await Store.open(at: dir.sub("together"), schema: transactionPropertySchema, options: storeOptions())
        let separate = try await Store.open(at: dir.sub("separate"), schema: transactionPropertySchema, options: storeOptions())
        var expected = ExpectedStore()
        for op in setup {
            #expect(expected.apply(op) == nil, "setup \(op)", sourceLocation: sourceLocation)
            try await together.transaction { tx in try op.run(tx) }
            try await separate.transaction { tx in try op.run(tx) }
        }
        let outcomesTogether = try await Self.commitTogether(ops, to: together)
        let outcomesSeparate = await Self.commitSeparately(ops, to: separate)
        let outcomesExpected = ops.map { expected.apply($0) }
        #expect(outcomesTogether == outcomesExpected, sourceLocation: sourceLocation)
        #expect(outcomesSeparate == outcomesExpected, sourceLocation: sourceLocation)
        let state = visibleState(together)
        #expect(state == expected.visible(), "one transaction:\n\(describe(state))", sourceLocation: sourceLocation)
        #expect(visibleState(separate) == expected.visible(), sourceLocation: sourceLocation)
        try await together.close()
        try await separate.close()
        return state
    }

    static let box = ObjectPool.boxes[0]
    static let item = ObjectPool.items[0]
    static let item2 = ObjectPool.items[1]
    static let tag = ObjectPool.tags[0]

    @Test("delete, insert, delete of one object in one transaction leaves it deleted")
    func deleteInsertDelete() async throws {
        let state = try await check([.delete(Self.item), .insert("Item", Self.item, ["name": "again"]), .delete(Self.item)],
                                    setup: [.insert("Item", Self.item, ["name": "first"])])
        #expect(state[Self.item] == nil)
    }

    @Test("insert, delete, insert, delete, insert in one transaction leaves the last insert's values and no members of earlier lives")
    func insertDeleteRepeatedly() async throws {
        let state = try await check([
            .insert("Item", Self.item, ["name": "one"]), .add(Self.item, "tags", Self.tag), .delete(Self.item),
            .insert("Item", Self.item, ["name": "two"]), .delete(Self.item),
            .insert("Item", Self.item, ["name": "three"]),
        ], setup: [.insert("Tag", Self.tag, [:])])
        #expect(state[Self.item]?.values["name"] == "three")
        #expect(state[Self.item]?.toMany["tags"] == [])
    }

    @Test("a cascade delete, a re-insert of a cascaded object and a second cascade in one transaction delete it again")
    func cascadeTwice() async throws {
        let state = try await check([
            .delete(Self.box), .insert("Box", Self.box, [:]), .insert("Item", Self.item, ["box": .reference(Self.box)]),
            .delete(Self.box),
        ], setup: [.insert("Box", Self.box, [:]), .insert("Item", Self.item, ["box": .reference(Self.box)])])
        #expect(state.isEmpty)
    }

    @Test("a tag deleted, re-inserted and added again in one transaction holds only the new member")
    func nullifyThenReAdd() async throws {
        let state = try await check([
            .delete(Self.tag), .insert("Tag", Self.tag, [:]), .add(Self.tag, "items", Self.item2), .delete(Self.tag),
            .insert("Tag", Self.tag, [:]), .add(Self.item, "tags", Self.tag),
        ], setup: [.insert("Tag", Self.tag, [:]), .insert("Item", Self.item, [:]), .insert("Item", Self.item2, [:]),
                   .add(Self.item, "tags", Self.tag), .add(Self.item2, "tags", Self.tag)])
        #expect(state[Self.tag]?.toMany["items"] == [Self.item])
        #expect(state[Self.item2]?.toMany["tags"] == [])
    }

    @Test("a denied delete inside a cascade changes nothing, and the transaction goes on as before it")
    func deniedCascadeWritesNothing() async throws {
        // b0 holds i0 and i1; i1's next is i2, outside the box: deleting b0 is denied whatever
        // order the cascade visits its items in, and i0 must not be half-deleted.
        let i2 = ObjectPool.items[2]
        let state = try await check([.delete(Self.box), .update(Self.item, ["name": "kept"])], setup: [
            .insert("Box", Self.box, [:]), .insert("Item", i2, [:]),
            .insert("Item", Self.item, ["box": .reference(Self.box)]),
            .insert("Item", Self.item2, ["box": .reference(Self.box), "next": .reference(i2)]),
        ])
        #expect(state[Self.item]?.values["name"] == "kept")
        #expect(state[Self.box]?.toMany["items"] == [Self.item, Self.item2])
    }

    @Test("a deny rule whose object the same cascade deletes does not refuse it")
    func denyWithinTheCascade() async throws {
        let state = try await check([.delete(Self.box)], setup: [
            .insert("Box", Self.box, [:]), .insert("Item", Self.item2, ["box": .reference(Self.box)]),
            .insert("Item", Self.item, ["box": .reference(Self.box), "next": .reference(Self.item2)]),
            .update(Self.item2, ["next": .reference(Self.item)]),
        ])
        #expect(state.isEmpty)
    }

    @Test("an update after a delete and re-insert in one transaction applies to the new life only")
    func updateAfterReinsert() async throws {
        let state = try await check([
            .update(Self.item, ["size": 5]), .delete(Self.item), .update(Self.item, ["size": 6]),
            .insert("Item", Self.item, ["name": "new"]), .update(Self.item, ["size": 7]),
        ], setup: [.insert("Item", Self.item, ["name": "old"])])
        #expect(state[Self.item]?.values["size"] == 7)
        #expect(state[Self.item]?.values["name"] == "new")
    }
}
