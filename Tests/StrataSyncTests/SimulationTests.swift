import Foundation
import Strata
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// Seeds: `STRATA_SIM_SEEDS` (default 500) from a random base, or `STRATA_SIM_SEED` for one.
func simulationSeeds() -> [UInt64] {
    let environment = ProcessInfo.processInfo.environment
    if let seed = environment["STRATA_SIM_SEED"].flatMap(UInt64.init) { return [seed] }
    let count = environment["STRATA_SIM_SEEDS"].flatMap(Int.init) ?? 500
    let base = UInt64.random(in: 1...UInt64.max / 2)
    return (0..<count).map { base + UInt64($0) }
}

@Suite("Deterministic sync simulation")
struct SimulationTests {
    @Test("Clients over a lossy, duplicating, reordering network with server restarts converge; every acknowledged event is in the server log exactly once")
    func simulation() async throws {
        let seeds = simulationSeeds()
        var bootstraps = 0
        for seed in seeds {
            bootstraps += try await run(seed: seed)
        }
        print("sync simulation: \(seeds.count) seeds from \(seeds.first ?? 0), \(bootstraps) bootstraps from an expired token")
        if seeds.count >= 50 { #expect(bootstraps > 0, "no client ever fell behind the server's retention: the simulation is too gentle") }
    }

    /// One run; returns how many times a client had to bootstrap from a snapshot.
    func run(seed: UInt64) async throws -> Int {
        var bootstraps = 0
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: seed)
        let network = try SimulatedNetwork(directory: dir.sub("server"), seed: seed &* 31)
        var options = SyncOptions()
        options.maxRetries = 2
        options.initialBackoff = .microseconds(10)
        options.maxBackoff = .microseconds(100)
        options.pushBatchSize = 3
        options.pullLimit = 5
        var stores: [Store] = []
        var engines: [SyncEngine] = []
        for c in 0..<3 {
            var storeOptions = StoreOptions(durability: .buffered)
            storeOptions.newReplicaID = ReplicaID(rawValue: UInt128(seed) << 8 | UInt128(c + 1))
            let store = try await Store.open(at: dir.sub("c\(c)"), schema: deviceSchema, options: storeOptions)
            stores.append(store)
            engines.append(try SyncEngine(store: store, transport: network, zone: "sim", options: options))
        }
        var notes: [ObjectID] = []
        for _ in 0..<40 {
            let c = Int(rng.next() % 3)
            switch rng.next() % 10 {
            case 0..<4:
                let pick = notes.isEmpty ? nil : notes[Int(rng.next() % UInt64(notes.count))]
                let action = rng.next() % 3
                // Varied titles, several notes at a time: enough bytes for the server's small
                // segments to fill, so that compaction retires history.
                let titles = (0..<(2 + rng.next() % 5)).map { _ in "t\(rng.next())-\(String(rng.next(), radix: 36))" }
                let created = try? await stores[c].transaction { tx -> [ObjectID] in
                    if let pick, tx.exists(pick) {
                        if action == 0 { try tx.delete(pick) } else { try tx.update(pick, ["title": .string(titles[0])]) }
                        return []
                    }
                    return try titles.map { try tx.insert("Note", ["title": .string($0)]) }
                }
                notes += created ?? []
            case 4..<7:
                // May fail: the network is bad.
                if let report = try? await engines[c].sync() { bootstraps += report.bootstraps }
            case 7:
                try await network.restart()
            default:
                // The server compacts, leaving clients that have not synced behind its retention.
                try await network.compact(retaining: rng.next() % 3)
            }
        }
        // Quiescence: a healthy network, every late message delivered, everyone syncs twice.
        network.heal()
        await network.deliverLate()
        for _ in 0..<2 { for engine in engines { bootstraps += try await engine.sync().bootstraps } }

        let digests = stores.map { $0.digest() }
        #expect(Set(digests).count == 1, "seed \(seed): clients diverged")
        // The server: every event exactly once (in its snapshot, or once in the log after it),
        // and every acknowledged one present.
        let storage = try network.storage()
        let snapshot = try await storage.snapshot(zone: "sim")
        let covered = try snapshot.map { try ProjectionBuilder(snapshot: $0.payload).contiguousSequences() } ?? [:]
        var seen: [EventID: Int] = [:]
        var position = snapshot?.position ?? 0
        while true {
            let page = try await storage.read(zone: "sim", after: position, limit: 1000)
            for stored in page.transactions {
                for event in try TransactionRecord(decoding: stored.bytes).events {
                    seen[event.id, default: (event.id.sequence <= covered[event.id.replica] ?? 0) ? 1 : 0] += 1
                }
            }
            position = page.nextPosition
            if !page.moreComing { break }
        }
        #expect(seen.values.allSatisfy { $0 == 1 }, "seed \(seed): an event is held by the server more than once")
        func held(_ id: EventID) -> Bool { id.sequence <= covered[id.replica] ?? 0 || seen[id] == 1 }
        for (store, engine) in zip(stores, engines) {
            let acknowledged = await engine.currentCursor.acknowledged
            let own = try store.transactions().flatMap(\.transaction.events).filter { $0.id.replica == store.replicaID }
            for event in own where event.id.sequence <= acknowledged {
                #expect(held(event.id), "seed \(seed): acknowledged event \(event.id) missing from the server")
            }
            #expect(own.allSatisfy { held($0.id) }, "seed \(seed): after quiescence some local event was never pushed")
        }
        for store in stores { try await store.close() }
        try await network.close()
        return bootstraps
    }
}
