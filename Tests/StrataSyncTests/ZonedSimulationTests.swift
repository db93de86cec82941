import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// What the zoned simulation saw happen, summed over the seeds and printed, so that a run too
/// gentle to exercise a path is noticed.
struct ZonedSimulationTally {
    var edits = 0
    /// Local edits in a zone the device's user could only read at the time.
    var readOnlyEdits = 0
    var moves = 0
    var zonesCreated = 0
    var shares = 0
    var revokes = 0
    var leaves = 0
    var deletions = 0
    /// Zones a device's sync added (own zones made elsewhere, shares accepted automatically).
    var zonesAdded = 0
    /// Zones a device lost (revoked, deleted, left), and the unpushed edits counted in them.
    var zonesLost = 0
    var lostUnpushedEdits = 0
    var restarts = 0

    var summary: String {
        "\(edits) edits (\(readOnlyEdits) by read grantees), \(moves) moves, \(zonesCreated) zones created, \(shares) shares, \(revokes) revocations, \(leaves) leaves, \(deletions) deletions, \(zonesAdded) zones added and \(zonesLost) lost by devices (\(lostUnpushedEdits) unpushed edits kept aside), \(restarts) server restarts"
    }

    mutating func add(_ other: ZonedSimulationTally) {
        edits += other.edits
        readOnlyEdits += other.readOnlyEdits
        moves += other.moves
        zonesCreated += other.zonesCreated
        shares += other.shares
        revokes += other.revokes
        leaves += other.leaves
        deletions += other.deletions
        zonesAdded += other.zonesAdded
        zonesLost += other.zonesLost
        lostUnpushedEdits += other.lostUnpushedEdits
        restarts += other.restarts
    }
}

@Suite("Zoned sync simulation")
struct ZonedSimulationTests {
    static let tallies = ShardTallies(ZonedSimulationTally(), shards: simulationShards.count) { $0.add($1) }

    @Test("Three users with one or two devices each, a database per device synced by a DatabaseSyncEngine over a lossy, duplicating, reordering network with server restarts; zones made, shared read or read-write, revoked, left and deleted, objects edited and moved between zones: after quiescence every zone's holders converge on the zone's server log, every acknowledged edit is on the server, an edit in a lost zone is on the server or counted among the lost zone's unpushed edits, each device holds exactly the zones its user may read, and a read grantee's edits never reach a zone", arguments: simulationShards)
    func zonedSimulation(shard: Int) async throws {
        // Seeds that once failed, with the 60 steps they failed with: a share whose automatic
        // acceptance the network failed was never listed again (…424); a share added and never
        // synced, revoked, then a restart's full listing that did not name it: the device kept it,
        // refused forever (…308).
        let regressions: [UInt64] = [6_945_375_563_534_939_424, 8_212_045_585_192_272_308]
        let seeds = simulationSeeds(default: 500, regressions: regressions, shard: shard, of: simulationShards.count)
        var tally = ZonedSimulationTally()
        for seed in seeds {
            tally.add(try await run(seed: seed, steps: regressions.contains(seed) ? 60 : 35, backend: .embedded))
        }
        print("zoned simulation, shard \(shard): \(seeds.count) seeds from \(seeds.dropFirst(seeds.count > 1 ? regressions.count : 0).first ?? 0) (and \(seeds.count > 1 ? regressions.count : 0) regression seeds): \(tally.summary)")
        if case let (tally, seeds)? = Self.tallies.add(tally, seeds: seeds.count), seeds >= 50 { expectExercised(tally) }
    }

    @Test("The same zoned simulation with the zones in PostgreSQL (a real server; each restart opens a new storage on the database, whose database changes go on across it)")
    func postgresZonedSimulation() async throws {
        let seeds = simulationSeeds(default: 30)
        var tally = ZonedSimulationTally()
        for seed in seeds {
            tally.add(try await run(seed: seed, steps: 40, backend: .postgres))
        }
        print("zoned simulation on PostgreSQL: \(seeds.count) seeds from \(seeds.first ?? 0): \(tally.summary)")
        if seeds.count >= 20 {
            #expect(tally.shares > 0 && tally.revokes > 0 && tally.zonesAdded > 0 && tally.zonesLost > 0, "no share, revocation, zone gained or lost: the simulation is too gentle")
        }
    }

