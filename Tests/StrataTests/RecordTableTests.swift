import Foundation
@testable import StrataCore
import StrataTestSupport
import Testing

/// The projection's record table (packed records and a hash index of positions, removals that
/// move the last record into the hole) against a dictionary, for random inserts, updates,
/// removals and lookups — also through growth and with IDs that share their hash bucket.
@Suite("Record table")
struct RecordTableTests {
    @Test("holds exactly what a dictionary holds, through random inserts, updates, removals and growth (seeded)")
    func matchesADictionary() {
        for seed in propertySeeds() {
            var rng = SeededGenerator(seed: seed)
            var table = RecordTable()
            var model: [ObjectID: ObjectRecord] = [:]
            // A small pool of IDs, so that removed IDs come back and probes run into each other.
            let pool = (0..<600).map { _ in ObjectID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
            if Bool.random(using: &rng) { table.reserveCapacity(Int.random(in: 0...700, using: &rng)) }
            for step in 0..<6_000 {
                let id = pool[Int.random(in: 0..<pool.count, using: &rng)]
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<3:
                    let record = ObjectRecord(entity: UInt32(step))
                    table[id] = record
                    model[id] = record
                case 3..<5:
                    // A new object's insert: one lookup, then the record put where it found room —
                    // sometimes after another insert made that slot stale (the table may have grown).
                    let record = ObjectRecord(entity: UInt32(step))
                    let slot = table.slot(of: id)
                    if Bool.random(using: &rng) {
                        let other = pool[Int.random(in: 0..<pool.count, using: &rng)]
                        if other != id, table[other] == nil {
                            table[other] = ObjectRecord(entity: 0)
                            model[other] = ObjectRecord(entity: 0)
                        }
                    }
                    if slot.position == nil {
                        table.insert(id, record, at: slot)
                    } else {
                        table[id] = record
                    }
                    model[id] = record
                case 5..<7:
                    #expect(table.removeValue(forKey: id) == model.removeValue(forKey: id), "seed \(seed), step \(step): removing \(id)")
                case 7:
                    table[id] = nil
                    model[id] = nil
                default:
                    if let position = table.position(of: id) { table[position: position].batch &+= 1 }
                    model[id]?.batch &+= 1
                }
                guard table.count == model.count, table[id] == model[id] else {
                    Issue.record("seed \(seed), step \(step): \(id) is \(String(describing: table[id])) in the table, \(String(describing: model[id])) in the dictionary (counts \(table.count), \(model.count))")
                    return
                }
            }
            let listed = Dictionary(table.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            #expect(listed == model, "seed \(seed): the table's records differ from the dictionary's")
            #expect(table.count == model.count && Set(table.keys) == Set(model.keys), "seed \(seed)")
            for id in pool { #expect(table[id] == model[id], "seed \(seed): \(id)") }
        }
    }

    @Test("an ID read from 16 bytes in place equals the one read from the same bytes as a collection")
    func identifierFromRawBytes() {
        for seed in propertySeeds() {
            var rng = SeededGenerator(seed: seed)
            for _ in 0..<200 {
                let bytes = (0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let generic = ObjectID(bytes: bytes.lazy.map { $0 })
                let inPlace = bytes.withUnsafeBytes { ObjectID(bytes: $0) }
                #expect(inPlace == generic, "seed \(seed): \(bytes)")
                if bytes.count >= 16 { #expect(inPlace.bytes == Array(bytes.prefix(16)), "seed \(seed)") }
            }
        }
    }
}
