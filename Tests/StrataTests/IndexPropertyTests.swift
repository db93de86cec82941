import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
@testable import StrataCore

/// Items belong to owners (cascade), so deleting an owner deletes items through the merge rule's
/// cascade, not through a delete of the item itself. The second version adds an attribute with a
/// default, which objects written before it read as that default.
private let indexSchemaV1 = Schema {
    Entity("Owner", attributes: [Attribute("group", .integer)],
           relationships: [Relationship("items", to: "Item", toMany: true, inverse: "owner", deleteRule: .cascade)])
    Entity("Item", attributes: [Attribute("group", .integer), Attribute("score", .double),
                                Attribute("name", .string, default: ""), Attribute("when", .date)],
           relationships: [Relationship("owner", to: "Owner", inverse: "items")])
    // Not indexed, and its objects take IDs of the items' pool: an ID deleted as one entity
    // and inserted as the other moves between indexed and unindexed.
    Entity("Tag", attributes: [Attribute("group", .integer)])
}

private let indexSchemaV2: Schema = {
    var schema = indexSchemaV1
    schema.entities[1].attributes.append(Attribute("level", .integer, default: .integer(3)))
    return schema
}()

private let indexesV1 = [
    AttributeIndex("Item", on: "group"),
    AttributeIndex("Item", on: "name", "score"),
    AttributeIndex("Item", on: "when"),
    AttributeIndex("Owner", on: "group"),
]
private let indexesV2 = indexesV1 + [AttributeIndex("Item", on: "level", "group")]

/// A random history over a small pool of objects, with random filters stated as data.
private struct IndexWorld {
    var rng: SeededRandom
    let owners = (0..<4).map { ObjectID(rawValue: 0x7100 + UInt128($0)) }
    let items = (0..<40).map { ObjectID(rawValue: 0x7200 + UInt128($0)) }
    var levels = false

    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &rng)] }
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }

    mutating func value(_ attribute: String) -> Value {
        if chance(8) { return .null }
        switch attribute {
        case "group", "level": return .integer(Int64.random(in: -2...4, using: &rng))
        case "score":
            if chance(5) { return .double(pick([.nan, .infinity, -.infinity, -0.0])) }
            return .double(Double(Int.random(in: -4...8, using: &rng)) / 2)
        case "name": return .string(pick(["", "a", "ab", "b", "B", "é", "e\u{301}", "zz"]))
        default: return .date(Int64.random(in: 0...6, using: &rng) * 1_000_000)
        }
    }

    var itemAttributes: [String] { levels ? ["group", "score", "name", "when", "level"] : ["group", "score", "name", "when"] }

    mutating func itemValues() -> [String: Value] {
        var values: [String: Value] = [:]
        for attribute in itemAttributes where chance(70) {
            let v = value(attribute)
            // `name` is not optional in effect: it has a default, and null is refused by validation.
            if attribute == "name" || attribute == "level", v == .null { continue }
            values[attribute] = v
        }
        return values
    }

    /// One random change; failures (a missing object, say) are the transaction's to ignore.
    mutating func change(_ tx: Transaction) {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 35 {
            let id = pick(items)
            var values = itemValues()
            if chance(50) { values["owner"] = .reference(pick(owners)) }
            _ = try? tx.insert("Item", id: id, values)
        } else if roll < 65 {
            _ = try? tx.update(pick(items), itemValues())
        } else if roll < 78 {
            _ = try? tx.delete(pick(items))
        } else if roll < 88 {
            _ = try? tx.insert("Owner", id: pick(owners), ["group": value("group")])
        } else if roll < 90 {
            _ = try? tx.delete(pick(owners))
        } else if roll < 94 {
            let id = pick(items)
            if chance(50) { _ = try? tx.delete(id) }
            _ = try? tx.insert("Tag", id: id, ["group": value("group")])
        } else {
            _ = try? tx.update(pick(owners), ["group": value("group")])
        }
    }

    mutating func bound(_ attribute: String) -> Value {
        // Now and then a bound of another kind than the attribute's, or null, or NaN.
        if chance(6) { return pick([.null, .double(.nan), .string("a"), .integer(1), .bool(true)]) }
        if attribute == "group" || attribute == "level", chance(15) { return .double(Double(Int.random(in: -4...8, using: &rng)) / 2) }
        return value(attribute)
    }

    mutating func leaf(_ attributes: [String]) -> Filter {
        let attribute = pick(attributes)
        switch Int.random(in: 0..<8, using: &rng) {
        case 0, 1: return .equal(attribute, bound(attribute))
        case 2: return .oneOf(attribute, (0..<Int.random(in: 0...3, using: &rng)).map { _ in bound(attribute) })
        case 3: return .less(attribute, bound(attribute))
        case 4: return .lessOrEqual(attribute, bound(attribute))
        case 5: return .greater(attribute, bound(attribute))
        case 6: return .greaterOrEqual(attribute, bound(attribute))
        default: return .between(attribute, bound(attribute), bound(attribute))
        }
    }

    mutating func filter(_ attributes: [String], depth: Int = 0) -> Filter {
        let roll = Int.random(in: 0..<10, using: &rng)
        if depth >= 2 || roll < 4 { return leaf(attributes) }
        if roll < 7 { return .all((0..<Int.random(in: 1...3, using: &rng)).map { _ in filter(attributes, depth: depth + 1) }) }
        if roll < 9 { return .any((0..<Int.random(in: 1...3, using: &rng)).map { _ in filter(attributes, depth: depth + 1) }) }
        return .not(filter(attributes, depth: depth + 1))
    }

    mutating func query() -> (entity: String, filter: Filter, sort: [SortKey], limit: Int?) {
        let entity = chance(70) ? "Item" : (chance(50) ? "Owner" : "Tag")
        let attributes = entity == "Item" ? itemAttributes : ["group"]
        let sort = (0..<Int.random(in: 0...2, using: &rng)).map { _ in SortKey(pick(attributes), ascending: chance(50)) }
        let limit: Int? = chance(50) ? Int.random(in: 0...8, using: &rng) : nil
        return (entity, filter(attributes), sort, limit)
    }
}

