import Foundation
public import Logging
import NIOCore
import PostgresNIO
public import StrataCore
public import StrataProtocol
public import StrataServer
import Synchronization

/// A `ZoneStorage` in a PostgreSQL database, shared by any number of `strata serve` instances:
/// they keep no state of their own, so clients may be spread across them and fail over freely.
///
/// Every rule of `ZoneStorage` holds across instances because it is checked inside one
/// database transaction that holds the row lock of the zone (`SELECT … FOR UPDATE`): two
/// instances receiving the same retry at the same moment append it once, positions are handed
/// out without gaps, and the exactly-once and fork checks see every committed push. Quotas lock
/// the owner's row, so they hold across instances too. A push is acknowledged once its
/// transaction has committed (durable as PostgreSQL's `synchronous_commit` makes it).
///
/// Every change is announced with `NOTIFY strata_changes` in the same transaction (delivered on
/// commit), and ``changesByOthers()`` follows the announcements of the other instances with
/// `LISTEN`, so that a push to one instance wakes the long polls waiting on another.
/// ``compact(zone:retaining:)`` takes a per-zone advisory lock: one instance compacts a zone at
/// a time, and appends are held up only while the new snapshot is written, not while it is
/// computed.
///
/// The storage is a `Service`: ``run()`` runs the connection pool (PostgresNIO's
/// `PostgresClient.run()`), creates or migrates the schema (see `PostgresSchema`), follows the
/// other instances' announcements, and closes the storage when the graceful shutdown (or
/// cancellation, or ``close()``) reaches it. `strata serve` runs it as the first service of its
/// group; elsewhere, `ZoneStorage.withRunning(_:)` runs it around a body. Calls made before the
/// schema is ready wait for it (at most ``Options/connectionWait``), and fail with the reason
/// when it could not be made ready (the database unreachable, a newer schema).
///
/// ```swift
/// let storage = PostgresZoneStorage(url: try PostgresConnectionURL(parsing: "postgres://strata@db/strata"))
/// try await storage.withRunning { storage in
///     print(try await storage.zones().count)
/// }
/// ```
public final class PostgresZoneStorage: ZoneStorage {
    public struct Options: Sendable {
        /// The most connections this instance opens (one of them follows the other instances'
        /// changes once ``changesByOthers()`` is called).
        public var maxConnections: Int
        /// Chooses the epoch of a new zone. Random by default; tests may make it deterministic.
        public var makeEpoch: @Sendable () -> UInt64
        /// The longest a call waits for a connection before it fails with
        /// `ZoneStorageError.Code.storageUnavailable` (`503` with `Retry-After`): the database
        /// down, or every connection busy.
        public var connectionWait: Duration

        /// Appends the common push by compare and set, in one or two round trips, instead of
        /// under the row locks in five (see `PostgresZoneStorage+Append.swift`). Both give the
        /// same outcome; off is for comparing the two (the benchmark does).
        public var compareAndSetAppends: Bool

        /// The wall clock assets' confirmations are stamped with and swept by
        /// (`AssetStorage.sweepAssets(grace:)`); tests move it.
        public var clock: ServerClock

        public init(maxConnections: Int = 20, connectionWait: Duration = .seconds(5), compareAndSetAppends: Bool = true,
                    makeEpoch: @escaping @Sendable () -> UInt64 = { UInt64.random(in: 1 ... .max) },
                    clock: ServerClock = .system) {
            self.maxConnections = max(2, maxConnections)
            self.connectionWait = connectionWait
            self.compareAndSetAppends = compareAndSetAppends
            self.makeEpoch = makeEpoch
            self.clock = clock
        }
    }

