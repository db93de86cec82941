import Foundation
import Logging
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

/// What one run saw happen, summed over the seeds and printed, so that a run too gentle to
/// exercise a path is noticed.
struct SimulationTally {
    var bootstraps = 0
    var forks = 0
    var clones = 0
    var spoofsRefused = 0
    var skewsRefused = 0
    var grantChanges = 0

    mutating func add(_ other: SimulationTally) {
        grantChanges += other.grantChanges
        bootstraps += other.bootstraps
        forks += other.forks
        clones += other.clones
        spoofsRefused += other.spoofsRefused
        skewsRefused += other.skewsRefused
    }
}

@Suite("Deterministic sync simulation")
struct SimulationTests {
    @Test("Honest devices (some cloned mid-run, some losing and regaining write access) and a hostile grantee over a lossy, duplicating, reordering network with server restarts: honest devices converge, every acknowledged edit is in the zone exactly once, no refused event reaches anyone")
    func simulation() async throws {
        let seeds = simulationSeeds()
        var tally = SimulationTally()
        for seed in seeds {
            tally.add(try await run(seed: seed))
        }
        print("sync simulation: \(seeds.count) seeds from \(seeds.first ?? 0): \(tally.bootstraps) bootstraps from an expired token, \(tally.clones) clones, \(tally.forks) forks, \(tally.spoofsRefused) spoofed pushes and \(tally.skewsRefused) far-future pushes refused, \(tally.grantChanges) grant changes")
        if seeds.count >= 50 {
            #expect(tally.bootstraps > 0, "no client ever fell behind the server's retention: the simulation is too gentle")
            #expect(tally.forks > 0, "no clone ever forked: the simulation is too gentle")
            #expect(tally.spoofsRefused > 0 && tally.skewsRefused > 0, "the hostile grantee was never refused")
        }
    }

    /// The zone every device syncs with: owned by `sim`, shared read-write with `friend` (honest)
    /// and `mallory` (hostile).
    static let zone = ZoneID(owner: "sim", name: "sim")

    /// An honest device: its store, its engine and the user it syncs as.
    struct Device {
        var store: Store
        var engine: SyncEngine
        var user: String
        var path: String
    }

    /// One run; returns what happened.
    func run(seed: UInt64) async throws -> SimulationTally {
        var tally = SimulationTally()
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: seed)
        let network = try SimulatedNetwork(directory: dir.sub("server"), seed: seed &* 31)
        try await network.createZone(Self.zone, grants: ["friend": .readWrite, "mallory": .readWrite])
        var options = SyncOptions()
        options.maxRetries = 2
        options.initialBackoff = .microseconds(10)
        options.maxBackoff = .microseconds(100)
        options.pushBatchSize = 3
        options.pullLimit = 5
        options.logger.logLevel = .warning
        func engine(_ store: Store, _ user: String) throws -> SyncEngine {
            try SyncEngine(store: store, transport: network.client(user), zone: Self.zone.name,
                           owner: user == Self.zone.owner ? nil : Self.zone.owner, options: options)
        }
        func open(_ path: String, replica: ReplicaID? = nil) async throws -> Store {
            var storeOptions = StoreOptions(durability: .buffered)
            storeOptions.newReplicaID = replica
            return try await Store.open(at: path, schema: deviceSchema, options: storeOptions)
        }
        var devices: [Device] = []
        for (c, user) in ["sim", "sim", "friend"].enumerated() {
            let path = dir.sub("c\(c)")
            let store = try await open(path, replica: ReplicaID(rawValue: UInt128(seed) << 8 | UInt128(c + 1)))
            devices.append(Device(store: store, engine: try engine(store, user), user: user, path: path))
        }
        let mallory = network.client("mallory")
        let malloryReplica = ReplicaID(rawValue: UInt128(seed) << 8 | 0xEE)
        var mallorySequence: UInt64 = 0
        // Every (replica, sequence) the server ever acknowledged to an honest device.
        var acknowledged: [ReplicaID: UInt64] = [:]

