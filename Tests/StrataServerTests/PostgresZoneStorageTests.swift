import Foundation
import Logging
import Strata
@_spi(StrataInternals) import StrataPostgres
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// What only the PostgreSQL storage has: several instances on one database, the schema it
/// migrates itself, the change announcements between instances, and its connection URL.
@Suite("PostgreSQL zone storage: instances sharing one database")
struct PostgresZoneStorageTests {
    let replica = ReplicaID.random()

    @Test("the same pushes arriving at two instances at the same moment are appended once, in one gapless log")
    func duplicatePushesAcrossInstances() async throws {
        let site = try StorageSite(.postgres)
        let first = try await site.open()
        let second = try await site.openAnotherInstance()
        _ = try await first.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let replicas = (0..<4).map { _ in ReplicaID.random() }
        // Each replica's three pushes, each sent to both instances at once, eight times over.
        var appended = 0
        for step in UInt64(0)..<3 {
            let batches = try replicas.map { replica in
                (replica, [try pushed(transaction(replica, (step * 2 + 1)...(step * 2 + 2)))])
            }
            appended += try await withThrowingTaskGroup(of: Int.self) { group in
                for (replica, batch) in batches {
                    for copy in 0..<8 {
                        let instance = copy % 2 == 0 ? first : second
                        group.addTask { try await instance.append(zone: "notes", replica: replica, transactions: batch).appended }
                    }
                }
                return try await group.reduce(0, +)
            }
        }
        #expect(appended == 12)
        // Both ways of appending ran: the first append of the zone can only be a compare and
        // set (nothing had changed yet), and seven of each push's eight copies are decided under
        // the lock (retries, or a compare and set that lost to another append).
        let paths = try [first, second].map { try #require($0 as? PostgresZoneStorage).appendPaths }
        let compareAndSet: Int = paths.reduce(0) { $0 + $1.compareAndSet }
        let underLock: Int = paths.reduce(0) { $0 + $1.underLock }
        #expect(compareAndSet >= 1)
        #expect(underLock >= 12 * 7)
        #expect(compareAndSet + underLock == 12 * 8)
        #expect(try await first.endPosition(zone: "notes") == 12)
        let read = try await second.read(zone: "notes", after: 0, limit: 100)
        #expect(read.transactions.map(\.position) == Array(0..<12))
        for replica in replicas {
            #expect(try await first.acknowledged(zone: "notes", replica: replica) == 6)
            #expect(try await second.acknowledged(zone: "notes", replica: replica) == 6)
        }
        try await first.close()
        try await second.close()
    }

    @Test("a replica's pushes through one instance start from the basis its last push left; a basis another instance or a delete made stale changes nothing and the push still lands once")
    func rememberedBasis() async throws {
        let site = try StorageSite(.postgres)
        let first = try await site.open()
        let second = try await site.openAnotherInstance()
        let a = try #require(first as? PostgresZoneStorage), b = try #require(second as? PostgresZoneStorage)
        _ = try await first.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let replica = ReplicaID.random(), other = ReplicaID.random()
        // Read, then remembered.
        #expect(try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))]).position == 1)
        #expect(try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 2...2))]).position == 2)
        #expect(a.appendPaths.afterRead == 1 && a.appendPaths.fromRememberedBasis == 1)
        // Another replica through the other instance moves the zone's end: the remembered basis
        // is stale, the compare and set refuses it, a fresh read appends at the right place.
        #expect(try await second.append(zone: "notes", replica: other, transactions: [pushed(transaction(other, 1...1))]).position == 3)
        let third = try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 3...3))])
        #expect(third.position == 4 && third.acknowledged == 3 && third.appended == 1)
        #expect(a.appendPaths.afterRead == 2 && a.appendPaths.fromRememberedBasis == 1 && a.appendPaths.underLock == 0)
        // The same replica through the other instance (a client failing over): the first
        // instance's basis now has a stale ledger as well as a stale end.
        let fourth = try pushed(transaction(replica, 4...4))
        #expect(try await second.append(zone: "notes", replica: replica, transactions: [fourth]).position == 5)
        // A retry of what the other instance appended is decided under the lock, appended once.
        let retry = try await first.append(zone: "notes", replica: replica, transactions: [fourth])
        #expect(retry.appended == 0 && retry.acknowledged == 4 && retry.position == 5)
        #expect(a.appendPaths.underLock == 1)
        // The zone deleted and recreated under the same name: the basis names the old row.
        _ = try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 5...5))])
        try await second.deleteZone(ZoneID(owner: "alice", name: "notes"))
        _ = try await second.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let fresh = try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        #expect(fresh.position == 1 && fresh.appended == 1)
        #expect(try await first.read(zone: "notes", after: 0, limit: 10).transactions.map(\.position) == [0])
        #expect(b.appendPaths.underLock == 0)
        try await first.close()
        try await second.close()
    }

    @Test("a change made through one instance is announced to the others (LISTEN/NOTIFY), not to itself")
    func changesAnnouncedAcrossInstances() async throws {
        let site = try StorageSite(.postgres)
        let first = try await site.open()
        let second = try await site.openAnotherInstance()
        _ = try await first.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let seenBySecond = second.changesByOthers()
        let seenByFirst = first.changesByOthers()
        // The followers listen once their connection is up: push until the first announcement
        // arrives (a push before LISTEN took effect is announced to nobody).
        let heard = Mutex<ZoneID?>(nil)
        let received = Task { () -> ZoneID? in
            for await zone in seenBySecond {
                heard.withLock { $0 = zone }
                return zone
            }
            return nil
        }
        var sequence: UInt64 = 0
        while sequence < 200 {
            sequence += 1
            _ = try await first.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, sequence...sequence))])
            try await Task.sleep(for: .milliseconds(50))
            if heard.withLock({ $0 }) != nil { break }
        }
        #expect(await received.value == ZoneID(owner: "alice", name: "notes"))
        // The first instance's own follower heard nothing of its own pushes.
        try await first.close()
        var own: [ZoneID] = []
        for await zone in seenByFirst { own.append(zone) }
        #expect(own.isEmpty)
        try await second.close()
    }

    @Test("the schema is migrated once and recorded, also from version 1 (with its zones); a database migrated by a newer server is refused")
    func migrations() async throws {
        let cluster = try PostgresCluster.shared()
        let site = try StorageSite(.postgres)
        let storage = try await site.open()
        try await storage.close()
        let database = try #require(site.url?.split(separator: "/").last.map(String.init))
        func versions() throws -> String {
            try cluster.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM strata_schema_migrations", database: database)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11,12,13,14")
        let again = try await site.open()
        try await again.close()
        #expect(try cluster.psql("SELECT count(*) FROM strata_schema_migrations", database: database)
            .trimmingCharacters(in: .whitespacesAndNewlines) == "14")
        // A database a version-1 server wrote (a zone with a push in it) is brought to version 6
        // (version 2's append function created, then replaced by version 4's, which also checks
        // who may push; version 5's shared limit buckets; version 6's function that only compares
        // a plan's basis and writes its rows, next to version 4's, which stays for older instances
        // during a rolling upgrade; version 7's server-wide replica owners, filled from the
        // zones' owners; version 8's zone lineages; version 9's asset tables) and keeps its log; pushes then take the
        // two-round-trip path.
        let old = try await site.open()
        _ = try await old.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let replica = ReplicaID.random()
        _ = try await old.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        try await old.close()
        try cluster.psql(undoSchemaVersion12 + "DROP FUNCTION strata_append_planned; DROP FUNCTION strata_append_if_unchanged; DROP TABLE strata_deleted_zones; DROP TABLE strata_limit_buckets; DROP TABLE strata_replica_owners; ALTER TABLE strata_zones DROP COLUMN lineage; DROP TABLE strata_asset_chunks, strata_asset_manifests, strata_asset_links, strata_asset_uploads; DELETE FROM strata_schema_migrations WHERE version >= 2",
                         database: database)
        #expect(try versions() == "1")
        let upgraded = try await site.open()
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11,12,13,14")
        #expect(try cluster.psql("SELECT owner FROM strata_replica_owners", database: database).trimmingCharacters(in: .whitespacesAndNewlines) == "alice")
        _ = try await upgraded.createZone(name: "mine", owner: "bob", access: .private, grants: [:])
        await #expect { _ = try await upgraded.append(zone: "bob/mine", replica: replica, transactions: [pushed(transaction(replica, 1...1))]) } throws: {
            ($0 as? ZoneStorageError)?.code == .replicaNotYours
        }
        let outcome = try await upgraded.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 2...3))])
        #expect(outcome.appended == 1 && outcome.position == 2 && outcome.acknowledged == 3)
        let postgres = try #require(upgraded as? PostgresZoneStorage)
        #expect(postgres.appendPaths.afterRead == 1 && postgres.appendPaths.underLock == 0)
        #expect(try await upgraded.read(zone: "notes", after: 0, limit: 10).transactions.map(\.position) == [0, 1])
        try await upgraded.close()
        try cluster.psql("INSERT INTO strata_schema_migrations (version) VALUES (99)", database: database)
        do {
            _ = try await site.open()
            Issue.record("a newer schema was opened")
        } catch let error as ZoneStorageError {
            #expect(error.code == .storageFailure && error.message.contains("version 99"), "\(error)")
        }
    }

    @Test("a database that cannot be reached ends the storage's run with storageFailure, in time, and a call waiting for the storage fails with that reason; a storage nobody runs fails calls with storageUnavailable")
    func unreachable() async throws {
        let url = try PostgresConnectionURL(parsing: "postgres://strata@127.0.0.1:9/nothing?sslmode=disable")
        let storage = PostgresZoneStorage(url: url, connectTimeout: .seconds(2), logger: Logger(label: "test"))
        let started = ContinuousClock.now
        do {
            _ = try await storage.withRunning { storage in try await storage.zones() }
            Issue.record("listed the zones of a database on a closed port")
        } catch let error as ZoneStorageError {
            #expect(error.code == .storageFailure && error.message.contains("cannot be reached"), "\(error)")
        }
        // Bounded, not hanging on a pool that retries for ever: the connect timeout (2 s) plus
        // whatever a machine running every suite at once adds (16 s was seen, and 80 s once).
        #expect(ContinuousClock.now - started < .seconds(180), "the failure took \(ContinuousClock.now - started)")

        let idle = PostgresZoneStorage(url: url, options: PostgresZoneStorage.Options(connectionWait: .milliseconds(200)), logger: Logger(label: "test"))
        do {
            _ = try await idle.zones()
            Issue.record("a storage nobody runs answered")
        } catch {
            #expect(error.code == .storageUnavailable && error.message.contains("not running"), "\(error)")
        }
        try await idle.close()
    }

    @Test("a database that crashes: calls fail promptly with storageUnavailable (503 serverBusy, Retry-After), nothing acknowledged is lost, and the same push succeeds once it is back")
    func databaseDown() async throws {
        // Durable commits: the server is crashed (stopped `immediate`), and what it committed must be there after.
        let cluster = try PostgresCluster.start(durable: true)
        defer { cluster.stop() }
        let url = try cluster.createDatabase()
        let storage = try await PostgresZoneStorage.startedForTest(url: PostgresConnectionURL(parsing: url),
                                                         options: PostgresZoneStorage.Options(connectionWait: .seconds(1)), logger: Logger(label: "test"))
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let first = try pushed(transaction(replica, 1...2))
        #expect(try await storage.append(zone: "notes", replica: replica, transactions: [first]).appended == 1)

        try cluster.halt()
        let next = try pushed(transaction(replica, 3...3))
        let replica = replica
        let down = await refusal { () async throws(ZoneStorageError) in _ = try await storage.append(zone: "notes", replica: replica, transactions: [next]) }
        #expect(down?.code == .storageUnavailable, "\(String(describing: down))")
        let answer = ServerError(try #require(down))
        #expect(answer.code == .serverBusy && answer.retryAfter == 1)
        let reading = await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "notes", after: 0, limit: 10) }
        #expect(reading?.code == .storageUnavailable)

        try cluster.resume()
        var outcome: AppendOutcome?
        for _ in 0..<200 where outcome == nil {
            outcome = try? await storage.append(zone: "notes", replica: replica, transactions: [first, next])
            if outcome == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(outcome?.appended == 1 && outcome?.position == 2 && outcome?.acknowledged == 3)
        #expect(try await storage.read(zone: "notes", after: 0, limit: 10).transactions.count == 2)
        try await storage.close()
    }

    @Test("connection URLs: TCP and Unix sockets, the password masked when printed, bad ones refused with the reason")
    func connectionURLs() throws {
        let tcp = try PostgresConnectionURL(parsing: "postgres://strata:s3cret@db.example:6543/zones?sslmode=require")
        #expect(tcp.user == "strata" && tcp.password == "s3cret" && tcp.host == "db.example" && tcp.port == 6543)
        #expect(tcp.database == "zones" && tcp.tls == .require)
        #expect(!tcp.description.contains("s3cret") && tcp.description.contains("****"))
        let socket = try PostgresConnectionURL(parsing: "postgresql://strata@/zones?host=/run/postgresql", password: "from-env")
        #expect(socket.socketDirectory == "/run/postgresql" && socket.host == nil && socket.tls == .disable && socket.password == "from-env")
        for bad in ["mysql://a@b/c", "postgres://db/zones", "postgres://a@b/c?sslmode=sometimes", "postgres://a@/c"] {
            #expect(throws: ZoneStorageError.self, "\(bad)") { try PostgresConnectionURL(parsing: bad) }
        }
    }
}
