import Foundation
public import StrataProtocol
public import Logging
public import Strata
public import StrataLog
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``ZoneStorage`` in a local data directory: one `SegmentLog` per zone, the zones' metadata in
/// one JSON file.
///
/// Layout of the data directory:
///
/// - `zones.json`: the zones' metadata (owner, name, access, grants, epoch), replaced atomically
///   (temporary file, `fsync`, `rename`, `fsync` of the directory) on every change. Format 2;
///   format 1 (written before zones were named by owner and name, when names were unique
///   server-wide) is read as is and rewritten as format 2 on the next change.
/// - `zones/<name>-<epoch as 16 hex digits>/`: the zone's segment log. Each transaction is one log
///   entry; each push is one log record, so a push is in the log wholly or not at all. Beside the
///   log, `replicas.json` (which user each replica belongs to) and `retired-digests` (the digests
///   of transactions compaction retired): see `ZoneLedgerFiles`.
/// - `LOCK`: held while the storage is open.
///
/// Per zone and replica, the owner, the highest sequence held and each held transaction's digest
/// are kept in memory (`ReplicaLedger`) and rebuilt on open from those files and a scan of the
/// zone's log. Appends are durable under `Durability.groupCommit` by default: a
/// push is answered only once its record is on stable storage, and concurrent pushes share a sync.
///
/// ```swift
/// let storage = try EmbeddedZoneStorage(directory: "/var/lib/strata")
/// _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
/// let outcome = try await storage.append(zone: "notes", replica: replica, transactions: batch)
/// try await storage.close()
/// ```
public actor EmbeddedZoneStorage: ZoneStorage {
    /// Options of an ``EmbeddedZoneStorage``.
    public struct Options: Sendable {
        /// Options of every zone's log. The default is group commit with LZ4 compression.
        public var log: LogOptions
        /// Chooses the epoch of a new zone. Random by default; tests may make it deterministic.
        public var makeEpoch: @Sendable () -> UInt64

        public init(log: LogOptions = LogOptions(durability: .groupCommit),
                    makeEpoch: @escaping @Sendable () -> UInt64 = { UInt64.random(in: 1 ... .max) }) {
            self.log = log
            self.makeEpoch = makeEpoch
        }
    }

    /// The data directory.
    public nonisolated let directory: String
    private let options: Options
    private let logger: Logger
    private let lock: DirectoryLock
    private var zoneStates: [ZoneID: ZoneState]
    /// The rules of deleted zones, kept for their recreation (in the catalog).
    private var keptRules: [ZoneID: KeptRules] = [:]
    /// Recoveries of zones whose log failed.
    private var recoveries: [ZoneID: Task<Void, Never>] = [:]
    /// Why the last reopen of a failed zone log failed (a full disk answers `storageFull`).
    private var recoveryFailures: [ZoneID: ZoneStorageError] = [:]
    /// Bytes on disk per zone owner (their zones' logs and snapshots), for the stored-bytes quota:
    /// measured on open, kept up to date by every change.
    private var usage: [String: Int64] = [:]
    private var closed = false

    private struct ZoneState {
        var info: ZoneInfo
        var log: SegmentLog
        /// Per replica: its owner, the highest sequence appended (submitted), the digests.
        var ledgers: [ReplicaID: ReplicaLedger]
        /// The running hash of the zone's history, for the positions tokens may point at.
        var chain: HistoryChain
        /// Set when an append or sync failed: the log refuses appends until it is reopened.
        var broken = false
        /// Bytes of the zone's log segments and snapshots (appends counted as they land).
        var storedBytes: Int64 = 0
    }

    private struct Catalog: Codable {
        var formatVersion: Int
        var zones: [ZoneInfo]
        /// The access rules of deleted zones, kept for their recreation, oldest deletion first
        /// (absent in catalogs written before they were kept; older servers ignore the key).
        var deleted: [KeptRules]?
    }

    /// A deleted zone's access and grants (see ``ZoneStorage/deletedZoneRules(_:)``).
    private struct KeptRules: Codable {
        var owner: String
        var name: String
        var access: ZoneAccess
        var grants: [String: ZoneGrant]
        /// Orders deletions (the oldest are dropped beyond the per-owner limit).
        var order: UInt64

        var id: ZoneID { ZoneID(owner: owner, name: name) }
        var settings: ZoneSettings { ZoneSettings(access: access, grants: grants) }
    }

    private static let catalogVersion = 2

    /// Opens (creating when needed) the storage in `directory`: reads `zones.json`, opens every
    /// zone's log (recovering a torn tail) and rebuilds the per-replica sequences from the logs.
    /// Zone directories that `zones.json` does not name (left by a crash during a create or a
    /// delete) are removed.
    ///
    /// - Throws: ``ZoneStorageError/Code/storageFailure`` when the directory is locked by another
    ///   storage, `zones.json` is damaged, a zone's log is missing or damaged, or a file cannot be
    ///   read or written.
    public init(directory: String, options: Options = Options(),
                logger: Logger = Logger(label: "strata.server.storage")) throws(ZoneStorageError) {
        self.directory = directory
        self.options = options
        self.logger = logger
        try DurableFile.makeDirectories(DurableFile.join(directory, "zones"))
        let lock = try DirectoryLock.forDataDirectory(directory)
        self.lock = lock
        var states: [ZoneID: ZoneState] = [:]
        var kept: [ZoneID: KeptRules] = [:]
        do {
            try Self.openZones(in: directory, options: options, logger: logger, into: &states, keeping: &kept)
        } catch {
            for state in states.values { Task { try? await state.log.close() } }
            lock.release()
            throw error
        }
        for id in Array(states.keys) {
            if let state = states[id] { states[id]?.storedBytes = Self.measure(state.log) }
        }
        self.zoneStates = states
        self.keptRules = kept
        self.usage = states.values.reduce(into: [:]) { $0[$1.info.owner, default: 0] += $1.storedBytes }
    }

    deinit {
        lock.release()
    }

    // MARK: Zones

    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await createZone(id, access: access, grants: grants, maxZonesPerOwner: nil)
    }

    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant],
                           maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        guard ZoneInfo.isValidName(id.name) else {
            throw ZoneStorageError(.invalidArgument, "invalid zone name \"\(id.name)\": 1–64 of [A-Za-z0-9._-]")
        }
        guard !id.owner.isEmpty else { throw ZoneStorageError(.invalidArgument, "a zone needs an owner") }
        guard zoneStates[id] == nil else {
            throw ZoneStorageError(.zoneExists, "zone \(id) already exists", zone: id.description)
        }
        // Counted and claimed without a suspension in between: concurrent creates cannot pass the
        // quota together.
        if let limit = maxZonesPerOwner, limit > 0 {
            let owned = zoneStates.keys.reduce(0) { $0 + ($1.owner == id.owner ? 1 : 0) }
            if owned >= limit { throw ZoneStorageError.zonesQuota(owner: id.owner, limit: limit, owned: owned, zone: id) }
        }
        // Zones of different owners may share a name: the epoch keeps their directories apart.
        let taken = Set(zoneStates.values.map { Self.logDirectoryName(for: $0.info) })
        var info = ZoneInfo(name: id.name, owner: id.owner, access: access, grants: grants, epoch: 0)
        while info.epoch == 0 || taken.contains(Self.logDirectoryName(for: info)) { info.epoch = options.makeEpoch() }
        let path = Self.logDirectory(in: directory, for: info)
        try DurableFile.removeTree(path)
        let log: SegmentLog
        do {
            var logOptions = options.log
            logOptions.create = true
            log = try SegmentLog.open(at: path, options: logOptions)
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "cannot create the log of zone \(id) at \(path): \(error)", zone: id.description)
        }
        zoneStates[id] = ZoneState(info: info, log: log, ledgers: [:], chain: HistoryChain(), storedBytes: Self.measure(log))
        // The zone has its own rules now: what was kept of a deleted one is forgotten.
        let forgotten = keptRules.removeValue(forKey: id)
        do {
            try writeCatalog()
        } catch {
            zoneStates[id] = nil
            keptRules[id] = forgotten
            try? await log.close()
            try? DurableFile.removeTree(path)
            throw error
        }
        usage[id.owner, default: 0] += zoneStates[id]?.storedBytes ?? 0
        logger.info("zone created", metadata: ["zone": "\(id)", "access": "\(access.rawValue)"])
        return info
    }

    /// Creates the zone with the rules `settings` names and, for the rest, those kept of the
    /// deleted zone (see ``ZoneStorage/createZone(_:settings:maxZonesPerOwner:)``). Atomic: the
    /// actor does not suspend between reading the kept rules and the create, which forgets them.
    public func createZone(_ id: ZoneID, settings: ZoneSettings, maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        let (access, grants) = Self.rules(settings, keeping: keptRules[id]?.settings)
        return try await createZone(id, access: access, grants: grants, maxZonesPerOwner: maxZonesPerOwner)
    }

    public func deletedZoneRules(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneSettings? {
        try checkOpen()
        return keptRules[id]?.settings
    }

    public func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? {
        try checkOpen()
        return zoneStates[id]?.info
    }

    public func zones() async throws(ZoneStorageError) -> [ZoneInfo] {
        try checkOpen()
        return zoneStates.values.map(\.info).sorted { $0.id < $1.id }
    }

    public func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        guard var state = zoneStates[id] else { throw Self.notFound(id) }
        let previous = state.info
        state.info.access = access
        state.info.grants = grants
        zoneStates[id] = state
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = previous
            throw error
        }
        logger.info("zone updated", metadata: ["zone": "\(id)", "access": "\(access.rawValue)"])
        return state.info
    }

    public func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) {
        try checkOpen()
        guard let state = zoneStates[id] else { throw Self.notFound(id) }
        zoneStates[id] = nil
        // Its rules are kept for a recreation (the defaults need no keeping), in the same catalog
        // write that deletes it; beyond the per-owner limit the oldest kept are dropped.
        let keptBefore = keptRules
        keptRules[id] = nil
        if state.info.access != .private || !state.info.grants.isEmpty {
            let order = (keptRules.values.map(\.order).max() ?? 0) + 1
            keptRules[id] = KeptRules(owner: id.owner, name: id.name, access: state.info.access, grants: state.info.grants, order: order)
            let owners = keptRules.values.filter { $0.owner == id.owner }.sorted { $0.order < $1.order }
            for dropped in owners.dropLast(Self.keptDeletedZoneRulesPerOwner) { keptRules[dropped.id] = nil }
        }
        do {
            try writeCatalog()
        } catch {
            zoneStates[id] = state
            keptRules = keptBefore
            throw error
        }
        usage[id.owner, default: 0] -= state.storedBytes
        // The zone is gone from the catalog: whatever happens below, it is deleted (a directory
        // left behind is removed on the next open).
        try? await state.log.close()
        do {
            try DurableFile.removeTree(Self.logDirectory(in: directory, for: state.info))
        } catch {
            logger.warning("could not remove a deleted zone's log; it is removed on the next open", metadata: [
                "zone": "\(id)", "error": "\(error)",
            ])
        }
        logger.info("zone deleted", metadata: ["zone": "\(id)"])
    }

    // MARK: Push and pull

    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: id, user: user, replica: replica, transactions: transactions, storedBytesLimit: nil)
    }

    /// The bytes the zones of `owner` occupy: a counter, measured on open and kept by every change.
    public func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64 {
        try checkOpen()
        return usage[owner] ?? 0
    }

    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        let state = try await usableZone(id)
        // From here to the submit below nothing suspends (the owners file is written
        // synchronously): the inputs are read, the plan made and its positions claimed in one
        // step of the actor. An `updateZone` revoking the grant comes either before (refused) or
        // after (the push was allowed), no other push of this zone interleaves, and the quota
        // counts every append still in flight (reserved at their uncompressed size).
        let log = state.log
        let end = log.nextPosition
        guard let chain = state.chain.value(at: end) else {
            throw ZoneStorageError(.storageFailure, "zone \(id): its history chain does not reach its end (\(end))", zone: id.description)
        }
        let epoch = state.info.epoch
        let inputs = AppendInputs(zone: id, info: state.info, end: end, chain: chain, user: user, replica: replica,
                                  ledger: state.ledgers[replica] ?? ReplicaLedger(), storedBytes: usage[id.owner] ?? 0,
                                  storedBytesLimit: storedBytesLimit, transactions: transactions)
        switch AppendPlan.decide(inputs) {
        case .refused(let error):
            throw error
        case .held(let held):
            if held.recordsOwner {
                try recordOwner(user, of: replica, in: state)
                zoneStates[id]?.ledgers[replica] = held.ledger
            }
            // A retry of what is already held. Its first answer may still be waiting for its
            // sync: answer only once everything submitted so far is durable.
            do {
                try await log.flush()
            } catch {
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the log failed: \(error)", zone: id.description)
            }
            return held.outcome
        case .append(let write):
            // The replica's first push (or its first since owners were recorded): its owner is on
            // disk before anything of it is acknowledged.
            if write.recordsOwner { try recordOwner(user, of: replica, in: state) }
            let now = currentLogTimestamp()
            let durable = DurableSignal()
            let positions: Range<LogPosition>
            do {
                positions = try log.submit(write.entries.map { LogEntry($0.transaction.bytes, timestamp: now) }) { durable.complete($0) }
            } catch let error as LogError where error.code == .entryTooLarge || error.code == .recordTooLarge {
                throw ZoneStorageError(.tooLarge, "zone \(id): \(error.message)", zone: id.description)
            } catch {
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the log refused the append: \(error)", zone: id.description)
            }
            addUsage(id, write.adding)
            zoneStates[id]?.ledgers[replica] = write.ledger
            // Positions are claimed in submit order with no suspension since, so the chain grows
            // in log order (a failed append rebuilds it from what is durable when the log is
            // reopened).
            for entry in write.entries { zoneStates[id]?.chain.append(entry.transaction.digest) }
            if positions.lowerBound != end {
                // The plan placed the entries elsewhere: what is in memory is rebuilt from the log.
                markBroken(id, epoch: epoch, error: ZoneStorageError(.storageFailure, "the log placed an append at \(positions.lowerBound), not \(end)"))
            }
            switch await durable.wait() {
            case .success(let result):
                let current = zoneStates[id]?.info.epoch == epoch
                // The reservation becomes the record's size on disk (compressed, framed).
                if current { addUsage(id, Int64(result.storedSize) - write.adding) }
                var outcome = write.outcome
                if !current { outcome.fingerprint = nil }
                return outcome
            case .failure(let error):
                // The zone's bytes are measured again when its log is reopened.
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the append failed: \(error)", zone: id.description)
            }
        }
    }

    /// Records in the zone's `replicas.json` that `replica` belongs to `user`, synchronously (no
    /// suspension: a push checks and claims a replica in one step).
    private func recordOwner(_ user: String, of replica: ReplicaID, in state: ZoneState) throws(ZoneStorageError) {
        var owners = state.ledgers.compactMapValues(\.owner)
        owners[replica] = user
        try ZoneLedgerFiles.saveOwners(owners, in: Self.logDirectory(in: directory, for: state.info))
    }

    /// The zone's transactions from a position on, from its log (see the protocol's
    /// `read(zone:epoch:after:limit:)` for the errors).
    public nonisolated func read(zone id: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        guard limit > 0 else { throw ZoneStorageError(.invalidArgument, "the limit must be positive, got \(limit)", zone: id.description) }
        let (log, zoneEpoch) = try await readHandle(id)
        if let epoch, epoch != zoneEpoch {
            throw ZoneStorageError(.zoneReset, "zone \(id) was reset: its epoch is \(Self.hex(zoneEpoch)), not \(Self.hex(epoch))", zone: id.description)
        }
        let start = log.startPosition
        let end = log.endPosition
        guard position >= start else {
            throw ZoneStorageError(.positionRetired, "zone \(id): position \(position) was retired; the zone's history starts at \(start)", zone: id.description)
        }
        guard position <= end else {
            throw ZoneStorageError(.positionBeyondEnd, "zone \(id): position \(position) is past the end of the log (\(end))", zone: id.description)
        }
        let entries: [StoredEntry]
        do {
            // A page can be megabytes to read and decompress: off the cooperative pool, which the
            // server's other requests need meanwhile.
            entries = try await BlockingIO.run { try log.entries(from: position, limit: limit) }
        } catch {
            // Deleted (the log closed) or reset while reading?
            guard let current = try await zone(id) else { throw Self.notFound(id) }
            if current.epoch != zoneEpoch {
                throw ZoneStorageError(.zoneReset, "zone \(id) was reset while it was read", zone: id.description)
            }
            throw ZoneStorageError(.storageFailure, "zone \(id): reading from position \(position) failed: \(error)", zone: id.description)
        }
        let next = entries.last.map { $0.position + 1 } ?? position
        return ReadResult(epoch: zoneEpoch,
                          transactions: entries.map { ZoneEntry(position: $0.position, bytes: $0.payload) },
                          nextPosition: next, moreComing: next < log.endPosition)
    }

    public func endPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).log.endPosition
    }

    public func startPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).log.startPosition
    }

    public func replicas(zone id: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] {
        try await usableZone(id).ledgers.map { ReplicaInfo(replica: $0.key, user: $0.value.owner, acknowledged: $0.value.acknowledged) }
            .sorted { $0.replica < $1.replica }
    }

    /// Snapshots a zone's state (a `Strata` projection of its transactions) at the position
    /// `retaining` transactions before its end, and retires the log segments wholly below it.
    /// Clients whose change token points into retired history get `410 tokenExpired` and
    /// bootstrap from ``snapshot(zone:)``. The digests of the transactions below the snapshot are
    /// written first (`retired-digests`), so that retries of retired transactions are still
    /// checked for forks.
    @discardableResult
    public func compact(zone id: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
        let state = try await usableZone(id)
        let end = state.log.endPosition
        let cutoff = end > retaining ? end - retaining : 0
        do {
            let payload = try Self.projection(of: state.log, through: cutoff).snapshotPayload()
            try writeSnapshot(payload, at: cutoff, of: state)
            remeasure(id)
            logger.info("zone compacted", metadata: ["zone": "\(id)", "position": "\(cutoff)", "start": "\(state.log.startPosition)"])
            return ZoneSnapshot(epoch: state.info.epoch, position: cutoff, payload: payload)
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): compaction failed: \(error)", zone: id.description)
        }
    }

    /// Merges a state a client uploaded (a projection snapshot payload) into the zone: the zone's
    /// state through its end, joined with the upload, becomes its snapshot, and the merge gets a
    /// new random ID (``ZoneInfo/merges``), so that every change token handed out before expires and every client
    /// adopts the merged state (merging it into its own, nothing lost) before it pulls on. How a
    /// zone that lost history (a server restored from a backup, a zone recreated) gets back what
    /// its devices hold but no longer have as events.
    ///
    /// The upload's values are merged, its claims of which events it applied are not (see
    /// `ProjectionBuilder.merge(_:believingApplied:withholding:)`): the replicas' ledgers stay what the
    /// log holds, and events that really arrive later still apply.
    ///
    /// - Parameters:
    ///   - id: the zone.
    ///   - user: who uploads (the replica's owner when `replica` is given).
    ///   - replica: the uploader's own replica, whose sequences through `claim` the server then
    ///     counts as held (`nil`: no claim).
    ///   - claim: how far a server had acknowledged `replica`; believed only as far as this zone
    ///     acknowledged it.
    ///   - upload: the uploaded state.
    ///   - basis: the position the uploader had pulled through (from a token of the
    ///     zone's newest merge); the outcome says whether that was the zone's end (then the
    ///     uploader holds the merged state already and goes on from the new token).
    public func mergeState(zone id: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state upload: sending ProjectionBuilder, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        let state = try await usableZone(id)
        try Self.checkPush(state.info, user: user)
        // The uploader's claim of how far its own replica goes is believed (a false one can only
        // hold back its own edits), as far as the state really holds it; the replica must be the
        // uploader's, or new to the zone.
        func believed(_ replica: ReplicaID) -> UInt64 { min(claim, upload.contiguousSequences()[replica] ?? 0) }
        var ledger: ReplicaLedger?
        if let replica {
            var own = state.ledgers[replica] ?? ReplicaLedger()
            if let owner = own.owner, owner != user {
                throw ZoneStorageError(.replicaNotYours, "replica \(replica) belongs to user \(owner), not \(user)", zone: id.description)
            }
            if own.owner == nil {
                var owners = state.ledgers.compactMapValues(\.owner)
                owners[replica] = user
                try ZoneLedgerFiles.saveOwners(owners, in: Self.logDirectory(in: directory, for: state.info))
                own.owner = user
            }
            // Sequences up to the claim that the zone holds no digest of count as held: a push of
            // them is refused as a fork (another copy's), never silently taken as a retry.
            own.acknowledged = max(own.acknowledged, believed(replica))
            ledger = own
        }
        // From here to the catalog write nothing suspends: no push of this zone interleaves, so
        // the merged snapshot is exactly the state at `position`, and tokens of the new merge
        // are handed out only for positions from it on.
        let position = state.log.endPosition
        do {
            let builder = try Self.projection(of: state.log, through: position)
            // The uploader's own events past its claim are left out: it pushes them as events,
            // which the server checks against another copy's under the same sequences.
            try builder.merge(upload, believingApplied: replica.map { [$0: believed($0)] } ?? [:],
                              withholding: replica.map { ($0, believed($0)) })
            try writeSnapshot(builder.snapshotPayload(), at: position, of: state)
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): merging the uploaded state failed: \(error)", zone: id.description)
        }
        remeasure(id)
        if let replica, let ledger { zoneStates[id]?.ledgers[replica] = ledger }
        var info = state.info
        var merge = UInt64.random(in: 1 ... .max)
        while info.merges.contains(merge) { merge = UInt64.random(in: 1 ... .max) }
        info.merges.append(merge)
        zoneStates[id]?.info = info
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = state.info
            throw error
        }
        logger.notice("uploaded state merged", metadata: [
            "zone": "\(id)", "user": "\(user)", "position": "\(position)", "generation": "\(info.generation)",
        ])
        return StateMergeOutcome(epoch: info.epoch, generation: info.generation, position: position, upToDate: basis == position,
                                 acknowledged: ledger?.acknowledged ?? 0)
    }

    /// The zone's state through `position`: its newest usable snapshot, then the log.
    private static func projection(of log: SegmentLog, through position: UInt64) throws -> ProjectionBuilder {
        var builder = ProjectionBuilder()
        var from = log.startPosition
        if let previous = try log.latestValidSnapshot().snapshot, previous.info.position <= position, previous.info.position >= from {
            builder = try ProjectionBuilder(snapshot: previous.payload)
            from = previous.info.position
        }
        if from < position {
            var cursor = try log.records(from: from)
            reading: while let record = try cursor.next() {
                for entry in record.entries where entry.position >= from {
                    if entry.position >= position { break reading }
                    try builder.apply(encoded: entry.payload)
                }
            }
        }
        return builder
    }

    /// Writes a snapshot of the zone at `position`, then the digests of what lies below it, then
    /// retires the segments it covers.
    private func writeSnapshot(_ payload: [UInt8], at position: UInt64, of state: ZoneState) throws {
        let info = try state.log.writeSnapshot(payload, position: position)
        try ZoneLedgerFiles.saveRetiredDigests(state.ledgers, below: position, in: Self.logDirectory(in: directory, for: state.info))
        try state.log.retireSegments(coveredBy: info)
        zoneStates[state.info.id]?.chain.drop(below: state.log.startPosition)
        try state.log.pruneSnapshots(keeping: 2)
    }

    /// The position of the zone's newest snapshot, or `nil` when it has none.
    public func snapshotPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64? {
        let state = try await usableZone(id)
        do {
            return try state.log.snapshots().map(\.position).max()
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): listing its snapshots failed: \(error)", zone: id.description)
        }
    }

    /// The zone's newest snapshot, or `nil` when it was never compacted.
    public func snapshot(zone id: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? {
        let state = try await usableZone(id)
        do {
            guard let snapshot = try state.log.latestValidSnapshot().snapshot else { return nil }
            return ZoneSnapshot(epoch: state.info.epoch, position: snapshot.info.position, payload: snapshot.payload)
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): reading its snapshot failed: \(error)", zone: id.description)
        }
    }

    /// The fingerprint of the zone's history before `position`: its `HistoryChain` value (see
    /// ``ZoneStorage/fingerprint(zone:at:)``).
    public func fingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        return try await usableZone(id).chain.value(at: position)
    }

    /// 64 bits of the digest of the transaction at `position - 1`: what version 3 tokens carry
    /// (see ``ZoneStorage/lastTransactionFingerprint(zone:at:)``).
    public func lastTransactionFingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        let state = try await usableZone(id)
        for ledger in state.ledgers.values {
            if let held = ledger.held(atPosition: position - 1) { return held.digest.high }
        }
        return nil
    }

    /// The highest sequence the zone holds for `replica` (0 when none).
    public func acknowledged(zone id: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).ledgers[replica]?.acknowledged ?? 0
    }

    public func close() async throws(ZoneStorageError) {
        guard !closed else { return }
        closed = true
        let states = zoneStates
        zoneStates = [:]
        var failures: [String] = []
        for (name, state) in states.sorted(by: { $0.key < $1.key }) {
            do {
                try await state.log.close()
            } catch {
                failures.append("\(name): \(error)")
            }
        }
        lock.release()
        if !failures.isEmpty {
            throw ZoneStorageError(.storageFailure, "closing the zones' logs failed: " + failures.joined(separator: "; "))
        }
    }

    /// The zone's export (see ``ZoneExport``).
    func exportState(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneExport {
        let state = try await usableZone(id)
        let start = state.log.startPosition, end = state.log.endPosition
        let snapshot: ZoneSnapshot?
        do {
            snapshot = try state.log.latestValidSnapshot().snapshot.map {
                ZoneSnapshot(epoch: state.info.epoch, position: $0.info.position, payload: $0.payload)
            }
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): reading its snapshot failed: \(error)", zone: id.description)
        }
        var chain: [UInt64] = []
        for position in start...end {
            guard let value = state.chain.value(at: position) else {
                throw ZoneStorageError(.storageFailure, "zone \(id): its history chain does not cover position \(position)", zone: id.description)
            }
            chain.append(value)
        }
        return ZoneExport(info: state.info, start: start, end: end, snapshot: snapshot, ledgers: state.ledgers, chain: chain)
    }

    // MARK: Internals

    /// Reads the catalog and opens every zone's log into `states` (which holds what was opened so
    /// far when this throws), then removes orphaned zone directories.
    private static func openZones(in directory: String, options: Options, logger: Logger,
                                  into states: inout [ZoneID: ZoneState], keeping kept: inout [ZoneID: KeptRules]) throws(ZoneStorageError) {
        let catalogPath = DurableFile.join(directory, "zones.json")
        var infos: [ZoneInfo] = []
        if let bytes = try DurableFile.read(catalogPath) {
            let catalog: Catalog
            do {
                catalog = try JSONDecoder().decode(Catalog.self, from: Data(bytes))
            } catch {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) is damaged: \(error)")
            }
            // Format 1 has the same shape; its zone names were unique server-wide, which format 2
            // no longer requires (zones are named by owner and name).
            guard catalog.formatVersion == 1 || catalog.formatVersion == catalogVersion else {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) has format version \(catalog.formatVersion); this server reads 1 and \(catalogVersion)")
            }
            infos = catalog.zones
            for rules in catalog.deleted ?? [] where ZoneInfo.isValidName(rules.name) { kept[rules.id] = rules }
        }
        for info in infos {
            guard ZoneInfo.isValidName(info.name), states[info.id] == nil else {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) names an invalid or duplicate zone \"\(info.id)\"")
            }
            var logOptions = options.log
            logOptions.create = false
            let path = logDirectory(in: directory, for: info)
            let log: SegmentLog
            do {
                log = try SegmentLog.open(at: path, options: logOptions)
            } catch {
                throw ZoneStorageError(.storageFailure, "cannot open the log of zone \(info.name) at \(path): \(error)", zone: info.name)
            }
            if let torn = log.recovery.tornTail {
                logger.warning("zone log had a torn tail; truncated", metadata: [
                    "zone": "\(info.name)", "segment": "\(torn.segment)", "droppedBytes": "\(torn.droppedBytes)",
                ])
            }
            do {
                let ledgers = try scanLedgers(log, directory: path, zone: info.id)
                states[info.id] = ZoneState(info: info, log: log, ledgers: ledgers, chain: chain(of: ledgers, log: log))
            } catch {
                Task { try? await log.close() }
                throw error
            }
        }
        // Directories of zones that were being created or deleted when the process stopped.
        let expected = Set(infos.map { logDirectoryName(for: $0) })
        let zonesPath = DurableFile.join(directory, "zones")
        for name in try DurableFile.list(zonesPath) where !expected.contains(name) {
            logger.info("removing an orphaned zone directory", metadata: ["directory": "\(name)"])
            try DurableFile.removeTree(DurableFile.join(zonesPath, name))
        }
    }

    private func checkOpen() throws(ZoneStorageError) {
        if closed { throw ZoneStorageError(.storageFailure, "the storage in \(directory) is closed") }
    }

    private func readHandle(_ name: ZoneID) async throws(ZoneStorageError) -> (SegmentLog, UInt64) {
        let state = try await usableZone(name)
        return (state.log, state.info.epoch)
    }

    /// The zone's state, its log reopened first when an earlier append failed.
    private func usableZone(_ name: ZoneID) async throws(ZoneStorageError) -> ZoneState {
        try checkOpen()
        guard let state = zoneStates[name] else { throw Self.notFound(name) }
        guard state.broken else { return state }
        if let recovery = recoveries[name] {
            await recovery.value
        } else {
            let epoch = state.info.epoch
            let recovery = Task { await self.recover(name, epoch: epoch) }
            recoveries[name] = recovery
            await recovery.value
        }
        try checkOpen()
        guard let recovered = zoneStates[name] else { throw Self.notFound(name) }
        guard !recovered.broken else {
            if let failure = recoveryFailures[name], failure.code == .storageFull { throw failure }
            throw ZoneStorageError(.storageFailure, "zone \(name): its log failed and could not be reopened (see the server log)", zone: name.description)
        }
        return recovered
    }

    private func markBroken(_ name: ZoneID, epoch: UInt64, error: any Error) {
        guard zoneStates[name]?.info.epoch == epoch, zoneStates[name]?.broken == false else { return }
        logger.error("zone log failed; it is reopened on next use", metadata: ["zone": "\(name)", "error": "\(error)"])
        zoneStates[name]?.broken = true
    }

    /// Closes and reopens a failed log and rebuilds the zone's sequences from what is durable.
    private func recover(_ name: ZoneID, epoch: UInt64) async {
        defer { recoveries[name] = nil }
        guard let state = zoneStates[name], state.info.epoch == epoch, state.broken else { return }
        try? await state.log.close()
        guard !closed, let current = zoneStates[name], current.info.epoch == epoch else { return }
        do {
            var logOptions = options.log
            logOptions.create = false
            let path = Self.logDirectory(in: directory, for: current.info)
            let log = try SegmentLog.open(at: path, options: logOptions)
            let ledgers = try Self.scanLedgers(log, directory: path, zone: name)
            let bytes = Self.measure(log)
            usage[name.owner, default: 0] += bytes - current.storedBytes
            zoneStates[name] = ZoneState(info: current.info, log: log, ledgers: ledgers, chain: Self.chain(of: ledgers, log: log), storedBytes: bytes)
            recoveryFailures[name] = nil
            logger.info("zone log reopened", metadata: ["zone": "\(name)", "end": "\(log.endPosition)"])
        } catch {
            recoveryFailures[name] = ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure,
                                                      "zone \(name): its log failed and could not be reopened: \(error)", zone: name.description)
            logger.error("zone log could not be reopened", metadata: ["zone": "\(name)", "error": "\(error)"])
        }
    }

    /// Adds `bytes` (which may be negative) to the zone's and its owner's stored bytes.
    private func addUsage(_ id: ZoneID, _ bytes: Int64) {
        guard zoneStates[id] != nil else { return }
        zoneStates[id]?.storedBytes += bytes
        usage[id.owner, default: 0] += bytes
    }

    /// Measures the zone's bytes again (after a compaction or a merge changed its files).
    private func remeasure(_ id: ZoneID) {
        guard let state = zoneStates[id] else { return }
        addUsage(id, Self.measure(state.log) - state.storedBytes)
    }

    /// The bytes of a zone's log segments (held in memory by the log) and snapshot files.
    private static func measure(_ log: SegmentLog) -> Int64 {
        var bytes = log.segments().reduce(Int64(0)) { $0 + $1.byteSize }
        for snapshot in (try? log.snapshots()) ?? [] {
            var info = stat()
            if stat(snapshot.path, &info) == 0 { bytes += Int64(info.st_size) }
        }
        return bytes
    }

    /// Whether `error` (a log's or the storage's) says the disk or the file-system quota is full.
    static func diskFull(_ error: any Error) -> Bool {
        if let error = error as? LogError { return DurableFile.isDiskFull(error.errno) }
        if let error = error as? ZoneStorageError { return error.code == .storageFull }
        return false
    }

    private func writeCatalog() throws(ZoneStorageError) {
        let deleted = keptRules.values.sorted { $0.order < $1.order }
        let catalog = Catalog(formatVersion: Self.catalogVersion, zones: zoneStates.values.map(\.info).sorted { $0.id < $1.id },
                              deleted: deleted.isEmpty ? nil : deleted)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(catalog)
        } catch {
            throw ZoneStorageError(.storageFailure, "cannot encode the zone catalog: \(error)")
        }
        try DurableFile.writeAtomically(Array(data), to: DurableFile.join(directory, "zones.json"))
    }

    /// Every replica's ledger: owners from `replicas.json`, digests of retired transactions from
    /// `retired-digests`, and the rest from the log's entries. History retired by an older server
    /// (no digests kept) is summed up by the snapshot: its sequences count as held, unchecked.
    private static func scanLedgers(_ log: SegmentLog, directory: String, zone: ZoneID) throws(ZoneStorageError) -> [ReplicaID: ReplicaLedger] {
        var ledgers: [ReplicaID: ReplicaLedger] = [:]
        for (replica, owner) in try ZoneLedgerFiles.loadOwners(in: directory, zone: zone) {
            ledgers[replica, default: ReplicaLedger()].owner = owner
        }
        let retired = try ZoneLedgerFiles.loadRetiredDigests(in: directory, zone: zone)
        for (replica, held) in retired?.held ?? [] { ledgers[replica, default: ReplicaLedger()].hold(held) }
        let snapshot = try? log.latestValidSnapshot().snapshot
        let builder = snapshot.flatMap { try? ProjectionBuilder(snapshot: $0.payload) }
        if log.startPosition > 0 && builder == nil {
            throw ZoneStorageError(.storageFailure, "zone \(zone): its history before position \(log.startPosition) was retired but no valid snapshot covers it", zone: zone.description)
        }
        if let snapshot, let builder {
            // The snapshot's applied sequences are the log's, plus what uploaders claimed for
            // their own replicas: those count as held (a push of them is checked as a fork).
            // History retired by an older server, whose digests were not kept, is held unchecked.
            let legacy = retired == nil || (retired?.cutoff ?? 0) < snapshot.info.position
            for (replica, contiguous) in builder.contiguousSequences() {
                if legacy && log.startPosition > 0 { ledgers[replica, default: ReplicaLedger()].uncheckedThrough = contiguous }
                ledgers[replica, default: ReplicaLedger()].acknowledged = max(ledgers[replica]?.acknowledged ?? 0, contiguous)
            }
        }
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries {
                    let header: TransactionHeader
                    do {
                        header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    } catch {
                        throw ZoneStorageError(.storageFailure, "zone \(zone): the transaction at position \(entry.position) does not decode: \(error)", zone: zone.description)
                    }
                    guard header.eventCount > 0 else { continue }
                    ledgers[header.replica, default: ReplicaLedger()].hold(HeldTransaction(
                        first: header.firstSequence, last: header.firstSequence + header.eventCount - 1,
                        position: entry.position, digest: TransactionDigest(of: entry.payload)))
                }
            }
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(zone): reading its log failed: \(error)", zone: zone.description)
        }
        return ledgers
    }

    /// The chain of the zone's history from the digests its ledgers hold (retired ones included),
    /// kept from the log's first position on.
    private static func chain(of ledgers: [ReplicaID: ReplicaLedger], log: SegmentLog) -> HistoryChain {
        let end = log.endPosition
        let digests = ledgers.values.flatMap { ledger in
            ledger.transactions.lazy.filter { $0.position < end }.map { (position: $0.position, digest: $0.digest) }
        }
        return HistoryChain(digests: digests, end: end, keepingFrom: log.startPosition)
    }

    private static func logDirectoryName(for info: ZoneInfo) -> String {
        "\(info.name)-\(hex(info.epoch))"
    }

    private static func logDirectory(in directory: String, for info: ZoneInfo) -> String {
        DurableFile.join(DurableFile.join(directory, "zones"), logDirectoryName(for: info))
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static func notFound(_ id: ZoneID) -> ZoneStorageError {
        ZoneStorageError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name)", zone: id.description)
    }
}

/// Carries the completion of a submitted append (called on the log's writer queue) to the task
/// that waits for it; either side may come first.
private final class DurableSignal: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<AppendResult, LogError>, Never>?)
        case done(Result<AppendResult, LogError>)
    }

    private let state = Mutex(State.waiting(nil))

    func complete(_ result: Result<AppendResult, LogError>) {
        let continuation = state.withLock { s -> CheckedContinuation<Result<AppendResult, LogError>, Never>? in
            guard case .waiting(let continuation) = s else { return nil }
            s = .done(result)
            return continuation
        }
        continuation?.resume(returning: result)
    }

    func wait() async -> Result<AppendResult, LogError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> Result<AppendResult, LogError>? in
                switch s {
                case .done(let result): return result
                case .waiting:
                    s = .waiting(continuation)
                    return nil
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