    /// The database changes in pages of two zones, with the failing seeds of the server's paging
    /// bug (after a restart every zone of the embedded storage had stamp 0; a page cut among zones
    /// of one stamp left the rest out of the following pages, and a device given the reset removed
    /// them). The storage now stamps every zone it opens on its own.
    @Test("Database changes in pages of two zones: after quiescence every device holds every zone its user may read")
    func pagedDatabaseChanges() async throws {
        let seeds = simulationSeeds(default: 30, regressions: [120240182588289056, 120240182588289057, 120240182588289073,
                                                                120240182588289105, 6707434113088525173, 9221720492876777276])
        for seed in seeds {
            _ = try await run(seed: seed, steps: 40, backend: .embedded, databasePageSize: 2)
        }
    }

    func expectExercised(_ tally: ZonedSimulationTally) {
        #expect(tally.shares > 0 && tally.revokes > 0 && tally.leaves > 0 && tally.deletions > 0, "no share, revocation, leave or deletion: the simulation is too gentle")
        #expect(tally.moves > 0 && tally.readOnlyEdits > 0, "no move or no read grantee's edit: the simulation is too gentle")
        #expect(tally.zonesAdded > 0 && tally.zonesLost > 0, "no device ever gained or lost a zone: the simulation is too gentle")
    }

    /// A device: its database and the engine that syncs it as `user`.
    struct Device {
        var user: String
        var path: String
        var database: Database
        var engine: DatabaseSyncEngine
        /// Each zone's store's replica, as last seen (a zone lost in a sync is named by it).
        var replicas: [ZoneReference: ReplicaID] = [:]
        /// The zones lost so far, with their stores' replicas.
        var lost: [(zone: LostZone, replica: ReplicaID?)] = []
    }

    static let users = ["ann", "ben", "cat"]

    /// The zone a device names `reference`, as the server names it.
    static func id(_ reference: ZoneReference, of user: String) -> ZoneID {
        ZoneID(owner: reference.owner ?? user, name: reference.name)
    }

    /// The zone as its `user` names it in a database.
    static func reference(_ id: ZoneID, for user: String) -> ZoneReference {
        id.owner == user ? ZoneReference(id.name) : ZoneReference(id.name, owner: id.owner)
    }

    /// The events and replicas of one zone's server log.
    struct ServerLog {
        var transactions: [[UInt8]] = []
        var events: Set<EventID> = []
        var objects: Set<ObjectID> = []
        /// Who pushed each replica's events.
        var authors: [ReplicaID: String] = [:]

        mutating func merge(_ other: ServerLog) {
            transactions += other.transactions
            events.formUnion(other.events)
            objects.formUnion(other.objects)
            authors.merge(other.authors) { a, _ in a }
        }
    }

    static func serverLog(_ zone: ZoneID, _ storage: any ZoneStorage) async throws -> ServerLog {
        var log = ServerLog()
        var position: UInt64 = 0
        while true {
            let page = try await storage.read(zone: zone, after: position, limit: 1000)
            for stored in page.transactions {
                log.transactions.append(stored.bytes)
                for event in try TransactionRecord(decoding: stored.bytes).events {
                    log.events.insert(event.id)
                    if let object = event.change.object { log.objects.insert(object) }
                }
            }
            position = page.nextPosition
            if !page.moreComing { break }
        }
        for replica in try await storage.replicas(zone: zone) {
            if let user = replica.user { log.authors[replica.replica] = user }
        }
        return log
    }

    func run(seed: UInt64, steps: Int, backend: SimulatedServerSite.Backend, databasePageSize: Int = 500) async throws -> ZonedSimulationTally {
        var tally = ZonedSimulationTally()
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: seed)
        let network = try await SimulatedNetwork(site: SimulatedServerSite(backend, directory: dir.sub("server")), seed: seed &* 31)
        var options = DatabaseSyncOptions()
        options.sync.maxRetries = 2
        options.sync.initialBackoff = .microseconds(10)
        options.sync.maxBackoff = .microseconds(100)
        options.sync.pushBatchSize = 3
        options.sync.pullLimit = 5
        // One zone at a time, so that the network's faults fall the same way for a seed.
        options.concurrentZones = 1
        options.databaseChangesPageSize = databasePageSize
        let tracing = ProcessInfo.processInfo.environment["STRATA_SIM_DEBUG"] != nil && ProcessInfo.processInfo.environment["STRATA_SIM_SEED"] != nil
        options.sync.logger.logLevel = tracing ? .notice : .warning

