import Foundation
@_spi(StrataInternals) import Strata
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// Healing a zone from its devices: when the server holds less than a device has seen, the
/// device's own events go back as events and everything else it holds as its state, which the
/// server merges into the zone's snapshot.
@Suite("Healing a zone from its devices, end to end")
struct HealingTests {
    func open(_ path: String) async throws -> Store {
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 4096
        return try await Store.open(at: path, schema: deviceSchema, options: options)
    }

    func names(_ store: Store) -> Set<String> {
        Set(store.fetch("Folder").compactMap { $0["name"].stringValue })
    }

    func commit(_ store: Store, _ prefix: String, count: Int) async throws {
        for i in 0..<count {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("\(prefix) \(i)")]) }
        }
    }

    @Test("a server restored from an older copy gets back what no device can push as events (a lost device's edits, history compacted away) from a device's state, and every device converges")
    func restoredServerHealsFromState() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let keeper = try await open(dir.sub("keeper"))
        let lost = try await open(dir.sub("lost"))
        let stale = try await open(dir.sub("stale"))
        @Sendable func sync(_ url: URL, _ store: Store) async throws -> SyncReport {
            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        try await withServer(server) { url, _ in
            try await commit(keeper, "keeper early", count: 3)
            _ = try await sync(url, keeper)
            _ = try await sync(url, stale)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await commit(keeper, "keeper late", count: 40)
            _ = try await sync(url, keeper)
            try await commit(lost, "lost", count: 5)
            _ = try await sync(url, lost)
            _ = try await sync(url, keeper)
        }
        // The keeper compacts: its own pushed transactions leave its log (they were acknowledged).
        try await keeper.compact()
        #expect(keeper.segmentLog.startPosition > 0, "compaction retired nothing: the test does not test")
        try await lost.close()  // that device is gone for good
        #expect(names(keeper).count == 48)

        // The server's disk is lost; the backup (3 transactions) comes back.
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, storage in
            let zone = ZoneID(owner: "alice", name: "notes")
            let healed = try await sync(url, keeper)
            #expect(healed.rewinds == 1)
            #expect(healed.stateUploads == 1)
            #expect(healed.stateBytes > 0)
            // The lost device's edits reach the zone credited to a replica of the uploader's (the
            // zone does not hold them: they are not believed under the lost device's name), so the
            // keeper adopts the merged state once, and keeps the credited names as every device does.
            #expect(healed.bootstraps == 1)
            let credited = try await storage.replicas(zone: zone).filter { $0.replica.rawValue >> 64 == UInt128(UInt64.max) }
            #expect(credited.count == 1 && credited.first?.user == "alice" && credited.first?.acknowledged == 6, "five edits and the schema event: \(credited)")
            // The merge is recorded: every token handed out before expires.
            #expect(try await storage.zone(zone)?.merges.count == 1)

            // A device whose token the restored server still accepts (it synced before the backup)
            // adopts the merged state instead of missing it.
            let staleReport = try await sync(url, stale)
            #expect(staleReport.bootstraps == 1)
            #expect(names(stale) == names(keeper))
            #expect(stale.digest() == keeper.digest())

            // A new device gets everything, from the snapshot.
            let fresh = try await open(dir.sub("fresh"))
            let freshReport = try await sync(url, fresh)
            #expect(freshReport.bootstraps == 1)
            #expect(names(fresh).count == 48)
            #expect(fresh.digest() == keeper.digest())

            // The heal was done once: the next sync uploads nothing.
            let again = try await sync(url, keeper)
            #expect(again.stateUploads == 0)
            #expect(again.rewinds == 0)
            try await fresh.close()
        }
        try await keeper.close()
        try await stale.close()
    }

    @Test("a server restored from a backup and grown past a device's token since (other devices pushed) is still noticed: the token's fingerprint differs, and the device heals the zone")
    func restoredServerGrownPastToken() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let ahead = try await open(dir.sub("ahead"))
        let other = try await open(dir.sub("other"))
        @Sendable func sync(_ url: URL, _ store: Store) async throws -> SyncReport {
            try await SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        try await withServer(server) { url, _ in
            try await commit(ahead, "early", count: 2)
            _ = try await sync(url, ahead)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await commit(ahead, "lost", count: 3)
            _ = try await sync(url, ahead)
        }
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, _ in
            // Others push more than the server lost: its end is past the ahead device's token.
            try await commit(other, "other", count: 8)
            _ = try await sync(url, other)
            let report = try await sync(url, ahead)
            #expect(report.rewinds == 1)
            #expect(names(ahead).count == 13)
            _ = try await sync(url, other)
            #expect(other.digest() == ahead.digest())
        }
        try await ahead.close()
        try await other.close()
    }

    @Test("a heal whose replica another user took on the restored server (a spoofed push) uploads its state without a claim, forks away from the replica, and loses nothing")
    func healAfterReplicaTaken() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let device = try await open(dir.sub("device"))
        @Sendable func sync(_ url: URL) async throws -> SyncReport {
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        try await withServer(server) { url, _ in
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").ensureZone(ZoneReference("notes"), create: true)
            try await HTTPSyncTransport(server: url, bearer: "alice-secret").share("notes", with: "bob", .readWrite)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await commit(device, "mine", count: 3)
            _ = try await sync(url)
        }
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, _ in
            // On the restored server bob pushes first under the device's replica.
            let replica = device.replicaID
            let forged = TransactionRecord(replica: replica, events: [Event(
                id: EventID(replica: replica, sequence: 1), hlc: HLC(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000), counter: 0),
                change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": "forged"]))])
            _ = try await HTTPSyncTransport(server: url, bearer: "bob-secret").push(zone: ZoneReference("notes", owner: "alice"), transactions: [forged.encoded()])

            let report = try await sync(url)
            #expect(report.rewinds == 1)
            #expect(report.stateUploads == 1)
            #expect(report.forks.count == 1)
            #expect(device.replicaID != replica)
            let fresh = try await open(dir.sub("fresh"))
            _ = try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(names(fresh).isSuperset(of: ["mine 0", "mine 1", "mine 2"]))
            #expect(fresh.digest() == device.digest())
            try await fresh.close()
        }
        try await device.close()
    }

    @Test("a heal the server cannot take yet stays pending in the cursor: a new engine (an app restart) uploads it once the server takes it")
    func pendingHealSurvivesRestart() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        let device = try await open(dir.sub("device"))
        try await withServer(server) { url, _ in
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").ensureZone(ZoneReference("notes"), create: true)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        try await withServer(server) { url, _ in
            try await commit(device, "mine", count: 3)
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        // The restored server takes no state this large: the heal fails, typed, and stays pending.
        var tiny = ServerConfiguration.Limits()
        tiny.maxStateBytes = 64
        try await withServer(server, limits: tiny) { url, _ in
            await #expect { try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync() } throws: {
                ($0 as? SyncError)?.code == .tooLarge
            }
        }
        try await withServer(server) { url, _ in
            let report = try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.stateUploads == 1)
            let fresh = try await open(dir.sub("fresh"))
            try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(names(fresh) == ["mine 0", "mine 1", "mine 2"])
            #expect(fresh.digest() == device.digest())
            try await fresh.close()
        }
        try await device.close()
    }

    @Test("a heal whose state is stamped ahead of the server's clock waits for the push to re-stamp the device's edits, then goes through in the same sync")
    func healWaitsForRestamp() async throws {
        let dir = TemporaryDirectory()
        let server = dir.sub("server"), backup = dir.sub("backup")
        // The device's clock runs a day ahead, until it is set right.
        let clock = SkewedClock(aheadBy: 86_400_000)
        var options = StoreOptions(durability: .groupCommit)
        options.clock = { clock.now() }
        options.maxClockLead = 1 << 40
        let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: options)
        try await withServer(server) { url, _ in
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").ensureZone(ZoneReference("notes"), create: true)
        }
        try FileManager.default.copyItem(atPath: server, toPath: backup)
        // A server that accepted the skewed stamps (two days of offset) took the edits ...
        var lenient = ServerConfiguration.Limits()
        lenient.maxClockOffset = .seconds(2 * 86_400)
        try await withServer(server, limits: lenient) { url, _ in
            try await commit(device, "ahead", count: 2)
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
        }
        // ... and was lost; the backup is served with the default offset. The clock is right now.
        clock.setRight()
        try FileManager.default.removeItem(atPath: server)
        try FileManager.default.moveItem(atPath: backup, toPath: server)
        try await withServer(server) { url, _ in
            let report = try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.rewinds == 1)
            #expect(report.forks.contains { $0.reason == .clockRestamp })
            #expect(report.stateUploads == 1)
            let fresh = try await open(dir.sub("fresh"))
            try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(names(fresh) == ["ahead 0", "ahead 1"])
            try await fresh.close()
        }
        try await device.close()
    }

    @Test("a device with no token joins a compacted zone through its snapshot: nothing compacted away is missed")
    func freshDeviceOnCompactedZone() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), segmentSize: 4096) { url, storage in
            let writer = try await open(dir.sub("writer"))
            try await commit(writer, "folder with a long enough name to fill segments", count: 80)
            var small = SyncOptions()
            small.pushBatchSize = 4
            try await SyncEngine(store: writer, server: url, zone: "notes", credentials: "alice-secret", options: small).sync()
            try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 2)
            #expect(try await storage.startPosition(zone: ZoneID(owner: "alice", name: "notes")) > 0, "nothing retired: the test does not test")
            let fresh = try await open(dir.sub("fresh"))
            let report = try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.bootstraps == 1)
            #expect(fresh.count("Folder") == 80)
            #expect(fresh.digest() == writer.digest())
            try await fresh.close()
            try await writer.close()
        }
    }

    @Test("a recreated zone is seeded with everything the recreating device holds, including history it compacted and other devices' edits")
    func recreatedZoneHoldsCompactedHistory() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, storage in
            let phone = try await open(dir.sub("phone"))
            let laptop = try await open(dir.sub("laptop"))
            let phoneEngine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret")
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await commit(phone, "phone", count: 40)
            try await phoneEngine.sync()
            try await commit(laptop, "laptop", count: 3)
            try await laptopEngine.sync()
            try await phoneEngine.sync()
            try await phone.compact()
            #expect(phone.segmentLog.startPosition > 0, "compaction retired nothing: the test does not test")

            try await storage.deleteZone(ZoneID(owner: "alice", name: "notes"))
            let recreated = try await phoneEngine.recreateZone()
            #expect(recreated.stateUploads == 1)
            // The laptop's edits the new zone does not hold are credited to a replica of the
            // phone's user: the phone adopts the merged state once.
            #expect(recreated.bootstraps == 1)
            let fresh = try await open(dir.sub("fresh"))
            try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(fresh.count("Folder") == 43)
            #expect(fresh.digest() == phone.digest())
            // The laptop sees the new zone (zoneReset), pushes and uploads what it holds, converges.
            try await laptopEngine.sync()
            try await phoneEngine.sync()
            #expect(laptop.digest() == phone.digest())
            try await fresh.close()
            try await phone.close()
            try await laptop.close()
        }
    }

    @Test("the server merges an uploaded state's values but not its claims of applied events, and refuses states it cannot read or stamped ahead of its clock")
    func uploadedStateIsChecked() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let transport = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await transport.ensureZone(ZoneReference("notes"), create: true)
            await #expect { _ = try await transport.uploadState(zone: ZoneReference("notes"), state: [1, 2, 3], replica: nil, claim: 0, after: nil) } throws: {
                ($0 as? SyncError)?.code == .badRequest
            }
            // A state with a value stamped a day ahead.
            let ahead = UInt64(Date().timeIntervalSince1970 * 1000) + 86_400_000
            var options = StoreOptions(durability: .groupCommit)
            options.clock = { ahead }
            options.maxClockLead = 1 << 40
            let skewed = try await Store.open(at: dir.sub("skewed"), schema: deviceSchema, options: options)
            try await skewed.transaction { tx in _ = try tx.insert("Folder", ["name": "from the future"]) }
            await #expect { _ = try await transport.uploadState(zone: ZoneReference("notes"), state: try skewed.statePayload(), replica: nil, claim: 0, after: nil) } throws: {
                ($0 as? SyncError)?.code == .clockSkew
            }
            // A state whose author's events the zone never got: its values arrive, its events
            // still apply when they really come (the claim "applied" was not believed).
            let author = try await open(dir.sub("author"))
            try await author.transaction { tx in _ = try tx.insert("Folder", ["name": "first"]) }
            _ = try await transport.uploadState(zone: ZoneReference("notes"), state: try author.statePayload(), replica: nil, claim: 0, after: nil)
            try await author.transaction { tx in _ = try tx.insert("Folder", ["name": "second"]) }
            let reader = try await open(dir.sub("reader"))
            try await SyncEngine(store: reader, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(names(reader) == ["first"])
            try await SyncEngine(store: author, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await SyncEngine(store: reader, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(names(reader) == ["first", "second"])
            #expect(reader.digest() == author.digest())
            try await reader.close()
            try await author.close()
            try await skewed.close()
        }
    }
}

/// A device clock that runs ahead until it is set right.
final class SkewedClock: Sendable {
    private let ahead: Mutex<UInt64>

    init(aheadBy milliseconds: UInt64) { ahead = Mutex(milliseconds) }

    func now() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) + ahead.withLock { $0 } }
    func setRight() { ahead.withLock { $0 = 0 } }
}
