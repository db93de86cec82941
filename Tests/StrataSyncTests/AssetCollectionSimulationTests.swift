import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// The server's wall clock for assets, as the asset simulation moves it: the real time (the
/// devices stamp their deletes with it) plus however far the test has moved it ahead, so that a
/// sweep's grace passes without waiting for it.
final class SimulatedAssetClock: Sendable {
    private let ahead = Mutex<UInt64>(0)

    var milliseconds: UInt64 { ServerClock.systemWallMilliseconds() + ahead.withLock { $0 } }
    var server: ServerClock { ServerClock(wallMilliseconds: { [self] in milliseconds }) }

    func advance(_ duration: Duration) { ahead.withLock { $0 += AssetTimeline.milliseconds(duration) } }
}

/// What the asset simulation saw happen, summed over the seeds and printed, so that a run too
/// gentle to exercise a path is noticed.
struct AssetSimulationTally {
    var imports = 0
    var replacements = 0
    var deletes = 0
    /// Assets removed from devices by collection (after their compactions).
    var collected = 0
    /// Links, manifests and chunks the server's sweeps removed during the runs.
    var sweptLinks = 0
    var sweptChunks = 0
    /// Pushes and state uploads the server refused with `assetMissing` (then, mostly, uploaded again).
    var assetMissing = 0
    var restores = 0
    var restarts = 0
    var stateUploads = 0
    var fetches = 0
    /// Assets once uploaded that the zone's history no longer named after quiescence, checked
    /// gone from the server.
    var unreferencedOnServer = 0

    var summary: String {
        "\(imports) imports, \(replacements) photos replaced, \(deletes) notes deleted, \(collected) assets collected on devices, \(sweptLinks) links and \(sweptChunks) chunks swept on the server, \(assetMissing) pushes or states refused for a missing asset, \(restores) restores from a backup, \(restarts) server restarts, \(stateUploads) state uploads, \(fetches) fetches on demand; after quiescence \(unreferencedOnServer) assets named by nothing on the server checked gone"
    }

    mutating func add(_ other: AssetSimulationTally) {
        imports += other.imports
        replacements += other.replacements
        deletes += other.deletes
        collected += other.collected
        sweptLinks += other.sweptLinks
        sweptChunks += other.sweptChunks
        assetMissing += other.assetMissing
        restores += other.restores
        restarts += other.restarts
        stateUploads += other.stateUploads
        fetches += other.fetches
        unreferencedOnServer += other.unreferencedOnServer
    }
}

@Suite("Asset collection through the simulation")
struct AssetCollectionSimulationTests {
    /// The zone every device syncs with: owned by `sim`, shared read-write with `friend`.
    static let zone = ZoneID(owner: "sim", name: "photos")
    /// The server's sweep grace (on the clock the test moves).
    static let grace: Duration = .seconds(3600)

    @Test("Devices attach, replace and delete photos (some the same bytes), compact and collect, sync over a lossy network while the server restarts, is restored from a backup (the devices heal it, uploading their states and the assets it lost) and sweeps: after quiescence every asset a device or the zone's history names is readable everywhere, and none that nothing names is left on the server or a device once the grace has passed")
    func collection() async throws {
        let seeds = simulationSeeds(default: 30)
        var tally = AssetSimulationTally()
        for seed in seeds {
            tally.add(try await run(seed: seed))
        }
        print("asset collection simulation: \(seeds.count) seeds from \(seeds.first ?? 0): \(tally.summary)")
        if seeds.count >= 20 {
            #expect(tally.restores > 0 && tally.stateUploads > 0 && tally.assetMissing > 0, "the server was never restored and healed with its assets: the simulation is too gentle")
            #expect(tally.collected > 0 && tally.sweptChunks > 0 && tally.unreferencedOnServer > 0, "nothing was ever collected on a device or swept on the server: the simulation is too gentle")
            #expect(tally.fetches > 0 && tally.deletes > 0 && tally.replacements > 0, "no fetch, delete or replacement: the simulation is too gentle")
        }
    }

    @Test("The same with the zones and assets in PostgreSQL (a real server; each restart opens a new storage, a restore is CREATE DATABASE … TEMPLATE): every referenced asset readable everywhere, no unreferenced one left past the grace")
    func postgresCollection() async throws {
        let seeds = simulationSeeds(default: 2)
        var tally = AssetSimulationTally()
        for seed in seeds {
            tally.add(try await run(seed: seed, backend: .postgres))
        }
        print("asset collection simulation on PostgreSQL: \(seeds.count) seeds from \(seeds.first ?? 0): \(tally.summary)")
        if seeds.count >= 10 {
            #expect(tally.restores > 0 && tally.stateUploads > 0, "the database was never restored and healed: the simulation is too gentle")
            #expect(tally.collected > 0 && tally.sweptChunks > 0, "nothing was ever collected or swept: the simulation is too gentle")
        }
    }