@Suite("Indexes")
struct IndexPropertyTests {
    /// Every planned fetch (index lookups, index-ordered walks) equals the same filter checked on
    /// every object, after local commits, rolled-back transactions, remote batches, cascades,
    /// a schema change from another replica, a reopen with another schema and more indexes, and
    /// a compaction; inside transactions too. Seeds as in the convergence properties
    /// (`STRATA_PROPERTY_SEED`, `STRATA_PROPERTY_RUNS`).
    @Test("Indexed fetches equal full scans for random data, queries and histories")
    func indexedEqualsScan() async throws {
        // Chunks of at most 4 entries: the few objects here split chunks, empty them and are
        // walked across them (the setting is only the index's shape, never its contents).
        SortedIndex.setChunkLimit(4)
        defer { SortedIndex.setChunkLimit(512) }
        let runs = ProcessInfo.processInfo.environment["STRATA_PROPERTY_RUNS"].flatMap(Int.init) ?? 4
        var seeds = propertySeeds()
        if ProcessInfo.processInfo.environment["STRATA_PROPERTY_SEED"] == nil { seeds = Array(seeds.prefix(runs)) }
        for seed in seeds {
            try await run(seed: seed)
        }
    }

    private func compare(_ store: Store, _ world: inout IndexWorld, seed: UInt64, step: Int, _ what: String) -> Bool {
        for _ in 0..<6 {
            let q = world.query()
            let planned = store.fetch(q.entity, matching: q.filter, sortedBy: q.sort, limit: q.limit)
            let filter = q.filter
            // The oracle reads every object (no sort, no limit: nothing an index could serve),
            // then sorts and cuts here.
            let scanned = oracle(store.fetch(q.entity, where: { filter.matches($0) }), q.sort, q.limit)
            let viewed = store.read { $0.fetch(q.entity, matching: q.filter, sortedBy: q.sort, limit: q.limit) }
            guard same(planned, scanned), same(viewed, scanned) else {
                Issue.record("seed \(seed), step \(step) (\(what)): \(q.entity) \(q.filter) sorted \(q.sort) limit \(String(describing: q.limit)): planned \(planned.map(\.id)), view \(viewed.map(\.id)), scan \(scanned.map(\.id))")
                return false
            }
        }
        return true
    }