        var devices: [Device] = []
        for user in Self.users {
            for d in 0..<(1 + Int(rng.next() % 2)) {
                let path = dir.sub("\(user)-\(d)")
                let database = try await Database.open(at: path, schema: deviceSchema, options: StoreOptions(durability: .buffered))
                let engine = DatabaseSyncEngine(database: database, transport: network.client(user), server: "sim", options: options)
                devices.append(Device(user: user, path: path, database: database, engine: engine))
            }
        }
        /// Every (replica, sequence) the server acknowledged to a device, by zone.
        var acknowledged: [ZoneID: [ReplicaID: UInt64]] = [:]
        /// The users that ever could push to each zone: its owner and readWrite grantees.
        var writers: [ZoneID: Set<String>] = [:]
        /// The server logs of deleted zones, as they were just before the deletion.
        var deletedLogs: [ZoneID: ServerLog] = [:]
        /// Zones whose creating device synced them (it holds a cursor: it will not create the
        /// zone again after a deletion, which a device that never synced it may).
        var synced: Set<ZoneID> = []
        var creator: [ZoneID: Int] = [:]
        var nextZone = 0

        func storage() throws -> any ZoneStorage { try network.storage() }
        func serverZones() async throws -> [ZoneInfo] { try await storage().zones().sorted { $0.id.description < $1.id.description } }
        func noteGrants(_ zone: ZoneID) async throws {
            guard let info = try await storage().zone(zone) else { return }
            writers[zone, default: [zone.owner]].formUnion(info.grants.filter { $0.value == .readWrite }.keys)
        }
        /// Records each zone's store replica and what its engine had acknowledged, and the zones
        /// lost since.
        func observe(_ c: Int) async throws {
            let database = devices[c].database
            let known = devices[c].lost.count
            for lost in database.lostZones.dropFirst(known) {
                devices[c].lost.append((lost, devices[c].replicas[lost.zone]))
                tally.zonesLost += 1
                tally.lostUnpushedEdits += lost.unpushedEdits
            }
            for zone in database.zones {
                guard let store = database.store(for: zone) else { continue }
                devices[c].replicas[zone] = store.replicaID
                let cursor = await (try devices[c].engine.engine(for: zone)).currentCursor
                if let replica = cursor.replica, cursor.acknowledged > 0 {
                    let id = Self.id(zone, of: devices[c].user)
                    acknowledged[id, default: [:]][replica] = max(acknowledged[id]?[replica] ?? 0, cursor.acknowledged)
                }
            }
        }
        func sync(_ c: Int) async -> DatabaseSyncReport? {
            do {
                let report = try await devices[c].engine.sync()
                tally.zonesAdded += report.added.count
                for (zone, _) in report.zones where zone.owner == nil {
                    let id = Self.id(zone, of: devices[c].user)
                    if creator[id] == c { synced.insert(id) }
                }
                if tracing { print("  synced: added \(report.added) removed \(report.removed.map(\.zone)) failures \(report.failures.mapValues { "\($0.code)" })") }
                return report
            } catch {
                if tracing { print("  sync failed: \(error)".prefix(200)) }
                return nil
            }
        }
        for c in devices.indices { try await observe(c) }

