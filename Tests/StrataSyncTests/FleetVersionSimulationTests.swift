import Foundation
import Logging
import StrataProtocol
import StrataServer
import Strata
import StrataCore
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// Four versions of one app's schema, as a fleet ships them: a rename (v2), a type change (v3),
/// an entity rename and an attribute added with a default (v4).
enum FleetVersions {
    static let steps: [SchemaMigration] = [
        .renameAttribute("Person", "name", to: "fullName", in: 2),
        .changeType("Person", "age", from: .string, to: .integer, in: 3),
        .renameEntity("Person", to: "Contact", in: 4),
    ]

    static func schema(_ version: Int) -> Schema {
        let entity = Entity(entityName(version), attributes: [
            Attribute(nameKey(version), .string),
            Attribute("age", version < 3 ? .string : .integer),
        ] + (version >= 4 ? [Attribute("nickname", .string, optional: false, default: "none")] : []))
        return Schema(entities: [entity], version: version, migrations: steps.filter { $0.version <= version })
    }

    static func entityName(_ version: Int) -> String { version < 4 ? "Person" : "Contact" }
    static func nameKey(_ version: Int) -> String { version < 2 ? "name" : "fullName" }
    static func ageValue(_ age: Int, _ version: Int) -> Value { version < 3 ? .string(String(age)) : .integer(Int64(age)) }

    /// What a version reads as (name, age, nickname) — the same person in every version's terms.
    static func canonical(_ snapshot: ObjectSnapshot, _ version: Int) -> (name: String?, age: Int?, nickname: String?) {
        let age: Int? = switch snapshot["age"] {
        case .string(let text): Int(text)
        case .integer(let value): Int(value)
        default: nil
        }
        return (snapshot[nameKey(version)].stringValue, age, version >= 4 ? snapshot["nickname"].stringValue : nil)
    }
}

private let fleetTallies = ShardTallies(FleetTally(), shards: simulationShards.count) { $0.add($1) }

struct FleetTally: Sendable {
    var upgrades = 0
    var edits = 0
    var crossVersionReads = 0
    var versionsSeen: Set<Int> = []

    mutating func add(_ other: FleetTally) {
        upgrades += other.upgrades
        edits += other.edits
        crossVersionReads += other.crossVersionReads
        versionsSeen.formUnion(other.versionsSeen)
    }

    var summary: String { "\(edits) edits, \(upgrades) upgrades, \(crossVersionReads) objects read by a version other than the one that wrote them last, versions \(versionsSeen.sorted())" }
}

@Suite("A fleet on schema versions 1 to 4, upgrading at random, editing the same objects")
struct FleetVersionSimulationTests {
    @Test("Devices on versions 1–4 (a rename, a type change, an entity rename, an attribute added with a default) upgrade at random moments and edit the same people through a misbehaving network to the real server storage: after quiescence they converge, no written value is lost, and each version reads every person in its own names and types", arguments: simulationShards)
    func mixedVersions(shard: Int) async throws {
        let seeds = simulationSeeds(default: 1000, shard: shard, of: simulationShards.count)
        var tally = FleetTally()
        for seed in seeds {
            // A share of the seeds on PostgreSQL (a real server; one database each).
            let backend: SimulatedServerSite.Backend = seed % 20 == 0 ? .postgres : .embedded
            tally.add(try await run(seed: seed, backend: backend))
        }
        print("fleet version simulation, shard \(shard): \(seeds.count) seeds from \(seeds.first ?? 0): \(tally.summary)")
        if case let (sum, count)? = fleetTallies.add(tally, seeds: seeds.count), count >= 50 {
            #expect(sum.upgrades > 0 && sum.crossVersionReads > 0, "no upgrade or no cross-version read: the simulation is too gentle")
            #expect(sum.versionsSeen == [1, 2, 3, 4], "not every version ran: \(sum.versionsSeen)")
        }
    }

    struct Device {
        var path: String
        var version: Int
        var store: Store
        var engine: SyncEngine
    }

