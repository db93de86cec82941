import Foundation
import Logging
import StrataLog
import StrataPostgres
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A wall clock the test moves (milliseconds since 1970), shared by every storage it is given to.
final class MovableWallClock: Sendable {
    private let reading: Mutex<UInt64>

    init(milliseconds: UInt64 = 1_800_000_000_000) {
        reading = Mutex(milliseconds)
    }

    var milliseconds: UInt64 { reading.withLock { $0 } }
    var server: ServerClock { ServerClock(wallMilliseconds: { [self] in milliseconds }) }

    func advance(_ duration: Duration) { reading.withLock { $0 += AssetTimeline.milliseconds(duration) } }
    func moveBack(_ duration: Duration) { reading.withLock { $0 -= AssetTimeline.milliseconds(duration) } }
}

/// A flag tasks share.
final class Flag: Sendable {
    let value = Mutex(false)
}

/// The sweep of unreferenced assets (`AssetStorage.sweepAssets(grace:)`), held to the same
/// rules by the embedded storage and the PostgreSQL one, with a clock the tests move.
@Suite("Asset sweep: what no retained history names and nothing confirmed within the grace is collected, and only that")
struct AssetSweepTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]
    static let grace: Duration = .seconds(3600)

    @Test("an asset named only by history that compaction retired is swept once the grace has passed, not before; its bytes leave the owner's stored bytes exactly",
          arguments: backends)
    func retiredHistoryIsSweptAfterGrace(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let asset = try TestAsset(seed: 101, byteCount: 2 * AssetManifest.chunkSize + 500)
        try await Self.upload(asset, to: "photos", in: storage)
        let replica = ReplicaID.random()
        let photo = ObjectID()
        try await Self.push(asset, object: photo, to: "photos", replica: replica, in: storage)
        // Overwritten, then the history that named it compacted away.
        try await Self.push(nil, object: photo, to: "photos", replica: replica, in: storage)
        try await Self.retireHistory(of: "photos", replica: replica, in: storage)
        let before = try await storage.storedBytes(owner: "alice")

        clock.advance(.seconds(1800))
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport())
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.storedBytes(owner: "alice") == before)

        clock.advance(.seconds(1801))
        let report = try await storage.sweepAssets(grace: Self.grace)
        #expect(report == AssetSweepReport(links: 1, manifests: 1, chunks: 3, uploads: 0, bytesFreed: Int64(asset.bytes.count)))
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == nil)
        #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: 0) == nil)
        #expect(try await storage.storedBytes(owner: "alice") == before - Int64(asset.bytes.count))
        // Gone for the owner's other zones too: uploading it again sends every chunk.
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        try await storage.close()
    }

    @Test("an asset a retained transaction names and one only the kept snapshot names stay however old; an asset nothing names is swept by the same sweep",
          arguments: backends)
    func namedByHistoryStays(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let inSnapshot = try TestAsset(seed: 102, byteCount: 3000)
        let inLog = try TestAsset(seed: 103, byteCount: 4000)
        let unnamed = try TestAsset(seed: 104, byteCount: 5000)
        for asset in [inSnapshot, inLog, unnamed] { try await Self.upload(asset, to: "photos", in: storage) }
        let replica = ReplicaID.random()
        // Named by a transaction compaction retires: only the snapshot names it then.
        try await Self.push(inSnapshot, object: ObjectID(), to: "photos", replica: replica, in: storage)
        try await Self.retireHistory(of: "photos", replica: replica, in: storage)
        try await Self.push(inLog, object: ObjectID(), to: "photos", replica: replica, in: storage)
        let before = try await storage.storedBytes(owner: "alice")

        clock.advance(Self.grace * 3)
        let report = try await storage.sweepAssets(grace: Self.grace)
        #expect(report == AssetSweepReport(links: 1, manifests: 1, chunks: 1, uploads: 0, bytesFreed: 5000))
        #expect(try await storage.heldAsset(zone: "photos", sha256: inSnapshot.sha256) == inSnapshot.manifest)
        #expect(try await storage.assetChunk(zone: "photos", sha256: inSnapshot.sha256, index: 0) == inSnapshot.chunk(0))
        #expect(try await storage.heldAsset(zone: "photos", sha256: inLog.sha256) == inLog.manifest)
        #expect(try await storage.assetChunk(zone: "photos", sha256: inLog.sha256, index: 0) == inLog.chunk(0))
        #expect(try await storage.heldAsset(zone: "photos", sha256: unnamed.sha256) == nil)
        #expect(try await storage.storedBytes(owner: "alice") == before - 5000)
        try await storage.close()
    }

    @Test("a deleted object's asset stays while its delete is younger than the grace (an edit elsewhere may bring the object back) and is swept after, though the snapshot keeps the deleted object's fields",
          arguments: backends)
    func deletedObjectFreesItsAsset(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let asset = try TestAsset(seed: 107, byteCount: 6000)
        try await Self.upload(asset, to: "photos", in: storage)
        let replica = ReplicaID.random()
        let note = ObjectID()
        let reference = Value.asset(try Asset(sha256: asset.sha256, byteCount: 6000, mediaType: "image/jpeg"))
        // Inserted naming the photo, then deleted: both stamped at the server's clock now.
        for (sequence, change) in [(UInt64(1), Change.insert(entity: "Photo", object: note, fields: ["file": reference])),
                                   (2, Change.delete(entity: "Photo", object: note))] {
            let record = TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: clock.milliseconds + sequence, counter: 0), change: change),
            ])
            let pushed = try #require(PushedTransaction(record))
            #expect(try await storage.unheldAssets(zone: "photos", user: "alice", assets: pushed.namedAssets) == [])
            _ = try await storage.append(zone: "photos", user: "alice", replica: replica, transactions: [pushed], storedBytesLimit: nil)
        }
        try await Self.retireHistory(of: "photos", replica: replica, in: storage)
        clock.advance(.seconds(1800))
        #expect(try await storage.sweepAssets(grace: Self.grace).links == 0)
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        // Once the delete is older than the grace, nothing names it; a sweep that found it named
        // may count that as a use (the embedded storage does), so it may take one grace more.
        var freed: Int64 = 0
        for _ in 0..<2 {
            clock.advance(Self.grace + .seconds(1))
            freed += try await storage.sweepAssets(grace: Self.grace).bytesFreed
        }
        #expect(freed == 6000)
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == nil)
        try await storage.close()
    }

    @Test("an upload in progress within the grace stays and can be completed; one untouched for longer than the grace is dropped with its chunks",
          arguments: backends)
    func uploadsInProgress(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let kept = try TestAsset(seed: 105, byteCount: 2 * AssetManifest.chunkSize + 10)
        let abandoned = try TestAsset(seed: 106, byteCount: 2 * AssetManifest.chunkSize + 20)
        let before = try await storage.storedBytes(owner: "alice")
        for asset in [kept, abandoned] {
            _ = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
            _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        }
        clock.advance(.seconds(2400))
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport())
        // Still going: a chunk sent now touches it.
        #expect(try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: kept.sha256, index: 1, bytes: kept.chunk(1), storedBytesLimit: nil).missing == [2])

        clock.advance(.seconds(2400))
        let report = try await storage.sweepAssets(grace: Self.grace)
        #expect(report == AssetSweepReport(links: 0, manifests: 0, chunks: 1, uploads: 1, bytesFreed: Int64(abandoned.chunk(0).count)))
        #expect(try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: kept.sha256, index: 2, bytes: kept.chunk(2), storedBytesLimit: nil).complete)
        #expect(try await storage.assetChunk(zone: "photos", sha256: kept.sha256, index: 0) == kept.chunk(0))
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: abandoned.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(kept.bytes.count))
        try await storage.close()
    }

    @Test("a link a push just confirmed survives a sweep although no transaction names it yet, and the pushed transaction's asset is readable; an unconfirmed one of the same age goes",
          arguments: backends)
    func pushCheckConfirms(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let checked = try TestAsset(seed: 107, byteCount: 3000)
        let unchecked = try TestAsset(seed: 108, byteCount: 4000)
        try await Self.upload(checked, to: "photos", in: storage)
        try await Self.upload(unchecked, to: "photos", in: storage)
        clock.advance(Self.grace * 2)
        // The push's check, then a sweep before its append.
        #expect(try await storage.unheldAssets(zone: "photos", user: "alice", assets: [checked.sha256]) == [])
        let report = try await storage.sweepAssets(grace: Self.grace)
        #expect(report == AssetSweepReport(links: 1, manifests: 1, chunks: 1, uploads: 0, bytesFreed: 4000))
        let replica = ReplicaID.random()
        _ = try await storage.append(zone: "photos", user: "alice", replica: replica,
                                     transactions: [Self.naming(checked, object: ObjectID(), sequence: 1, replica: replica)], storedBytesLimit: nil)
        #expect(try await storage.heldAsset(zone: "photos", sha256: checked.sha256) == checked.manifest)
        #expect(try await storage.assetChunk(zone: "photos", sha256: checked.sha256, index: 0) == checked.chunk(0))
        #expect(try await storage.heldAsset(zone: "photos", sha256: unchecked.sha256) == nil)
        try await storage.close()
    }

    @Test("a chunk shared by two assets of the owner survives the sweep of one of them; only the other's own chunks are freed",
          arguments: backends)
    func sharedChunksSurvive(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "backup", owner: "alice", access: .private, grants: [:])
        let dropped = try TestAsset(seed: 109, byteCount: 2 * AssetManifest.chunkSize + 700)
        let sharing = try TestAsset(bytes: dropped.chunk(0) + TestAsset(seed: 110, byteCount: 900).bytes)
        try await Self.upload(dropped, to: "photos", in: storage)
        try await Self.upload(sharing, to: "backup", in: storage)
        let replica = ReplicaID.random()
        try await Self.push(sharing, object: ObjectID(), to: "backup", replica: replica, in: storage)
        let before = try await storage.storedBytes(owner: "alice")

        clock.advance(Self.grace * 2)
        let report = try await storage.sweepAssets(grace: Self.grace)
        let freed = Int64(dropped.chunk(1).count + dropped.chunk(2).count)
        #expect(report == AssetSweepReport(links: 1, manifests: 1, chunks: 2, uploads: 0, bytesFreed: freed))
        #expect(try await storage.assetChunk(zone: "backup", sha256: sharing.sha256, index: 0) == dropped.chunk(0))
        #expect(try await storage.assetChunk(zone: "backup", sha256: sharing.sha256, index: 1) == sharing.chunk(1))
        #expect(try await storage.storedBytes(owner: "alice") == before - freed)
        try await storage.close()
    }

    @Test("a clock moved backwards removes nothing new: a link made while it was behind counts as made at the latest time seen, not earlier",
          arguments: backends)
    func clockBackwards(_ backend: StorageBackend) async throws {
        let clock = MovableWallClock()
        let storage = try await Self.open(StorageSite(backend), clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let early = try TestAsset(seed: 111, byteCount: 3000)
        let late = try TestAsset(seed: 112, byteCount: 4000)
        try await Self.upload(early, to: "photos", in: storage)
        clock.moveBack(.seconds(36_000))
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport())
        try await Self.upload(late, to: "photos", in: storage)
        // Set right again, 30 minutes after the first upload: nothing is an hour old.
        clock.advance(.seconds(36_000 + 1800))
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport())
        #expect(try await storage.heldAsset(zone: "photos", sha256: late.sha256) == late.manifest)
        clock.advance(.seconds(1801))
        #expect(try await storage.sweepAssets(grace: Self.grace).links == 2)
        try await storage.close()
    }

    @Test("the background compactor, and without compaction the asset sweeper, sweep assets every sweep interval and count the freed bytes in strata_asset_bytes_swept_total",
          arguments: [true, false])
    func backgroundSweeps(withCompaction: Bool) async throws {
        let storage = try await Self.open(StorageSite(.embedded), clock: MovableWallClock())
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let asset = try TestAsset(seed: 130, byteCount: 3000)
        try await Self.upload(asset, to: "photos", in: storage)
        let metrics = ServerMetrics()
        let schedule = AssetSweepSchedule(grace: .zero, interval: withCompaction ? .zero : .milliseconds(20))
        let task = Task {
            if withCompaction {
                await compactPeriodically(storage, retention: Retention(transactions: 5, interval: .milliseconds(20)), assetSweep: schedule,
                                          logger: .init(label: "test"), metrics: metrics)
            } else {
                await sweepAssetsPeriodically(storage, schedule: schedule, logger: .init(label: "test"), metrics: metrics)
            }
        }
        for _ in 0..<200 where try await storage.heldAsset(zone: "photos", sha256: asset.sha256) != nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        task.cancel()
        await task.value
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == nil)
        let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(exposition.contains("strata_asset_bytes_swept_total 3000"), "\(exposition)")
        try await storage.close()
    }

    // MARK: PostgreSQL

    @Test("a sweep on one instance while another uploads, checks and pushes loses nothing: every pushed transaction's asset is readable afterwards")
    func sweepWhileAnotherInstancePushes() async throws {
        let clock = MovableWallClock()
        let site = try StorageSite(.postgres)
        let sweeper = try await Self.open(site, clock: clock)
        let pusher = try await Self.open(site, clock: clock)
        _ = try await pusher.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let replica = ReplicaID.random()
        let rounds = 12
        let pushed = try await withThrowingTaskGroup(of: [AssetHash].self) { group in
            let done = Flag()
            group.addTask {
                while !done.value.withLock({ $0 }) {
                    _ = try await sweeper.sweepAssets(grace: .seconds(60))
                }
                return []
            }
            group.addTask {
                defer { done.value.withLock { $0 = true } }
                var pushed: [AssetHash] = []
                var sequence: UInt64 = 1
                for round in 0..<rounds {
                    let asset = try TestAsset(seed: 200 + UInt64(round), byteCount: AssetManifest.chunkSize + 100 * round)
                    // Uploaded, then older than the grace before the push checks it: only the
                    // check's confirmation keeps it from the sweeps going on.
                    while true {
                        try await Self.upload(asset, to: "photos", in: pusher)
                        clock.advance(.seconds(120))
                        if try await pusher.unheldAssets(zone: "photos", user: "alice", assets: [asset.sha256]).isEmpty { break }
                    }
                    _ = try await pusher.append(zone: "photos", user: "alice", replica: replica,
                                                transactions: [Self.naming(asset, object: ObjectID(), sequence: sequence, replica: replica)], storedBytesLimit: nil)
                    sequence += 1
                    pushed.append(asset.sha256)
                }
                return pushed
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(pushed.count == rounds)
        clock.advance(.seconds(3600))
        _ = try await sweeper.sweepAssets(grace: .seconds(60))
        for asset in pushed {
            #expect(try await sweeper.heldAsset(zone: "photos", sha256: asset) != nil, "asset \(asset) was pushed and is gone")
            #expect(try await sweeper.assetChunk(zone: "photos", sha256: asset, index: 0) != nil)
        }
        try await sweeper.close()
        try await pusher.close()
    }

    @Test("a database of schema version 9 is upgraded in place to 10: its links and uploads count as confirmed at the upgrade, kept for the grace, then swept")
    func upgradeFromVersion9() async throws {
        let cluster = try PostgresCluster.shared()
        // The upgrade stamps rows with the database's clock: the test's starts at the real time.
        let clock = MovableWallClock(milliseconds: ServerClock.systemWallMilliseconds())
        let site = try StorageSite(.postgres)
        let database = try #require(site.url?.split(separator: "/").last.map(String.init))
        func versions() throws -> String {
            try cluster.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM strata_schema_migrations", database: database)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var storage = try await Self.open(site, clock: clock)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let asset = try TestAsset(seed: 120, byteCount: 3000)
        let started = try TestAsset(seed: 121, byteCount: AssetManifest.chunkSize + 10)
        try await Self.upload(asset, to: "photos", in: storage)
        _ = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: started.manifest, storedBytesLimit: nil)
        try await storage.close()
        // What version 9 left: no confirmation times.
        _ = try cluster.psql(undoSchemaVersion12 + "ALTER TABLE strata_asset_links DROP COLUMN confirmed_at; ALTER TABLE strata_asset_uploads DROP COLUMN touched_at; ALTER TABLE strata_asset_uploads DROP COLUMN uploader, ADD PRIMARY KEY (zone_id, sha256); DELETE FROM strata_schema_migrations WHERE version >= 10",
                             database: database)
        #expect(try versions() == "1,2,3,4,5,6,7,8,9")

        // The test's clock brought to the real time the upgrade stamps with (a loaded machine may
        // have taken minutes to get here).
        clock.advance(.milliseconds(Int64(ServerClock.systemWallMilliseconds()) - Int64(clock.milliseconds)))
        storage = try await Self.open(site, clock: clock)
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11,12,13,14")
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport())
        clock.advance(Self.grace + .seconds(60))
        #expect(try await storage.sweepAssets(grace: Self.grace) == AssetSweepReport(links: 1, manifests: 1, chunks: 1, uploads: 1, bytesFreed: 3000))
        try await storage.close()
    }

    // MARK: Helpers

    /// The storage of `site` on `clock`, with small segments for the embedded one (so that
    /// compaction has whole segments to retire).
    static func open(_ site: StorageSite, clock: MovableWallClock) async throws -> any ZoneStorage {
        switch site.backend {
        case .embedded:
            var options = EmbeddedZoneStorage.Options(clock: clock.server)
            options.log.segmentSize = 4096
            return try EmbeddedZoneStorage(directory: site.directory.sub("data"), options: options)
        case .postgres, .postgresLocked:
            let options = PostgresZoneStorage.Options(compareAndSetAppends: site.backend == .postgres, clock: clock.server)
            return try await PostgresZoneStorage.startedForTest(url: PostgresConnectionURL(parsing: site.url ?? ""), options: options)
        }
    }

    /// Uploads `asset` into `zone` by its owner, and checks the zone holds it.
    static func upload(_ asset: TestAsset, to zone: ZoneID, in storage: any ZoneStorage) async throws {
        var state = try await storage.beginAssetUpload(zone: zone, user: zone.owner, manifest: asset.manifest, storedBytesLimit: nil)
        for index in state.missing {
            state = try await storage.putAssetChunk(zone: zone, user: zone.owner, sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
        }
        #expect(state == AssetUploadState(missing: [], complete: true))
    }

    /// A transaction setting `object`'s `file` to `asset` (to a string when `nil`), padded so
    /// that a few fill a log segment.
    static func naming(_ asset: TestAsset?, object: ObjectID, sequence: UInt64 = 0, replica: ReplicaID = ReplicaID(rawValue: 1)) throws -> PushedTransaction {
        let value: Value = try asset.map { .asset(try Asset(sha256: $0.sha256, byteCount: UInt64($0.bytes.count), mediaType: "application/octet-stream")) }
            ?? .string("none")
        let record = TransactionRecord(replica: replica, events: [
            Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                  change: .update(entity: "Photo", object: object, fields: ["file": value, "pad": .string((0..<10).map { _ in UUID().uuidString }.joined())])),
        ])
        return try #require(PushedTransaction(record))
    }

    /// Pushes a transaction setting `object`'s file to `asset` as the server does: the zone's
    /// check of the assets it names, then the append (the replica's next sequence).
    static func push(_ asset: TestAsset?, object: ObjectID, to zone: ZoneID, replica: ReplicaID, in storage: any ZoneStorage) async throws {
        let next = try await storage.acknowledged(zone: zone, replica: replica) + 1
        let transaction = try naming(asset, object: object, sequence: next, replica: replica)
        #expect(try await storage.unheldAssets(zone: zone, user: zone.owner, assets: transaction.namedAssets) == [])
        _ = try await storage.append(zone: zone, user: zone.owner, replica: replica, transactions: [transaction], storedBytesLimit: nil)
    }

    /// Pushes transactions naming nothing until compaction retires the zone's first position,
    /// then compacts.
    static func retireHistory(of zone: ZoneID, replica: ReplicaID, in storage: any ZoneStorage) async throws {
        for _ in 0..<40 {
            try await push(nil, object: ObjectID(), to: zone, replica: replica, in: storage)
        }
        _ = try await storage.compact(zone: zone, retaining: 2)
        #expect(try await storage.startPosition(zone: zone) > 2)
    }
}