        var notes: [ObjectID] = []
        for _ in 0..<50 {
            let c = Int(rng.next() % UInt64(devices.count))
            switch rng.next() % 14 {
            case 0..<4:
                let pick = notes.isEmpty ? nil : notes[Int(rng.next() % UInt64(notes.count))]
                let action = rng.next() % 3
                // Varied titles, several notes at a time: enough bytes for the server's small
                // segments to fill, so that compaction retires history.
                let titles = (0..<(2 + rng.next() % 5)).map { _ in "t\(rng.next())-\(String(rng.next(), radix: 36))" }
                let created = try? await devices[c].store.transaction { tx -> [ObjectID] in
                    if let pick, tx.exists(pick) {
                        if action == 0 { try tx.delete(pick) } else { try tx.update(pick, ["title": .string(titles[0])]) }
                        return []
                    }
                    return try titles.map { try tx.insert("Note", ["title": .string($0)]) }
                }
                notes += created ?? []
            case 4..<7:
                // May fail: the network is bad.
                if let report = try? await devices[c].engine.sync() {
                    tally.bootstraps += report.bootstraps
                    tally.forks += report.forks.count
                }
                let cursor = await devices[c].engine.currentCursor
                if let replica = cursor.replica {
                    acknowledged[replica] = max(acknowledged[replica] ?? 0, cursor.acknowledged)
                }
            case 7:
                try await network.restart()
            case 8:
                // The server compacts, leaving clients that have not synced behind its retention.
                try await network.compact(retaining: rng.next() % 3)
            case 9 where devices.count < 5:
                // A device is cloned (a restored backup, a migrated phone): same replica ID, same
                // cursor, and from now on its own edits.
                let original = devices[c]
                try await original.store.close()
                let path = dir.sub("clone\(devices.count)")
                try FileManager.default.copyItem(atPath: original.path, toPath: path)
                let reopened = try await open(original.path)
                devices[c] = Device(store: reopened, engine: try engine(reopened, original.user), user: original.user, path: original.path)
                let clone = try await open(path)
                devices.append(Device(store: clone, engine: try engine(clone, original.user), user: original.user, path: path))
                tally.clones += 1
            case 10, 11:
                // Mallory pushes under an honest device's replica, ahead of its sequences.
                let victim = devices[c].store
                let next = (victim.appliedSequences().first { $0.replica == victim.replicaID }?.highest ?? 0) + 1 + rng.next() % 3
                let forged = TransactionRecord(replica: victim.replicaID, events: [Event(
                    id: EventID(replica: victim.replicaID, sequence: next), hlc: HLC(milliseconds: SimulatedNetwork.serverTime, counter: 0),
                    change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string("forged")]))])
                do {
                    _ = try await mallory.push(zone: ZoneReference(Self.zone.name, owner: Self.zone.owner), transactions: [forged.encoded()])
                } catch let error as SyncError where error.code == .replicaNotYours {
                    tally.spoofsRefused += 1
                } catch {
                    // Dropped by the network, or a gap: refused either way, or the replica was not
                    // pushed yet (then it is mallory's now, and the device forks away from it).
                }
            case 12:
                // The owner changes friend's grant between read and read-write: friend's devices
                // sync pull-only meanwhile, their edits waiting.
                try await network.toggleGrant(Self.zone, user: "friend")
                tally.grantChanges += 1
            default:
                // Mallory pushes a far-future timestamp under her own replica.
                mallorySequence += 1
                let future = HLC(milliseconds: SimulatedNetwork.serverTime + 86_400_000 * (1 + rng.next() % 10_000), counter: 0)
                let pinned = notes.isEmpty ? ObjectID() : notes[Int(rng.next() % UInt64(notes.count))]
                let skewed = TransactionRecord(replica: malloryReplica, events: [Event(
                    id: EventID(replica: malloryReplica, sequence: mallorySequence), hlc: future,
                    change: .update(entity: "Note", object: pinned, fields: ["title": .string("pinned by mallory")]))])
                do {
                    _ = try await mallory.push(zone: ZoneReference(Self.zone.name, owner: Self.zone.owner), transactions: [skewed.encoded()])
                    Issue.record("seed \(seed): a push stamped \(future) was accepted")
                } catch let error as SyncError where error.code == .clockSkew {
                    tally.skewsRefused += 1
                } catch {
                    // Dropped by the network before the server saw it.
                }
                mallorySequence -= 1
            }
        }
        // Quiescence: write access back, a healthy network, every late message delivered,
        // everyone syncs twice.
        try await network.grant(Self.zone, user: "friend", .readWrite)
        network.heal()
        await network.deliverLate()
        for _ in 0..<2 {
            for device in devices {
                let report = try await device.engine.sync()
                tally.bootstraps += report.bootstraps
                tally.forks += report.forks.count
            }
        }
        for device in devices {
            let cursor = await device.engine.currentCursor
            if let replica = cursor.replica { acknowledged[replica] = max(acknowledged[replica] ?? 0, cursor.acknowledged) }
        }

        let digests = devices.map { $0.store.digest() }
        #expect(Set(digests).count == 1, "seed \(seed): honest devices diverged: \(devices.map { device in "\(device.user) \(device.store.replicaID) \(device.store.fetch("Note").count) notes, \(device.store.identity.lineage.count) forks" })")
        if ProcessInfo.processInfo.environment["STRATA_SIM_DEBUG"] != nil && Set(digests).count > 1 {
            for device in devices {
                print("== \(device.path) \(device.store.replicaID) lineage \(device.store.identity.lineage)")
                for note in device.store.fetch("Note") { print("  \(note.id) \(note["title"])") }
                print("  applied \(device.store.appliedSequences())")
            }
        }
        // Copies that share a replica ID (a clone that has not written since, or whose original has
        // not) must hold the very same transactions under it: a fork is never silent.
        var authored: [EventID: (path: String, position: UInt64, bytes: [UInt8])] = [:]
        for device in devices {
            for stored in try device.store.transactions() where stored.transaction.replica == device.store.replicaID {
                guard let first = stored.transaction.sequences?.lowerBound else { continue }
                let id = EventID(replica: device.store.replicaID, sequence: first)
                let bytes = stored.transaction.encoded()
                if let other = authored[id], other.bytes != bytes {
                    if ProcessInfo.processInfo.environment["STRATA_SIM_DEBUG"] != nil {
                        print("A: \((try? TransactionRecord(decoding: other.bytes)).map { "\($0)" } ?? "?")")
                        print("B: \(stored.transaction)")
                        print("lineage: \(device.store.identity)")
                    }
                    Issue.record("seed \(seed): two devices authored different transactions as \(id): \(other.path) at \(other.position), \(device.path) at \(stored.position)")
                }
                authored[id] = (device.path, stored.position, bytes)
            }
        }
        // The server: every event exactly once (in its snapshot, or once in the log after it),
        // and every acknowledged one present.
        let storage = try network.storage()
        let snapshot = try await storage.snapshot(zone: Self.zone)
        let covered = try snapshot.map { try ProjectionBuilder(snapshot: $0.payload).contiguousSequences() } ?? [:]
        var seen: [EventID: Int] = [:]
        var newest = HLC(rawValue: 0)
        var position = snapshot?.position ?? 0
        while true {
            let page = try await storage.read(zone: Self.zone, after: position, limit: 1000)
            for stored in page.transactions {
                for event in try TransactionRecord(decoding: stored.bytes).events {
                    seen[event.id, default: (event.id.sequence <= covered[event.id.replica] ?? 0) ? 1 : 0] += 1
                    newest = max(newest, event.hlc)
                }
            }
            position = page.nextPosition
            if !page.moreComing { break }
        }
        #expect(seen.values.allSatisfy { $0 == 1 }, "seed \(seed): an event is held by the server more than once")
        #expect(newest.milliseconds <= SimulatedNetwork.serverTime + 600_000, "seed \(seed): the zone holds an event stamped \(newest)")
        func held(_ id: EventID) -> Bool { id.sequence <= covered[id.replica] ?? 0 || seen[id] == 1 }
        for (replica, sequence) in acknowledged where sequence > 0 {
            for s in 1...sequence {
                #expect(held(EventID(replica: replica, sequence: s)), "seed \(seed): acknowledged event \(replica)#\(s) missing from the server")
            }
        }
        for device in devices {
            let store = device.store
            let own = try store.transactions().flatMap(\.transaction.events).filter { $0.id.replica == store.replicaID }
            #expect(own.allSatisfy { held($0.id) }, "seed \(seed): after quiescence some local event was never pushed")
            // No honest device's field is pinned by a refused event.
            #expect(store.fetch("Note").allSatisfy { $0["title"].stringValue != "pinned by mallory" }, "seed \(seed): a refused event reached a device")
        }
        for device in devices { try await device.store.close() }
        try await network.close()
        return tally
    }
}