        for step in 0..<steps {
            let c = Int(rng.next() % UInt64(devices.count))
            let user = devices[c].user
            let database = devices[c].database
            let kind = rng.next() % 20
            if tracing { print("step \(step): \(kind) on \(user) device \(c) holding \(database.zones)") }
            switch kind {
            case 0..<5:
                // An edit in a zone the device holds: an insert, an update or a delete.
                // Half of the time in a zone another user shares, when the device holds one: where
                // grants (read or read-write) decide what may leave the device.
                let shared = database.zones.filter { $0.owner != nil }
                let zones = !shared.isEmpty && rng.next() % 2 == 0 ? shared : database.zones
                let zone = zones[Int(rng.next() % UInt64(zones.count))]
                let id = Self.id(zone, of: user)
                let canPush = try await storage().zone(id)?.canPush(user) ?? (zone.owner == nil)
                let notes = (try? database.fetch("Note", in: [zone])) ?? []
                let title = "t\(rng.next() % 1_000_000)"
                let action = rng.next() % 4
                do {
                    try await database.transaction { tx in
                        if let note = notes.first, action == 0 {
                            try tx.delete(note.id)
                        } else if let note = notes.last, action == 1 {
                            try tx.update(note.id, ["title": .string(title)])
                        } else {
                            _ = try tx.insert("Note", ["title": .string(title)], in: zone)
                        }
                    }
                    tally.edits += 1
                    if !canPush { tally.readOnlyEdits += 1 }
                } catch {
                    Issue.record("seed \(seed): a local edit in \(zone) failed: \(error)")
                }
            case 5, 6:
                // A move of an object to another zone the device holds.
                let zones = database.zones
                guard zones.count > 1 else { break }
                let from = zones[Int(rng.next() % UInt64(zones.count))]
                let to = zones[Int(rng.next() % UInt64(zones.count))]
                guard from != to, let note = ((try? database.fetch("Note", in: [from])) ?? []).first else { break }
                do {
                    try await database.move(note.id, to: to)
                    tally.moves += 1
                    #expect(database.zone(of: note.id) == to, "seed \(seed): a moved object is not in its destination")
                } catch {
                    Issue.record("seed \(seed): moving \(note.id) from \(from) to \(to) failed: \(error)")
                }
            case 7..<11:
                _ = await sync(c)
            case 11:
                // A new zone of the device's user, with a note in it.
                let zone = ZoneReference("z\(nextZone)")
                nextZone += 1
                try await database.addZone(zone)
                try await database.transaction { tx in _ = try tx.insert("Note", ["title": "first"], in: zone) }
                creator[Self.id(zone, of: user)] = c
                tally.zonesCreated += 1
            case 12, 13:
                // The owner shares one of their zones (read or read-write) with another user.
                let own = try await serverZones().filter { $0.owner == user }
                guard !own.isEmpty else { break }
                let info = own[Int(rng.next() % UInt64(own.count))]
                let others = Self.users.filter { $0 != user }
                let grantee = others[Int(rng.next() % UInt64(others.count))]
                let grant: ZoneGrant = rng.next() % 2 == 0 ? .read : .readWrite
                _ = try? await devices[c].engine.share(ZoneReference(info.name), with: grantee, access: grant)
                try await noteGrants(info.id)
                tally.shares += 1
            case 14:
                // The owner takes a grant back.
                let granted = try await serverZones().filter { $0.owner == user && !$0.grants.isEmpty }
                guard !granted.isEmpty else { break }
                let info = granted[Int(rng.next() % UInt64(granted.count))]
                let grantees = info.grants.keys.sorted()
                _ = try? await devices[c].engine.revoke(ZoneReference(info.name), from: grantees[Int(rng.next() % UInt64(grantees.count))])
                tally.revokes += 1
            case 15:
                // A grantee leaves a zone shared with them that the device holds.
                let shared = database.zones.filter { $0.owner != nil }
                guard !shared.isEmpty else { break }
                let zone = shared[Int(rng.next() % UInt64(shared.count))]
                if let lost = try? await devices[c].engine.leave(zone) {
                    #expect(lost.reason == .left && lost.zone == zone, "seed \(seed): leaving \(zone) set it aside as \(lost.reason)")
                }
                try await observe(c)
                tally.leaves += 1
            case 16:
                // The owner deletes one of their zones (not a database's default zone, and one its
                // creating device synced).
                let deletable = try await serverZones().filter { $0.owner == user && $0.name != "default" && synced.contains($0.id) }
                guard !deletable.isEmpty else { break }
                let info = deletable[Int(rng.next() % UInt64(deletable.count))]
                deletedLogs[info.id, default: ServerLog()].merge(try await Self.serverLog(info.id, storage()))
                try await network.deleteZone(info.id)
                tally.deletions += 1
            case 17:
                try await network.restart()
                tally.restarts += 1
            default:
                // Pushes held back by the network arrive now, late.
                await network.deliverLate()
            }
            try await observe(c)
        }

        // Quiescence: a healthy network, every late message delivered, every device syncing until
        // a round changes nothing.
        network.heal()
        await network.deliverLate()
        var quiet = false
        var failures: [String] = []
        for _ in 0..<10 where !quiet {
            quiet = true
            failures = []
            for c in devices.indices {
                guard let report = await sync(c) else {
                    quiet = false
                    failures.append("device \(c) could not sync")
                    continue
                }
                try await observe(c)
                let moved = report.zones.values.contains { $0.pushedTransactions > 0 || $0.pulledTransactions > 0 }
                if moved || !report.added.isEmpty || !report.removed.isEmpty || !report.failures.isEmpty { quiet = false }
                failures += report.failures.map { "device \(c) (\(devices[c].user)) zone \($0.key): \($0.value)" }
            }
        }
        #expect(quiet, "seed \(seed): the devices never stopped changing: \(failures.prefix(4))")

        let storage = try network.storage()
        let zones = try await serverZones()
        var logs: [ZoneID: ServerLog] = [:]
        for info in zones {
            var log = try await Self.serverLog(info.id, storage)
            // A deleted zone created again (by a device that never synced it): its earlier lives count.
            if let earlier = deletedLogs[info.id] { log.merge(earlier) }
            logs[info.id] = log
        }
        for (id, log) in deletedLogs where logs[id] == nil { logs[id] = log }
        let live = Set(zones.map(\.id))
        for id in deletedLogs.keys where live.contains(id) {
            Issue.record("seed \(seed): deleted zone \(id) is on the server again: a device created it without being asked to")
        }