    func run(seed: UInt64) async throws {
        var world = IndexWorld(rng: SeededRandom(seed: seed))
        let dirA = StoreDirectory(), dirB = StoreDirectory()
        var options = storeOptions()
        options.indexes = indexesV1
        var a = try await Store.open(at: dirA.path, schema: indexSchemaV1, options: options)
        // The other replica runs the second version from the start: its schema event reaches
        // this one with its first batch.
        let b = try await Store.open(at: dirB.path, schema: indexSchemaV2, options: storeOptions())
        for step in 0..<160 {
            let roll = Int.random(in: 0..<100, using: &world.rng)
            if roll < 45 {
                // A local transaction, compared half way through; one in five is rolled back.
                var inner = world
                do {
                    _ = try await a.transaction { tx -> Int in
                        var mismatch: String?
                        for _ in 0..<Int.random(in: 1...6, using: &inner.rng) { inner.change(tx) }
                        let q = inner.query()
                        let planned = tx.fetch(q.entity, matching: q.filter, sortedBy: q.sort, limit: q.limit)
                        let filter = q.filter
                        let scanned = oracle(tx.fetch(q.entity, where: { filter.matches($0) }), q.sort, q.limit)
                        if !same(planned, scanned) {
                            mismatch = "seed \(seed), step \(step) (in a transaction): \(q.entity) \(q.filter) sorted \(q.sort) limit \(String(describing: q.limit)): planned \(planned.map(\.id)), scan \(scanned.map(\.id))"
                        }
                        for _ in 0..<Int.random(in: 0...3, using: &inner.rng) { inner.change(tx) }
                        if let mismatch { throw IndexMismatch(message: mismatch) }
                        if inner.chance(20) { throw CancellationError() }
                        return 0
                    }
                } catch let mismatch as IndexMismatch {
                    Issue.record(Comment(rawValue: mismatch.message))
                    return
                } catch is CancellationError {
                    // Rolled back on purpose.
                }
                world = inner
            } else if roll < 75 {
                try await b.transaction { tx in
                    for _ in 0..<Int.random(in: 1...5, using: &world.rng) { world.change(tx) }
                }
            } else {
                try await a.applyRemote(try b.transactions().map(\.transaction))
                try await b.applyRemote(try a.transactions().map(\.transaction))
            }
            guard compare(a, &world, seed: seed, step: step, "after a commit") else { return }
            if step == 60 {
                try await a.compact()
                try await a.close()
                a = try await Store.open(at: dirA.path, schema: indexSchemaV1, options: options)
                guard compare(a, &world, seed: seed, step: step, "after a compaction and a reopen") else { return }
            }
            if step == 100 {
                // The app's second version, with an index on the attribute it adds.
                try await a.close()
                options.indexes = indexesV2
                a = try await Store.open(at: dirA.path, schema: indexSchemaV2, options: options)
                world.levels = true
                guard compare(a, &world, seed: seed, step: step, "after a reopen with the second version") else { return }
            }
        }
        #expect(a.count("Item") > 0, "seed \(seed): the history left no item to query")
        try await a.close()
        try await b.close()
    }

    private func oracle(_ all: [ObjectSnapshot], _ sort: [SortKey], _ limit: Int?) -> [ObjectSnapshot] {
        let sorted = all.sorted { Query.ordered($0, $1, by: sort) }
        return limit.map { Array(sorted.prefix($0)) } ?? sorted
    }

    /// Equal results, where a NaN equals a NaN (snapshots holding one never compare equal).
    private func same(_ a: [ObjectSnapshot], _ b: [ObjectSnapshot]) -> Bool {
        func key(_ s: ObjectSnapshot) -> String {
            s.id.description + s.values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        }
        return a.map(key) == b.map(key)
    }

    struct IndexMismatch: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
