import Foundation
@testable import Strata
@testable import StrataCore

/// Random but valid transactions against a store's current view: inserts, field updates,
/// deletes (with their delete rules), relationship changes, re-inserts of deleted IDs. Shared by
/// the convergence and compaction properties.
struct RandomHistory {
    var rng: SeededRandom
    /// Every ID any replica has created, per entity (a replica only touches those it can see).
    var ids: [String: [ObjectID]] = ["Folder": [], "Note": [], "Tag": []]

    init(seed: UInt64) { rng = SeededRandom(seed: seed) }

    mutating func pick<T>(_ items: [T]) -> T? {
        items.isEmpty ? nil : items[Int(rng.next() % UInt64(items.count))]
    }

    mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    /// One transaction of 1–3 operations; returns false when it was invalid and rolled back.
    @discardableResult
    mutating func step(_ store: Store) async -> Bool {
        var plan: [Int] = []
        for _ in 0..<(1 + rng.next() % 3) { plan.append(Int(rng.next() % 100)) }
        let picks = (0..<12).map { _ in rng.next() }
        let known = ids
        do {
            let created = try await store.transaction { tx -> [(String, ObjectID)] in
                var created: [(String, ObjectID)] = []
                var p = 0
                func next() -> UInt64 { p += 1; return picks[p % picks.count] }
                func visible(_ entity: String) -> [ObjectID] { (known[entity] ?? []).filter { tx.exists($0) } + created.filter { $0.0 == entity && tx.exists($0.1) }.map(\.1) }
                func choose(_ entity: String) -> ObjectID? { let v = visible(entity); return v.isEmpty ? nil : v[Int(next() % UInt64(v.count))] }
                for op in plan {
                    switch op {
                    case 0..<10:
                        created.append(("Folder", try tx.insert("Folder", ["name": .string("f\(next() % 5)")])))
                    case 10..<25:
                        var values: [String: Value] = ["title": .string("t\(next() % 7)"), "rank": .integer(Int64(next() % 10)), "draft": "local"]
                        if let folder = choose("Folder"), next() % 2 == 0 { values["folder"] = .reference(folder) }
                        created.append(("Note", try tx.insert("Note", values)))
                    case 25..<32:
                        created.append(("Tag", try tx.insert("Tag", ["label": .string("l\(next() % 4)")])))
                    case 32..<55:
                        if let note = choose("Note") {
                            try tx.update(note, next() % 2 == 0 ? ["title": .string("u\(next() % 7)")] : ["rank": .integer(Int64(next() % 10)), "pinned": .bool(next() % 2 == 0)])
                        }
                    case 55..<65:
                        if let entity = ["Folder", "Note", "Tag"][Int(next() % 3)] as String?, let victim = choose(entity) { try tx.delete(victim) }
                    case 65..<78:
                        if let note = choose("Note"), let tag = choose("Tag") { try tx.add(note, "tags", tag) }
                    case 78..<86:
                        if let note = choose("Note"), let tag = tx.related(note, "tags").first { try tx.remove(note, "tags", tag) }
                    case 86..<94:
                        if let note = choose("Note") { try tx.set(note, "folder", choose("Folder").map(Value.reference) ?? .null) }
                    default:
                        // Insert after delete: bring back an ID this replica sees as deleted.
                        let gone = (known["Note"] ?? []).filter { !tx.exists($0) }
                        if !gone.isEmpty { try tx.insert("Note", id: gone[Int(next() % UInt64(gone.count))], ["title": "again"]) }
                    }
                }
                return created
            }
            for (entity, id) in created where !(ids[entity]?.contains(id) ?? false) { ids[entity, default: []].append(id) }
            return true
        } catch {
            return false
        }
    }
}
