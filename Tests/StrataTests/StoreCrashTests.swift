import Foundation
import Testing
@testable import Strata
@testable import StrataCore

/// Kills a child that commits multi-object transactions (Tools/store-crash-child) at random
/// moments: every transaction must be all or nothing, and every acknowledged one present.
/// Rounds: `STRATA_STORE_CRASH_ROUNDS` (default 40); seed: `STRATA_CRASH_SEED`.
@Suite("Store crash safety")
struct StoreCrashTests {
    @Test("A transaction killed mid-commit is all or nothing, and acknowledged ones survive")
    func killedCommitsAreAtomic() async throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = Int(environment["STRATA_STORE_CRASH_ROUNDS"] ?? "") ?? 40
        let seed = UInt64(environment["STRATA_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        var rng = SeededRandom(seed: seed)
        let child = try ChildProcess.executable("store-crash-child")
        let dir = StoreDirectory()
        let schema = Schema { Entity("Note", attributes: [Attribute("title", .string, optional: false), Attribute("index", .integer)]) }
        var acknowledged: [String: Int] = [:]
        for round in 0..<rounds {
            let lines = try ChildProcess.runAndKill(child, arguments: [dir.path, String(round + 1)],
                                                    after: UInt32.random(in: 20_000...150_000, using: &rng))
            for line in lines {
                let fields = line.split(separator: " ")
                if fields.first == "error" { Issue.record("round \(round) (seed \(seed)): child failed: \(line)") }
                if fields.count == 3, fields[0] == "ack", let count = Int(fields[2]) { acknowledged["b\(fields[1])n\(count)"] = count }
            }
            let store = try await Store.open(at: dir.path, schema: schema, options: StoreOptions(durability: .groupCommit))
            var counts: [String: Set<Int64>] = [:]
            for note in store.fetch("Note") {
                counts[note["title"].stringValue ?? "", default: []].insert(note["index"].integerValue ?? -1)
            }
            for (batch, indexes) in counts {
                // All or nothing: a present batch holds every one of its notes (its size is in its title).
                let size = batch.split(separator: "n").last.flatMap { Int64($0) } ?? -1
                #expect(indexes == Set(0..<size), "round \(round) (seed \(seed)): batch \(batch) is partial: \(indexes.sorted())")
            }
            for (batch, count) in acknowledged {
                #expect(counts[batch]?.count == count, "round \(round) (seed \(seed)): acknowledged batch \(batch) missing or partial")
            }
            try await store.close()
        }
        #expect(acknowledged.count > rounds, "seed \(seed): the child acknowledged too little to test anything")
    }
}