    /// The database, password masked in its description.
    public let url: PostgresConnectionURL
    let client: PostgresClient
    let logger: Logger
    let options: Options
    /// The time asset confirmations are stamped with and swept by (never backwards here).
    let assetTimeline: AssetTimeline
    /// Tells this instance's own announcements from the others'.
    let instance = UInt64.random(in: 1 ... .max)
    /// Which way each push was appended (see `PostgresZoneStorage+Append.swift`).
    @_spi(StrataInternals) public let appendPaths = AppendPathCounts()
    /// What each replica's last push through this instance left (see `AppendBases`).
    let appendBases = AppendBases()
    /// Replica bindings seen committed (see `claimReplica(_:for:zone:on:)`).
    let replicaOwners = ReplicaOwnerCache()
    /// How long ``run()`` waits for the database before it fails.
    let connectTimeout: Duration
    /// Whether ``run()`` has made the schema ready, or why it could not.
    let readiness = StorageReadiness()
    /// Finished by ``close()``: ends ``run()``.
    private let closing: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation) = AsyncStream.makeStream()
    /// Yielded when the first follower of ``changesByOthers()`` registers: ``run()`` then listens.
    private let listenRequests: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation) =
        AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    private let state = Mutex(State())

    var isClosed: Bool { state.withLock { $0.closed } }

    private struct State {
        var closed = false
        var followers: [UInt64: AsyncStream<ZoneID>.Continuation] = [:]
    }

    /// The channel of the change announcements.
    static let channel = "strata_changes"

    /// A storage in the database at `url`. Nothing connects until ``run()`` runs.
    ///
    /// - Parameters:
    ///   - url: the database.
    ///   - options: connections, waits, how pushes are appended.
    ///   - connectTimeout: how long ``run()`` waits for the database before it fails.
    ///   - logger: where the storage logs.
    public init(url: PostgresConnectionURL, options: Options = Options(), connectTimeout: Duration = .seconds(10),
                logger: Logger = Logger(label: "strata.server.postgres")) {
        self.url = url
        self.options = options
        self.assetTimeline = AssetTimeline(options.clock.wallMilliseconds)
        self.connectTimeout = connectTimeout
        self.logger = logger
        client = PostgresClient(configuration: url.clientConfiguration(maxConnections: options.maxConnections), backgroundLogger: logger)
    }

    /// Waits until ``run()`` has made the storage ready (the database reached and its schema
    /// migrated), at most the connect timeout and then ``Options/connectionWait``.
    ///
    /// - Throws: why the storage could not open (`storageFailure`), or `storageUnavailable` when
    ///   it is not running.
    public func waitUntilOpen() async throws(ZoneStorageError) {
        try await readiness.wait(atMost: connectTimeout + options.connectionWait, url: url)
    }

    /// Runs the storage: the connection pool, the schema's creation or migration (then calls
    /// proceed), and the following of other instances' changes once asked for, until the
    /// graceful shutdown, cancellation or ``close()``; then closes the storage.
    ///
    /// - Throws: `ZoneStorageError.Code.storageFailure` when the database cannot be reached
    ///   (within the connect timeout) or its schema is newer than this server's; calls waiting
    ///   for the storage fail with the same error.
    public func run() async throws {
        let client = client
        readiness.markStarted()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            do {
                try await checkReachable(within: connectTimeout)
                let from = try await PostgresSchema.migrate(client, logger: logger)
                logger.info("postgres storage open", metadata: ["url": "\(url)", "schema": "\(PostgresSchema.version)", "migratedFrom": "\(from)"])
                readiness.resolve(.success(()))
            } catch {
                readiness.resolve(.failure(error))
                finishClosing()
                group.cancelAll()
                throw error
            }
            group.addTask {
                // Listens once somebody follows (the server always does; a tool never).
                for await _ in self.listenRequests.stream {
                    await self.listen()
                    return
                }
            }
            // Until the shutdown, cancellation, or close().
            await StorageLifecycle.untilShutdown(orFinished: closing.stream)
            finishClosing()
            group.cancelAll()
        }
    }

    /// `SELECT 1`, failing after `timeout` (the pool itself would wait for the server forever).
    private func checkReachable(within timeout: Duration) async throws(ZoneStorageError) {
        let client = client
        let logger = logger
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    try await client.query("SELECT 1", logger: logger)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(ZoneStorageError(.storageFailure, "no answer within \(timeout)"))
        }
        if case .failure(let error) = outcome {
            throw ZoneStorageError(.storageFailure, "PostgreSQL at \(url) cannot be reached: \(PostgresFailure.describe(error))")
        }
    }

    // MARK: Zones

    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await createZone(id, access: access, grants: grants, maxZonesPerOwner: nil)
    }

    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant],
                           maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        // Rules given in full: nothing kept of a deleted zone applies (it is forgotten all the same).
        try await createZone(id, settings: ZoneSettings(access: access, grants: grants), maxZonesPerOwner: maxZonesPerOwner)
    }

    /// Creates the zone with the rules `settings` names and, for the rest, those kept of the
    /// deleted zone (see `ZoneStorage.createZone(_:settings:maxZonesPerOwner:)`): read and
    /// removed in the create's transaction, under the owner's row lock.
    public func createZone(_ id: ZoneID, settings: ZoneSettings, maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        guard ZoneInfo.isValidName(id.name) else {
            throw ZoneStorageError(.invalidArgument, "invalid zone name \"\(id.name)\": 1–64 of [A-Za-z0-9._-]")
        }
        guard !id.owner.isEmpty else { throw ZoneStorageError(.invalidArgument, "a zone needs an owner") }
        if let grants = settings.grants { _ = try Self.encode(grants) }
        let firstEpoch = options.makeEpoch()
        let info = try await transaction("creating zone \(id)", zone: id) { connection in
            // The owner's row serializes the creates of one owner across instances: the quota
            // count and the insert cannot interleave with another create.
            try await connection.query("INSERT INTO strata_owners (owner) VALUES (\(id.owner)) ON CONFLICT DO NOTHING", logger: self.logger)
            try await connection.query("SELECT 1 FROM strata_owners WHERE owner = \(id.owner) FOR UPDATE", logger: self.logger)
            if try await self.zoneRow(id, on: connection) != nil {
                throw ZoneStorageError(.zoneExists, "zone \(id) already exists", zone: id.description)
            }
            if let limit = maxZonesPerOwner, limit > 0 {
                let owned = try await self.values(connection.query("SELECT count(*) FROM strata_zones WHERE owner = \(id.owner)", logger: self.logger),
                                                as: Int64.self).first ?? 0
                if owned >= limit { throw ZoneStorageError.zonesQuota(owner: id.owner, limit: limit, owned: Int(owned), zone: id) }
            }
            let (access, grants) = Self.rules(settings, keeping: try await self.deletedZoneRules(id, on: connection))
            let grantsText = try Self.encode(grants)
            let lineage = ZoneInfo.lineage(continuing: settings.continues, kept: try await self.deletedZoneLife(id, on: connection))
            var epoch = firstEpoch
            while lineage.contains(epoch) { epoch = self.options.makeEpoch() }
            // Grantees kept through the deletion keep their acceptance (rows of before it was kept:
            // every grant accepted); grants the settings name are new.
            var accepted: [String] = []
            if settings.grants == nil {
                let kept = try await self.values(connection.query("""
                    SELECT accepted FROM strata_deleted_zones WHERE owner = \(id.owner) AND name = \(id.name)
                    """, logger: self.logger), as: [String]?.self)
                if let row = kept.first { accepted = (row ?? Array(grants.keys)).filter { grants[$0] != nil }.sorted() }
            }
            try await connection.query("""
                INSERT INTO strata_zones (owner, name, epoch, access, grants, lineage, accepted)
                VALUES (\(id.owner), \(id.name), \(Int64(bitPattern: epoch)), \(access.rawValue), \(grantsText),
                        \(lineage.map { Int64(bitPattern: $0) }), \(accepted))
                """, logger: self.logger)
            // Long polls of the database changes on the other instances (a grantee's) wake.
            try await self.announce(id, on: connection)
            // The zone has its own rules now: what was kept of a deleted one is forgotten.
            try await connection.query("DELETE FROM strata_deleted_zones WHERE owner = \(id.owner) AND name = \(id.name)", logger: self.logger)
            var info = ZoneInfo(name: id.name, owner: id.owner, access: access, grants: grants, epoch: epoch)
            info.lineage = lineage
            info.accepted = Set(accepted)
            return info
        }
        logger.info("zone created", metadata: ["zone": "\(id)", "access": "\(info.access.rawValue)"])
        return info
    }

    public func deletedZoneRules(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneSettings? {
        try await withConnection("reading the rules kept of deleted zone \(id)", zone: id) { connection in
            try await self.deletedZoneRules(id, on: connection)
        }
    }

    /// The epoch and lineage kept of deleted zone `id` (`nil` when none was kept).
    private func deletedZoneLife(_ id: ZoneID, on connection: PostgresConnection) async throws -> (epoch: UInt64, lineage: [UInt64])? {
        let found = try await rows(connection.query("""
            SELECT epoch, lineage FROM strata_deleted_zones WHERE owner = \(id.owner) AND name = \(id.name)
            """, logger: logger), as: (Int64?, [Int64]).self)
        guard let (epoch, lineage) = found.first, let epoch else { return nil }
        return (UInt64(bitPattern: epoch), lineage.map { UInt64(bitPattern: $0) })
    }

    /// The rules kept of deleted zone `id` (see ``deletedZoneRules(_:)``).
    private func deletedZoneRules(_ id: ZoneID, on connection: PostgresConnection) async throws -> ZoneSettings? {
        let found = try await rows(connection.query("""
            SELECT access, grants FROM strata_deleted_zones WHERE owner = \(id.owner) AND name = \(id.name)
            """, logger: logger), as: (String, String).self)
        guard let (accessText, grantsText) = found.first else { return nil }
        guard let access = ZoneAccess(rawValue: accessText),
              let grants = try? JSONDecoder().decode([String: ZoneGrant].self, from: Data(grantsText.utf8)) else {
            throw ZoneStorageError(.storageFailure, "the rules kept of deleted zone \(id) do not decode: access \(accessText), grants \(grantsText)", zone: id.description)
        }
        return ZoneSettings(access: access, grants: grants)
    }

    public func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? {
        try await withConnection("looking up zone \(id)", zone: id) { connection in
            try await self.zoneRow(id, on: connection)?.info
        }
    }

    public func zones() async throws(ZoneStorageError) -> [ZoneInfo] {
        try await withConnection("listing the zones", zone: nil) { connection in
            try await self.rows(connection.query("SELECT \(unescaped: ZoneRow.describedColumns) FROM strata_zones", logger: self.logger),
                                as: ZoneRow.Described.self).map { try ZoneRow(described: $0).decoded().info }
        }.sorted { $0.id < $1.id }
    }

    public func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        let grantsText = try Self.encode(grants)
        let updated = try await withConnection("updating zone \(id)", zone: id) { connection in
            let row = try await self.rows(connection.query("""
                UPDATE strata_zones SET access = \(access.rawValue), grants = \(grantsText),
                    accepted = ARRAY(SELECT a FROM unnest(accepted) AS a WHERE \(grantsText)::jsonb ? a ORDER BY a)
                WHERE owner = \(id.owner) AND name = \(id.name) RETURNING \(unescaped: ZoneRow.describedColumns)
                """, logger: self.logger), as: ZoneRow.Described.self).first.map { ZoneRow(described: $0) }
            // Long polls of the zone on the other instances wake and check their callers' access.
            if row != nil { try await self.announce(id, on: connection) }
            return row
        }
        guard let updated else { throw Self.notFound(id) }
        logger.info("zone updated", metadata: ["zone": "\(id)", "access": "\(access.rawValue)"])
        return try updated.decoded().info
    }

    public func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo {
        let updated = try await withConnection("updating zone \(id)", zone: id) { connection in
            try await self.rows(connection.query("""
                UPDATE strata_zones SET min_schema_version = \(Int32(clamping: version))
                WHERE owner = \(id.owner) AND name = \(id.name) RETURNING \(unescaped: ZoneRow.describedColumns)
                """, logger: self.logger), as: ZoneRow.Described.self).first.map { ZoneRow(described: $0) }
        }
        guard let updated else { throw Self.notFound(id) }
        logger.info("zone updated", metadata: ["zone": "\(id)", "minSchemaVersion": "\(version)"])
        return try updated.decoded().info
    }

    public func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) {
        try await transaction("deleting zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection, lock: true) else { throw Self.notFound(id) }
            try await connection.query("DELETE FROM strata_zones WHERE zone_id = \(zone.key)", logger: self.logger)
            // Its rules, epoch and lineage are kept for a recreation (that restores or continues
            // it); beyond the per-owner limit the oldest kept are dropped.
            try await connection.query("DELETE FROM strata_deleted_zones WHERE owner = \(id.owner) AND name = \(id.name)", logger: self.logger)
            do {
                let grantsText = try Self.encode(zone.info.grants)
                try await connection.query("""
                    INSERT INTO strata_deleted_zones (owner, name, access, grants, epoch, lineage, accepted)
                    VALUES (\(id.owner), \(id.name), \(zone.info.access.rawValue), \(grantsText), \(Int64(bitPattern: zone.info.epoch)),
                            \(zone.info.lineage.map { Int64(bitPattern: $0) }), \(zone.info.accepted.intersection(zone.info.grants.keys).sorted()))
                    """, logger: self.logger)
                let limit = Self.keptDeletedZoneRulesPerOwner
                try await connection.query("""
                    DELETE FROM strata_deleted_zones WHERE owner = \(id.owner) AND deleted_order NOT IN (
                        SELECT deleted_order FROM strata_deleted_zones WHERE owner = \(id.owner) ORDER BY deleted_order DESC LIMIT \(limit))
                    """, logger: self.logger)
            }
            try await connection.query("UPDATE strata_owners SET stored_bytes = stored_bytes - \(zone.storedBytes) WHERE owner = \(id.owner)",
                                       logger: self.logger)
            try await self.announce(id, on: connection)
        }
        logger.info("zone deleted", metadata: ["zone": "\(id)"])
    }

    // MARK: Push and pull

    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: id, user: user, replica: replica, transactions: transactions, storedBytesLimit: nil)
    }

    public func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64 {
        try await withConnection("reading the stored bytes of \(owner)", zone: nil) { connection in
            try await self.values(connection.query("SELECT stored_bytes FROM strata_owners WHERE owner = \(owner)", logger: self.logger),
                                as: Int64.self).first ?? 0
        }
    }

    /// The zone's transactions from a position on, read in one statement (see the protocol's
    /// `read(zone:epoch:after:limit:)` for the errors).
    public func read(zone id: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        guard limit > 0 else { throw ZoneStorageError(.invalidArgument, "the limit must be positive, got \(limit)", zone: id.description) }
        return try await withConnection("reading zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            if let epoch, epoch != zone.info.epoch {
                throw ZoneStorageError(.zoneReset, "zone \(id) was reset: its epoch is \(Self.hex(zone.info.epoch)), not \(Self.hex(epoch))", zone: id.description)
            }
            guard position >= zone.start else {
                throw ZoneStorageError(.positionRetired, "zone \(id): position \(position) was retired; the zone's history starts at \(zone.start)", zone: id.description)
            }
            guard position <= zone.end else {
                throw ZoneStorageError(.positionBeyondEnd, "zone \(id): position \(position) is past the end of the log (\(zone.end))", zone: id.description)
            }
            // Only what was committed when the zone's row was read: a page never runs ahead of
            // the end it reports.
            let found = try await self.rows(connection.query("""
                SELECT position, bytes FROM strata_transactions
                WHERE zone_id = \(zone.key) AND position >= \(Int64(position)) AND position < \(Int64(zone.end))
                ORDER BY position LIMIT \(limit)
                """, logger: self.logger), as: (Int64, ByteBuffer?).self)
            var entries: [ZoneEntry] = []
            entries.reserveCapacity(found.count)
            for (at, bytes) in found {
                // Retired by a compaction that committed after the zone's row was read.
                guard let bytes else {
                    throw ZoneStorageError(.positionRetired, "zone \(id): position \(at) was retired while it was read", zone: id.description)
                }
                entries.append(ZoneEntry(position: UInt64(at), bytes: Array(bytes.readableBytesView)))
            }
            let next = entries.last.map { $0.position + 1 } ?? position
            return ReadResult(epoch: zone.info.epoch, transactions: entries, nextPosition: next, moreComing: next < zone.end)
        }
    }

    public func endPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await existingZone(id).end
    }

    public func startPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await existingZone(id).start
    }

    public func replicas(zone id: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] {
        try await withConnection("listing the replicas of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            return try await self.rows(connection.query("""
                SELECT replica_high, replica_low, owner, acknowledged FROM strata_replicas WHERE zone_id = \(zone.key)
                """, logger: self.logger), as: (Int64, Int64, String?, Int64).self)
                .map { ReplicaInfo(replica: Self.replica($0.0, $0.1), user: $0.2, acknowledged: UInt64(bitPattern: $0.3)) }
        }.sorted { $0.replica < $1.replica }
    }

    public func acknowledged(zone id: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
        let (high, low) = Self.halves(replica)
        return try await withConnection("reading a replica of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            let found = try await self.values(connection.query("""
                SELECT acknowledged FROM strata_replicas WHERE zone_id = \(zone.key) AND replica_high = \(high) AND replica_low = \(low)
                """, logger: self.logger), as: Int64.self)
            return found.first.map { UInt64(bitPattern: $0) } ?? 0
        }
    }

    public func fingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        return try await withConnection("reading the history of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            // Like the embedded storage's chain: kept from the log's first position through its end.
            guard position >= zone.start, position <= zone.end else { return nil }
            if position == zone.end { return zone.chain }
            return try await self.values(connection.query("""
                SELECT chain FROM strata_transactions WHERE zone_id = \(zone.key) AND position = \(Int64(position - 1))
                """, logger: self.logger), as: Int64.self).first.map { UInt64(bitPattern: $0) }
        }
    }

    public func lastTransactionFingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        return try await withConnection("reading the history of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            return try await self.values(connection.query("""
                SELECT digest_high FROM strata_transactions WHERE zone_id = \(zone.key) AND position = \(Int64(position - 1))
                """, logger: self.logger), as: Int64.self).first.map { UInt64(bitPattern: $0) }
        }
    }

    public func snapshotPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64? {
        try await withConnection("reading the snapshot of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            return try await self.values(connection.query("SELECT position FROM strata_snapshots WHERE zone_id = \(zone.key)", logger: self.logger),
                                       as: Int64.self).first.map { UInt64($0) }
        }
    }

    public func snapshot(zone id: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? {
        try await withConnection("reading the snapshot of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            return try await self.storedSnapshot(of: zone, on: connection)
        }
    }

    // MARK: Changes by other instances

    public func changesByOthers() -> AsyncStream<ZoneID> {
        let (stream, continuation) = AsyncStream<ZoneID>.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let key = UInt64.random(in: 0 ... .max)
        let registered = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.followers[key] = continuation
            return true
        }
        if registered { listenRequests.continuation.yield() }
        guard registered else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.followers.removeValue(forKey: key) }
        }
        return stream
    }

    /// `LISTEN strata_changes` on a connection of its own, again after a lost connection; after a
    /// reconnection every zone is announced (what was missed meanwhile is unknown).
    private func listen() async {
        var reconnecting = false
        while !Task.isCancelled && !state.withLock({ $0.closed }) {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        self.logger.info("following the changes of other instances", metadata: ["channel": "\(Self.channel)"])
                        if reconnecting {
                            for zone in (try? await self.zones()) ?? [] { self.broadcast(zone.id) }
                        }
                        for try await notification in notifications {
                            guard let zone = Self.announced(notification.payload, excluding: self.instance) else { continue }
                            self.broadcast(zone)
                        }
                    }
                }
            } catch {
                if Task.isCancelled || state.withLock({ $0.closed }) { return }
                logger.warning("the change announcements of other instances are not followed; retrying", metadata: [
                    "error": "\(PostgresFailure.describe(error))",
                ])
            }
            reconnecting = true
            try? await Task.sleep(for: .milliseconds(500))
        }
    }

    private func broadcast(_ zone: ZoneID) {
        for follower in state.withLock({ Array($0.followers.values) }) { follower.yield(zone) }
    }

    /// `NOTIFY strata_changes` with the zone (delivered when the transaction commits).
    func announce(_ id: ZoneID, on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_notify(\(Self.channel), \(announcement(id)))", logger: logger)
    }

    /// The payload announcing a change of `id`: this instance, then the zone.
    func announcement(_ id: ZoneID) -> String {
        "\(Self.hex(instance)) \(id.name)/\(id.owner)"
    }

    /// The zone an announcement names, `nil` for this instance's own or a malformed one.
    static func announced(_ payload: String, excluding instance: UInt64) -> ZoneID? {
        guard let space = payload.firstIndex(of: " ") else { return nil }
        guard UInt64(payload[..<space], radix: 16) != instance else { return nil }
        let zone = payload[payload.index(after: space)...]
        guard let slash = zone.firstIndex(of: "/") else { return nil }
        return ZoneID(owner: String(zone[zone.index(after: slash)...]), name: String(zone[..<slash]))
    }

    // MARK: Closing

    /// Closes the storage: later calls fail, followers of ``changesByOthers()`` finish, and
    /// ``run()`` returns (stopping the connection pool).
    public func close() async throws(ZoneStorageError) {
        finishClosing()
    }

    private func finishClosing() {
        let followers = state.withLock { state -> [AsyncStream<ZoneID>.Continuation] in
            guard !state.closed else { return [] }
            state.closed = true
            defer { state.followers = [:] }
            return Array(state.followers.values)
        }
        for follower in followers { follower.finish() }
        listenRequests.continuation.finish()
        closing.continuation.finish()
        readiness.resolve(.failure(ZoneStorageError(.storageFailure, "the PostgreSQL storage at \(url) is closed")))
    }
}
