import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// Seeds: `STRATA_PROPERTY_SEED` runs one seed; otherwise `STRATA_PROPERTY_RUNS` seeds (default
/// 12) from a random base, printed so that a failure can be repeated.
func propertySeeds() -> [UInt64] {
    let environment = ProcessInfo.processInfo.environment
    if let seed = environment["STRATA_PROPERTY_SEED"].flatMap(UInt64.init) { return [seed] }
    let runs = environment["STRATA_PROPERTY_RUNS"].flatMap(Int.init) ?? 12
    let base = UInt64.random(in: 1...UInt64.max / 2)
    return (0..<runs).map { base + UInt64($0) }
}

/// Applies transactions to a fresh projection, one batch each, and returns its digest.
func replayDigest(_ transactions: [TransactionRecord]) throws -> String {
    let projection = Projection()
    for transaction in transactions {
        projection.beginBatch()
        for event in transaction.events { try projection.apply(event) }
        projection.commitBatch(report: false)
    }
    projection.schema = projection.recordedSchema
    return projection.digest()
}

@Suite("Convergence properties")
struct ConvergenceTests {
    @Test("Random transactions from 3 replicas give identical digests in any order, with duplicates")
    func convergence() async throws {
        for seed in propertySeeds() {
            try await convergence(seed: seed)
        }
    }

    func convergence(seed: UInt64) async throws {
        var history = RandomHistory(seed: seed)
        let dir = StoreDirectory()
        var stores: [Store] = []
        var clocks: [ManualClock] = []
        for r in 0..<3 {
            let clock = ManualClock()
            var options = storeOptions(clock: clock)
            options.newReplicaID = ReplicaID(rawValue: UInt128(r + 1))
            stores.append(try await Store.open(at: dir.sub("r\(r)"), schema: notesSchema, options: options))
            clocks.append(clock)
        }
        func own(_ store: Store) throws -> [TransactionRecord] {
            try store.transactions(forSync: true).map(\.transaction).filter { $0.replica == store.replicaID }
        }
        for _ in 0..<60 {
            let r = Int(history.rng.next() % 3)
            // Clocks move unevenly (and sometimes not at all), so HLCs collide and cross.
            clocks[r].advance(history.rng.next() % 3)
            await history.step(stores[r])
            if history.chance(30) {
                let to = Int(history.rng.next() % 3)
                let from = (to + 1 + Int(history.rng.next() % 2)) % 3
                var batch = try own(stores[from]).filter { _ in history.chance(60) }
                batch.shuffle(using: &history.rng)
                try await stores[to].applyRemote(batch)
            }
        }
        for _ in 0..<2 {
            for to in 0..<3 { for from in 0..<3 where from != to { try await stores[to].applyRemote(try own(stores[from])) } }
        }
        let digests = stores.map { $0.digest() }
        #expect(Set(digests).count == 1, "seed \(seed): the replicas did not converge")
        let all = try stores.flatMap { try own($0) }
        #expect(all.count > 20, "seed \(seed): too few transactions to mean anything")
        for order in 0..<6 {
            var shuffled = all
            for _ in 0..<(all.count / 4) { if let extra = history.pick(all) { shuffled.append(extra) } }
            shuffled.shuffle(using: &history.rng)
            #expect(try replayDigest(shuffled) == digests[0], "seed \(seed), order \(order): a different order gave a different projection")
        }
        // And through a real store, in random chunks.
        let fresh = try await Store.open(at: dir.sub("fresh"), schema: notesSchema, options: storeOptions())
        var remaining = all.shuffled(using: &history.rng)
        while !remaining.isEmpty {
            let n = min(remaining.count, 1 + Int(history.rng.next() % 7))
            try await fresh.applyRemote(Array(remaining.prefix(n)))
            remaining.removeFirst(n)
        }
        #expect(fresh.digest() == digests[0], "seed \(seed): a fresh store fed in chunks differs")
    }

    @Test("Opening after compaction equals a full replay, over random histories")
    func compactionEqualsReplay() async throws {
        for seed in propertySeeds() {
            var history = RandomHistory(seed: seed)
            let dir = StoreDirectory()
            var options = storeOptions(.groupCommit)
            options.segmentSize = 4096
            var store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
            var everything: [TransactionRecord] = []
            var seen: UInt64 = 0
            func collect(_ store: Store) throws {
                let new = try store.transactions(from: seen)
                everything += new.map(\.transaction)
                seen = (new.last?.position ?? seen - 1) + 1
            }
            for round in 0..<4 {
                for _ in 0..<15 { await history.step(store) }
                try collect(store)
                if history.chance(70) { try await store.compact() }
                if round == 2 {
                    // Reopen half way: the next compaction starts from a snapshot-loaded projection.
                    try await store.close()
                    store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
                    #expect(store.openReport.snapshot != nil || store.segmentLog.startPosition == 0)
                }
            }
            try await store.compact()
            for _ in 0..<5 { await history.step(store) }
            try collect(store)
            let live = store.digest()
            try await store.close()
            let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options)
            #expect(reopened.openReport.snapshot != nil, "seed \(seed)")
            #expect(reopened.segmentLog.startPosition > 0, "seed \(seed): compaction retired nothing")
            #expect(reopened.digest() == live, "seed \(seed): snapshot plus tail differs from the live store")
            #expect(try replayDigest(everything) == live, "seed \(seed): full replay differs from snapshot plus tail")
            try await reopened.close()
        }
    }
}

@Suite("Adopting a snapshot")
struct AdoptSnapshotTests {
    @Test("Merging another replica's projection snapshot equals applying all events of both, and survives reopen")
    func adoptEqualsReplay() async throws {
        for seed in propertySeeds().prefix(4) {
            var history = RandomHistory(seed: seed)
            let dir = StoreDirectory()
            var optionsA = storeOptions()
            optionsA.newReplicaID = ReplicaID(rawValue: 1)
            var optionsB = storeOptions()
            optionsB.newReplicaID = ReplicaID(rawValue: 2)
            let a = try await Store.open(at: dir.sub("a"), schema: notesSchema, options: optionsA)
            let b = try await Store.open(at: dir.sub("b"), schema: notesSchema, options: optionsB)
            for _ in 0..<15 { await history.step(a) }
            try await b.applyRemote(try a.transactions(forSync: true).map(\.transaction))
            for _ in 0..<15 {
                await history.step(history.chance(50) ? a : b)
            }
            // B's state as a server would hold it: a projection of B's (sync-visible) log.
            let builder = ProjectionBuilder()
            for stored in try b.transactions(forSync: true) { try builder.apply(encoded: stored.transaction.encoded()) }
            try await a.adoptSnapshot(builder.snapshotPayload())
            let everything = try a.transactions(forSync: true).map(\.transaction) + b.transactions(forSync: true).map(\.transaction)
            #expect(a.digest() == (try replayDigest(everything)), "seed \(seed): adopting differs from replaying both")
            let digest = a.digest()
            try await a.close()
            let reopened = try await Store.open(at: dir.sub("a"), schema: notesSchema, options: optionsA)
            #expect(reopened.digest() == digest, "seed \(seed): the adopted state did not survive reopen")
        }
    }
}
