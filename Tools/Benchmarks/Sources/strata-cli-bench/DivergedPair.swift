import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog

/// Two device stores for the CLI benchmark: A authors `objects` inserts and enough single-field
/// updates to reach `events`, in transactions of 100 events; B is another device that applied all
/// of it (one record per transaction, as sync would store it); then each makes 1 000 offline
/// updates the other lacks.
enum DivergedPair {
    static let schema = Schema {
        Entity("Item", attributes: [
            Attribute("name", .string, default: ""),
            Attribute("count", .integer),
            Attribute("score", .double),
            Attribute("done", .bool, default: false),
        ])
    }

    struct Built {
        var a: String
        var b: String
        var eventsA: Int
        var eventsB: Int
        var seconds: Double
    }

    static func build(in directory: String, events: Int, objects: Int) async throws -> Built {
        let started = monotonicNanos()
        let pathA = directory + "/device-a"
        let pathB = directory + "/device-b"
        // No automatic compaction: the CLI rows read (verify, inspect, diff) and replay the whole
        // 1 M-event history from the log, and one row compacts explicitly to measure `verify` after
        // a compaction; with the default, both stores would compact every 100,000 events while
        // they are built and the CLI would find mostly snapshots.
        var options = StoreOptions(durability: .buffered)
        options.autoCompaction = .disabled
        let a = try await Store.open(at: pathA, schema: schema, options: options)
        let b = try await Store.open(at: pathB, schema: schema, options: options)
        var rng = SplitMix64(seed: 0xC11)
        var ids: [ObjectID] = []
        ids.reserveCapacity(objects)
        let perTransaction = 100
        var written = 0
        var shipped = 0
        func ship() async throws {
            // A's new transactions to B, one applyRemote (one record) each.
            let fresh = try a.transactions(from: UInt64(shipped)).map(\.transaction)
            for transaction in fresh { _ = try await b.applyRemote([transaction]) }
            shipped += fresh.count
        }
        while written < events - 2_000 {
            let count = min(perTransaction, events - 2_000 - written)
            try await a.transaction { tx in
                for _ in 0..<count {
                    if ids.count < objects {
                        ids.append(try tx.insert("Item", ["name": .string("item-\(ids.count)"), "count": .integer(Int64(rng.below(100_000))),
                                                          "score": .double(Double(rng.below(1_000_000)) / 1000), "done": .bool(rng.below(2) == 1)]))
                    } else {
                        try tx.update(ids[rng.below(ids.count)], update(written, &rng))
                    }
                }
            }
            written += count
            if written % 100_000 < perTransaction { try await ship() }
        }
        try await ship()
        // Offline on both sides.
        for store in [a, b] {
            for _ in 0..<10 {
                try await store.transaction { tx in
                    for n in 0..<100 { try tx.update(ids[rng.below(ids.count)], update(n, &rng)) }
                }
            }
        }
        let eventsA = Int(a.appliedSequences().reduce(0) { $0 + $1.contiguous })
        let eventsB = Int(b.appliedSequences().reduce(0) { $0 + $1.contiguous })
        try await a.close()
        try await b.close()
        return Built(a: pathA, b: pathB, eventsA: eventsA, eventsB: eventsB, seconds: Double(monotonicNanos() - started) / 1e9)
    }

    static func update(_ n: Int, _ rng: inout SplitMix64) -> [String: Value] {
        switch n % 4 {
        case 0: ["count": .integer(Int64(rng.below(100_000)))]
        case 1: ["score": .double(Double(rng.below(1_000_000)) / 1000)]
        case 2: ["done": .bool(rng.below(2) == 1)]
        default: ["name": .string("renamed-\(rng.below(100_000))")]
        }
    }
}