    /// Found by the simulation above: a state upload had to name only assets the zone holds,
    /// deleted objects' included, while a device collects a deleted note's photo once the delete
    /// is older than its grace. A server restored from a backup older than the note then refused
    /// every heal (`assetMissing` for a photo nobody kept), and the device could not sync again.
    @Test("A device heals a zone restored from a backup older than everything it synced, though it deleted a note and collected its photo: the state upload is taken, the sync succeeds and pushes what its log still holds")
    func healAfterCollectingDeletedPhoto() async throws {
        let dir = TemporaryDirectory()
        let network = try await SimulatedNetwork(site: SimulatedServerSite(.embedded, directory: dir.sub("server")), seed: 1)
        network.heal()
        try await network.createZone(Self.zone, grants: [:])
        try await network.takeBackup()
        var options = StoreOptions(durability: .buffered)
        options.segmentSize = 4096
        options.assetCollectionGrace = .zero
        let store = try await Store.open(at: dir.sub("device"), schema: photoSchema, options: options)
        let engine = try SyncEngine(store: store, transport: network.client(Self.zone.owner), zone: Self.zone.name)
        let photo = try await store.importAsset(Data(assetBytes(1000, seed: 3)), mediaType: "image/jpeg")
        let note = try await store.transaction { tx in try tx.insert("Note", ["photo": .asset(photo)]) }
        try await engine.sync()
        try await store.transaction { tx in try tx.delete(note) }
        try await engine.sync()
        // Enough history after the delete that compactions retire what named the photo.
        for round in 0..<3 {
            for i in 0..<20 {
                try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("filler \(round) \(i) " + String(repeating: "x", count: 300))]) }
            }
            try await engine.sync()
            try await store.compact()
        }
        #expect(store.localFile(for: photo) == nil, "the deleted note's photo was not collected: this test no longer tests anything")

        #expect(try await network.rollBack())
        let report = try await engine.sync()
        #expect(report.stateUploads == 1)
        #expect(network.assetMissingAnswers == 0)
        let storage = try network.storage()
        let replicas = try await storage.replicas(zone: Self.zone)
        let own = store.appliedSequences().first { $0.replica == store.replicaID }?.highest
        #expect(own != nil && replicas.first { $0.replica == store.replicaID }?.acknowledged == own, "the zone does not hold all of the device's edits again")
        try await store.close()
        try await network.close()
    }

    /// An honest device: its store, its engine and the user it syncs as.
    struct Device {
        var store: Store
        var engine: SyncEngine
        var user: String
        var path: String
    }

    /// The assets `store` may keep: those its objects name (deleted ones' forgotten, its
    /// collection grace being zero), its retained log names (abandoned transactions too), and its
    /// kept snapshots and the adopted states its log still names.
    static func namedOnDevice(_ store: Store) throws -> Set<AssetHash> {
        var named = Set<AssetHash>()
        for note in store.fetch("Note") {
            for attribute in ["photo", "thumbnail"] {
                if let asset = note[attribute].assetValue { named.insert(asset.sha256) }
            }
        }
        let log = store.segmentLog
        let now = ServerClock.systemWallMilliseconds()
        let adopted = AdoptedStates(storeDirectory: store.directory)
        var cursor = try log.records(from: log.startPosition)
        while let record = try cursor.next() {
            for entry in record.entries {
                // A state the store adopted (a zone's snapshot, a healed state) is kept beside
                // the log while its record is retained, and counts as a snapshot does.
                if AdoptionRecord.isAdoption(entry.payload) {
                    let state = try adopted.payload(for: AdoptionRecord(decoding: entry.payload, position: entry.position), position: entry.position)
                    named.formUnion(try ProjectionCodec.assetsNamed(inSnapshot: state, forgettingDeletedBefore: now))
                    continue
                }
                // A schema record names no asset.
                guard let transaction = try? TransactionRecord(decoding: entry.payload) else { continue }
                for event in transaction.events {
                    switch event.change {
                    case .insert(_, _, let fields), .update(_, _, let fields):
                        for value in fields.values { if let asset = value.assetValue { named.insert(asset.sha256) } }
                    default:
                        break
                    }
                }
            }
        }
        for info in try log.snapshots() {
            named.formUnion(try ProjectionCodec.assetsNamed(inSnapshot: log.readSnapshot(info).payload, forgettingDeletedBefore: now))
        }
        named.remove(Asset.empty.sha256)
        return named
    }

    /// One run; returns what happened.
    func run(seed: UInt64, backend: SimulatedServerSite.Backend = .embedded) async throws -> AssetSimulationTally {
        var tally = AssetSimulationTally()
        let dir = TemporaryDirectory()
        var rng = SeededGenerator(seed: seed)
        let clock = SimulatedAssetClock()
        let network = try await SimulatedNetwork(site: SimulatedServerSite(backend, directory: dir.sub("server"), clock: clock.server), seed: seed &* 31)
        try await network.createZone(Self.zone, grants: ["friend": .readWrite])
        var options = SyncOptions()
        options.maxRetries = 2
        options.initialBackoff = .microseconds(10)
        options.maxBackoff = .microseconds(100)
        options.pushBatchSize = 3
        options.pullLimit = 5
        let tracing = ProcessInfo.processInfo.environment["STRATA_SIM_DEBUG"] != nil && ProcessInfo.processInfo.environment["STRATA_SIM_SEED"] != nil
        options.logger.logLevel = tracing ? .notice : .warning
        func engine(_ store: Store, _ user: String) throws -> SyncEngine {
            try SyncEngine(store: store, transport: network.client(user), zone: Self.zone.name,
                           owner: user == Self.zone.owner ? nil : Self.zone.owner, options: options)
        }
        func open(_ path: String, replica: ReplicaID? = nil) async throws -> Store {
            var storeOptions = StoreOptions(durability: .buffered)
            storeOptions.newReplicaID = replica
            // Small segments, so that compactions retire the history naming old photos; no grace,
            // so that each compaction collects at once what nothing names (the steps run one at a
            // time: no import waits for its transaction meanwhile).
            storeOptions.segmentSize = 4096
            storeOptions.assetCollectionGrace = .zero
            return try await Store.open(at: path, schema: photoSchema, options: storeOptions)
        }
        var devices: [Device] = []
        for (c, user) in ["sim", "sim", "friend"].enumerated() {
            let path = dir.sub("c\(c)")
            let store = try await open(path, replica: ReplicaID(rawValue: UInt128(seed) << 8 | UInt128(c + 1)))
            devices.append(Device(store: store, engine: try engine(store, user), user: user, path: path))
        }
        // The bytes photos are made of: 10 to 19 small ones, so that devices attach the same bytes to several
        // notes and to each other's (stored once per owner on the server, once per device).
        var pool: [AssetHash: [UInt8]] = [:]
        let contents = (0..<(10 + rng.next() % 10)).map { i in assetBytes(1 + Int(rng.next() % 3000), seed: seed &+ UInt64(i) &* 7919) }
        for bytes in contents { pool[AssetHash.of(bytes)] = bytes }
        func photo(_ c: Int) async throws -> Asset {
            tally.imports += 1
            return try await devices[c].store.importAsset(Data(contents[Int(rng.next() % UInt64(contents.count))]), mediaType: "image/jpeg")
        }
        func noteSync(_ report: SyncReport) { tally.stateUploads += report.stateUploads }

        for _ in 0..<80 {
            let c = Int(rng.next() % UInt64(devices.count))
            let step = rng.next() % 20
            if tracing { print("step \(step) device c\(c)") }
            let notes = devices[c].store.fetch("Note")
            let pick = notes.isEmpty ? nil : notes[Int(rng.next() % UInt64(notes.count))]
            switch step {
            case 0..<4:
                // A note, mostly with a photo.
                let attached = rng.next() % 5 == 0 ? nil : try await photo(c)
                // Long titles: the logs' small segments fill, so that compaction retires history.
                let title = "n\(rng.next() % 1000) " + String(repeating: "x", count: 200 + Int(rng.next() % 600))
                try await devices[c].store.transaction { tx in
                    var fields: [String: Value] = ["title": .string(title)]
                    if let attached { fields["photo"] = .asset(attached) }
                    _ = try tx.insert("Note", fields)
                }
            case 4, 5:
                // Its photo replaced (the old one named now by history only).
                guard let pick else { break }
                let replacement = try await photo(c)
                try await devices[c].store.transaction { tx in
                    guard tx.exists(pick.id) else { return }
                    try tx.update(pick.id, ["photo": .asset(replacement)])
                }
                tally.replacements += 1
            case 6:
                guard let pick else { break }
                try await devices[c].store.transaction { tx in
                    guard tx.exists(pick.id) else { return }
                    try tx.delete(pick.id)
                }
                tally.deletes += 1
            case 7..<11:
                // May fail: the network is bad, or an asset the zone lost cannot be uploaded yet.
                do {
                    let report = try await devices[c].engine.sync()
                    noteSync(report)
                    if tracing { print("  synced: pushed \(report.pushedTransactions) pulled \(report.pulledTransactions) uploads \(report.stateUploads)") }
                } catch {
                    if tracing { print("  failed: \(error)".prefix(300)) }
                }
            case 11:
                // A device compacts, collecting what only retired history named.
                let before = try Store.assetInventory(ofStoreAt: devices[c].path).objects.count
                try await devices[c].store.compact()
                let after = try Store.assetInventory(ofStoreAt: devices[c].path).objects.count
                tally.collected += max(0, before - after)
            case 12:
                try await network.restart()
                tally.restarts += 1
            case 13:
                try await network.takeBackup()
            case 14:
                // The server's disk is lost and restored from the backup: the links and chunks
                // uploaded since are gone with the transactions naming them.
                if try await network.rollBack() { tally.restores += 1 }
            case 15:
                // The server compacts, retiring history that named replaced photos.
                try await network.compact(retaining: rng.next() % 3)
            case 16, 17:
                // Time passes on the server (up to one and a half graces) and it sweeps.
                clock.advance(.seconds(Int64(rng.next() % 5400)))
                let swept = try await network.sweepAssets(grace: Self.grace)
                tally.sweptLinks += swept.links
                tally.sweptChunks += swept.chunks
            case 18:
                // The app shows a note's photo: fetched on demand when the device lacks it. May
                // fail (the network; an asset the restored server lost and nobody uploaded yet),
                // but what it returns is the asset.
                guard let asset = pick?["photo"].assetValue else { break }
                if let file = try? await devices[c].store.asset(asset) {
                    let bytes = try [UInt8](Data(contentsOf: file))
                    #expect(AssetHash.of(bytes) == asset.sha256, "seed \(seed): device c\(c) read asset \(asset.sha256) as other bytes")
                    tally.fetches += 1
                }
            default:
                // The app restarts: a new engine, which knows nothing of what the zone holds.
                let device = devices[c]
                try await device.store.close()
                let reopened = try await open(device.path)
                devices[c] = Device(store: reopened, engine: try engine(reopened, device.user), user: device.user, path: device.path)
            }
        }

        // Quiescence: a healthy network, every late message delivered, everyone syncs until
        // nothing moves. Then the server compacts all its history away, as an operator's
        // compactor would (only the snapshot then names assets: replaced and deleted photos are
        // named by nothing on the server), and everyone syncs again (bootstrapping from it).
        network.heal()
        await network.deliverLate()
        func quiesce() async -> [String]? {
            var failures: [String] = []
            for _ in 0..<12 {
                var moved = false
                failures = []
                for (c, device) in devices.enumerated() {
                    do {
                        let report = try await device.engine.sync()
                        noteSync(report)
                        if report.pushedTransactions + report.pulledTransactions + report.stateUploads + report.bootstraps > 0 { moved = true }
                    } catch {
                        failures.append("c\(c): \(error)")
                        moved = true
                    }
                }
                if !moved { return nil }
            }
            return failures
        }
        var restless = await quiesce()
        if restless == nil {
            try await network.compact(retaining: 0)
            restless = await quiesce()
        }
        tally.assetMissing = network.assetMissingAnswers
        if let restless {
            Issue.record("seed \(seed): the devices do not come to rest: \(restless.joined(separator: "; ").prefix(1500))")
            try await network.close()
            return tally
        }
        let digests = Set(devices.map { $0.store.digest() })
        #expect(digests.count == 1, "seed \(seed): the devices diverged")

        // The grace passes on the server: a sweep, then another past the grace (a link the
        // embedded storage has not seen confirmed since it restarted counts as confirmed when a
        // sweep first sees it: a restart delays a removal by one grace), and the devices compact.
        for _ in 0..<2 {
            _ = try await network.sweepAssets(grace: Self.grace)
            clock.advance(Self.grace + .seconds(60))
        }
        _ = try await network.sweepAssets(grace: Self.grace)
        for device in devices {
            let before = try Store.assetInventory(ofStoreAt: device.path).objects.count
            try await device.store.compact()
            tally.collected += max(0, before - (try Store.assetInventory(ofStoreAt: device.path).objects.count))
        }

        let storage = try network.storage()
        let zone = try #require(try await storage.zone(Self.zone), "seed \(seed): the zone is gone")
        let cutoff = clock.milliseconds - AssetTimeline.milliseconds(Self.grace)
        guard let serverNamed = await storage.assetsNamedByHistory(of: zone, forgettingDeletedBefore: cutoff) else {
            Issue.record("seed \(seed): the zone's history could not be read")
            try await network.close()
            return tally
        }
        var live = Set<AssetHash>()
        for note in devices[0].store.fetch("Note") {
            if let asset = note["photo"].assetValue { live.insert(asset.sha256) }
        }
        #expect(live.isSubset(of: serverNamed), "seed \(seed): the devices' notes name assets the zone's history does not: \(live.subtracting(serverNamed).map(\.hex).sorted())")

        // (b) Nothing that nothing names outlives the grace: on each device, no asset file its
        // objects, retained log and kept snapshots do not name …
        for (c, device) in devices.enumerated() {
            let inventory = try Store.assetInventory(ofStoreAt: device.path)
            let named = try Self.namedOnDevice(device.store)
            let extra = Set(inventory.objects.keys).subtracting(named)
            #expect(extra.isEmpty, "seed \(seed): device c\(c) keeps \(extra.count) asset(s) nothing on it names: \(extra.map(\.hex).sorted())")
            #expect(inventory.partials.isEmpty, "seed \(seed): device c\(c) keeps \(inventory.partials.count) partial download(s)")
            // … and every file it holds is the asset its name says.
            for object in inventory.objects.values {
                #expect(try Store.hashAssetFile(at: object.path).sha256 == object.sha256, "seed \(seed): device c\(c)'s file of \(object.sha256) holds other bytes")
            }
        }
        // … and on the server, no link to an asset its retained history does not name.
        for hash in pool.keys.sorted() where !serverNamed.contains(hash) {
            if network.uploadedAssets.contains(hash) { tally.unreferencedOnServer += 1 }
            #expect(try await storage.heldAsset(zone: Self.zone, sha256: hash) == nil, "seed \(seed): the server still holds asset \(hash), which nothing names")
            #expect(try await storage.assetChunk(zone: Self.zone, sha256: hash, index: 0) == nil, "seed \(seed): the server still serves asset \(hash), which nothing names")
        }

        // (a) Every asset a device or the zone's history names is held by the server, chunk for
        // chunk, and readable on every device (fetched when not there).
        for hash in live.union(serverNamed).sorted() {
            guard let bytes = pool[hash] else {
                Issue.record("seed \(seed): the zone names asset \(hash), which no device ever made")
                continue
            }
            let manifest = try await storage.heldAsset(zone: Self.zone, sha256: hash)
            #expect(manifest != nil, "seed \(seed): asset \(hash) is named (\(live.contains(hash) ? "by a note" : "by the zone's history")) and the server does not hold it")
            if let manifest {
                var served: [UInt8] = []
                for index in manifest.chunks.indices {
                    served += try await storage.assetChunk(zone: Self.zone, sha256: hash, index: index) ?? []
                }
                #expect(served == bytes, "seed \(seed): the server's chunks of asset \(hash) are not its bytes")
            }
            let asset = try Asset(sha256: hash, byteCount: UInt64(bytes.count), mediaType: "image/jpeg")
            for (c, device) in devices.enumerated() {
                do {
                    let file = try await device.store.asset(asset)
                    #expect(try [UInt8](Data(contentsOf: file)) == bytes, "seed \(seed): device c\(c) reads asset \(hash) as other bytes")
                } catch {
                    Issue.record("seed \(seed): device c\(c) cannot read asset \(hash) (\(live.contains(hash) ? "a note's photo" : "named by the zone's history")): \(error)")
                }
            }
        }
        // The owner's chunks of what nothing names are gone too: an upload of such an asset
        // starts from nothing (checked last: it begins an upload).
        for hash in pool.keys.sorted() where !serverNamed.contains(hash) {
            guard let bytes = pool[hash] else { continue }
            var hasher = AssetHasher()
            bytes.withUnsafeBytes { hasher.update($0) }
            guard let manifest = hasher.finalize() else { continue }
            let state = try await storage.beginAssetUpload(zone: Self.zone, user: Self.zone.owner, manifest: manifest, storedBytesLimit: nil)
            #expect(state.missing.count == manifest.chunks.count, "seed \(seed): the server still has chunks of asset \(hash), which nothing names")
        }
        for device in devices { try await device.store.close() }
        try await network.close()
        return tally
    }
}