    func run(seed: UInt64, backend: SimulatedServerSite.Backend) async throws -> FleetTally {
        var tally = FleetTally()
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: seed)
        let zone = ZoneID(owner: "fleet", name: "people")
        let network = try await SimulatedNetwork(site: SimulatedServerSite(backend, directory: dir.sub("server")), seed: seed &* 17)
        try await network.createZone(zone, grants: [:])
        var options = SyncOptions()
        options.maxRetries = 2
        options.initialBackoff = .microseconds(10)
        options.maxBackoff = .microseconds(100)
        options.pushBatchSize = 3
        options.pullLimit = 4
        options.logger.logLevel = .warning
        func open(_ path: String, _ version: Int) async throws -> Device {
            let store = try await Store.open(at: path, schema: FleetVersions.schema(version), options: StoreOptions(durability: .buffered))
            let engine = try SyncEngine(store: store, transport: network.client(zone.owner), zone: zone.name, options: options)
            return Device(path: path, version: version, store: store, engine: engine)
        }
        var devices: [Device] = []
        for c in 0..<3 {
            devices.append(try await open(dir.sub("d\(c)"), 1 + Int(rng.next() % 4)))
        }
        // What was ever written per person and attribute (canonical values), and the version
        // that wrote each person last.
        var people: [ObjectID] = []
        var names: [ObjectID: Set<String>] = [:]
        var ages: [ObjectID: Set<Int>] = [:]
        var nicknames: [ObjectID: Set<String>] = [:]
        var lastWriter: [ObjectID: Int] = [:]
        for _ in 0..<40 {
            let c = Int(rng.next() % UInt64(devices.count))
            let version = devices[c].version
            tally.versionsSeen.insert(version)
            let entity = FleetVersions.entityName(version)
            switch rng.next() % 10 {
            case 0..<5:
                // Insert, or edit a person this device holds, in its version's names and types.
                let held = devices[c].store.fetch(entity).map(\.id)
                let name = "n\(rng.next() % 1000)"
                let age = Int(rng.next() % 120)
                let nickname = "k\(rng.next() % 100)"
                let which = rng.next() % 3
                if held.isEmpty || rng.next() % 4 == 0 {
                    var values: [String: Value] = [FleetVersions.nameKey(version): .string(name), "age": FleetVersions.ageValue(age, version)]
                    if version >= 4 && which == 0 { values["nickname"] = .string(nickname) }
                    let id = try await devices[c].store.transaction { tx in try tx.insert(entity, values) }
                    people.append(id)
                    names[id, default: []].insert(name)
                    ages[id, default: []].insert(age)
                    if values["nickname"] != nil { nicknames[id, default: []].insert(nickname) }
                    lastWriter[id] = version
                    let read = try #require(devices[c].store.object(id), "seed \(seed): v\(version) does not read its own insert")
                    #expect(FleetVersions.canonical(read, version).name == name && FleetVersions.canonical(read, version).age == age,
                            "seed \(seed): v\(version) reads its insert as \(read.values)")
                } else {
                    let id = held[Int(rng.next() % UInt64(held.count))]
                    var values: [String: Value] = [:]
                    switch which {
                    case 0:
                        values[FleetVersions.nameKey(version)] = .string(name)
                        names[id, default: []].insert(name)
                    case 1:
                        values["age"] = FleetVersions.ageValue(age, version)
                        ages[id, default: []].insert(age)
                    default:
                        if version >= 4 {
                            values["nickname"] = .string(nickname)
                            nicknames[id, default: []].insert(nickname)
                        } else {
                            values["age"] = FleetVersions.ageValue(age, version)
                            ages[id, default: []].insert(age)
                        }
                    }
                    try await devices[c].store.transaction { tx in try tx.update(id, values) }
                    lastWriter[id] = version
                    // Read your own write, whatever version wrote before.
                    let read = try #require(devices[c].store.object(id))
                    for (key, value) in values {
                        #expect(read[key] == value, "seed \(seed): v\(version) wrote \(key) = \(value) and reads \(read[key])")
                    }
                }
                tally.edits += 1
            case 5..<9:
                _ = try? await devices[c].engine.sync()
            default:
                // Upgrade to a random newer version (a fleet skips versions too).
                guard version < 4 else { continue }
                let next = version + 1 + Int(rng.next() % UInt64(4 - version))
                let before = Set(devices[c].store.fetch(entity).map(\.id))
                try await devices[c].store.close()
                devices[c] = try await open(devices[c].path, next)
                let after = Set(devices[c].store.fetch(FleetVersions.entityName(next)).map(\.id))
                #expect(after == before, "seed \(seed): upgrading v\(version) → v\(next) changed which people the device reads")
                tally.upgrades += 1
                tally.versionsSeen.insert(next)
            }
        }
        // Quiescence: a healthy network, every late push delivered, everyone syncs twice.
        network.heal()
        await network.deliverLate()
        for _ in 0..<2 {
            for device in devices { _ = try await device.engine.sync() }
        }
        let digests = Set(devices.map { $0.store.digest() })
        #expect(digests.count == 1, "seed \(seed): the devices diverged (versions \(devices.map(\.version)))")
        // Every version reads every person, and all agree on each person's values (a version
        // that does not know the nickname aside); every value read is one that was written.
        for id in people {
            var seen: [(name: String?, age: Int?)] = []
            var nicknamesRead: Set<String> = []
            for device in devices {
                let entity = FleetVersions.entityName(device.version)
                guard let read = device.store.object(id), read.entity == entity else {
                    Issue.record("seed \(seed): v\(device.version) does not read person \(id) as a \(entity)")
                    continue
                }
                let value = FleetVersions.canonical(read, device.version)
                seen.append((value.name, value.age))
                if let nickname = value.nickname { nicknamesRead.insert(nickname) }
                if lastWriter[id] != device.version { tally.crossVersionReads += 1 }
                #expect(value.name.map { names[id]?.contains($0) == true } == true, "seed \(seed): v\(device.version) reads name \(value.name ?? "nil") for \(id); written: \(names[id] ?? [])")
                #expect(value.age.map { ages[id]?.contains($0) == true } == true, "seed \(seed): v\(device.version) reads age \(String(describing: value.age)) for \(id); written: \(ages[id] ?? [])")
            }
            #expect(Set(seen.map { "\($0.name ?? "-")/\($0.age.map(String.init) ?? "-")" }).count <= 1, "seed \(seed): versions disagree on \(id): \(seen)")
            #expect(nicknamesRead.count <= 1, "seed \(seed): v4 devices disagree on the nickname of \(id): \(nicknamesRead)")
            if let nickname = nicknamesRead.first {
                #expect(nickname == "none" || nicknames[id]?.contains(nickname) == true, "seed \(seed): nickname \(nickname) was never written for \(id)")
                if nickname == "none" { #expect(nicknames[id] == nil, "seed \(seed): a nickname written for \(id) reads as the default") }
            }
        }
        for device in devices {
            #expect(device.store.count(FleetVersions.entityName(device.version)) == people.count, "seed \(seed): v\(device.version) counts \(device.store.count(FleetVersions.entityName(device.version))) of \(people.count) people")
            try await device.store.close()
        }
        try await network.close()
        return tally
    }
}