        // (2) Every acknowledged edit is in its zone's server log (a deleted zone's, as it was
        // when it was deleted).
        for (zone, replicas) in acknowledged {
            let held = logs[zone]?.events ?? []
            for (replica, sequence) in replicas {
                let missing = (1...sequence).filter { !held.contains(EventID(replica: replica, sequence: $0)) }
                #expect(missing.isEmpty, "seed \(seed): zone \(zone) misses \(missing.count) acknowledged events of \(replica) (through #\(sequence))")
            }
        }
        // (4) Nobody who could only read a zone got an event into it.
        for (zone, log) in logs {
            let allowed = writers[zone, default: []].union([zone.owner])
            for (replica, author) in log.authors where !allowed.contains(author) {
                Issue.record("seed \(seed): \(author), who never could write to \(zone), pushed events of \(replica) into it")
            }
        }

        // (1) and (3), device by device and zone by zone.
        var digests: [ZoneID: [String: String]] = [:]
        for device in devices {
            let database = device.database
            // Exactly the zones the user may read: their own, and those granted to them (accepted
            // automatically).
            let held = Set(database.zones.map { Self.id($0, of: device.user) })
            let readable = Set(zones.filter { $0.owner == device.user || $0.isMember(device.user) }.map(\.id))
            #expect(held == readable, "seed \(seed): \(device.user)'s device \(device.path) holds \(held.sorted { $0.description < $1.description }) but may read \(readable.sorted { $0.description < $1.description })")
            for zone in database.zones {
                let id = Self.id(zone, of: device.user)
                guard let store = database.store(for: zone), let log = logs[id] else { continue }
                let pending = try database.hasUnpushedEdits(in: zone)
                if pending {
                    // Only a read grantee's edits wait: they are the device's own, and never left it.
                    let info = zones.first { $0.id == id }
                    #expect(info?.canPush(device.user) == false, "seed \(seed): \(device.path) still has unpushed edits in \(zone), which it may write to")
                    var own: Set<ObjectID> = []
                    for stored in try store.transactions() where stored.transaction.replica == store.replicaID {
                        for event in stored.transaction.events {
                            if let object = event.change.object { own.insert(object) }
                        }
                    }
                    let stray = store.fetch("Note").map(\.id).filter { !log.objects.contains($0) && !own.contains($0) }
                    #expect(stray.isEmpty, "seed \(seed): \(device.path)'s \(zone) holds \(stray.count) objects neither the server's log nor its own edits hold")
                } else {
                    digests[id, default: [:]][device.path] = store.digest()
                    let stray = store.fetch("Note").map(\.id).filter { !log.objects.contains($0) }
                    #expect(stray.isEmpty, "seed \(seed): \(device.path)'s \(zone) holds \(stray.count) objects the zone's server log does not")
                }
            }
            // (2) for lost zones: an edit no server holds is counted among the lost zone's unpushed edits.
            for (lost, replica) in device.lost {
                guard let replica else { continue }
                let id = Self.id(lost.zone, of: device.user)
                let held = logs[id]?.events ?? []
                let kept = try await Store.open(at: database.path(of: lost), schema: deviceSchema, options: StoreOptions(durability: .buffered))
                let unheld = try kept.transactions().filter { stored in
                    stored.transaction.replica == replica
                        && stored.transaction.events.contains { $0.change.object != nil }
                        && stored.transaction.events.contains { !held.contains($0.id) }
                }.count
                try await kept.close()
                #expect(unheld <= lost.unpushedEdits, "seed \(seed): \(device.path) lost \(lost.zone) (\(lost.reason)) with \(unheld) edits the server does not hold, but counts \(lost.unpushedEdits) unpushed")
            }
        }
        // (1) Every holder of a zone has the zone's state, which is the state its server log builds.
        for (id, byDevice) in digests.sorted(by: { $0.key.description < $1.key.description }) {
            guard let log = logs[id], live.contains(id) else { continue }
            let fresh = try await Store.open(at: dir.sub("fresh-\(id.owner)-\(id.name)"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            _ = try await fresh.applyRemote(encoded: log.transactions)
            let expected = fresh.digest()
            try await fresh.close()
            for (path, digest) in byDevice.sorted(by: { $0.key < $1.key }) {
                #expect(digest == expected, "seed \(seed): \(path)'s copy of \(id) differs from the state of the zone's server log (\(byDevice.count) holders, \(Set(byDevice.values).count) states)")
            }
        }
        for device in devices { try await device.database.close() }
        try await network.close()
        return tally
    }
}
