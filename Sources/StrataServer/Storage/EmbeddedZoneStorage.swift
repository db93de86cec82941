public import Logging
public import StrataLog
import StrataCore
import StrataProtocol

/// A ``ZoneStorage`` in a local data directory: one `SegmentLog` per zone, the zones' metadata in
/// one JSON file.
///
/// Layout of the data directory:
///
/// - `zones.json`: the zones' metadata (owner, name, access, grants, epoch; merges and lineage
///   when not empty), and the rules, epoch and lineage kept of deleted zones, replaced atomically
///   (temporary file, `fsync`, `rename`, `fsync` of the directory) on every change. Format 2;
///   format 1 (written before zones were named by owner and name, when names were unique
///   server-wide) is read as is and rewritten as format 2 on the next change.
/// - `zones/<name>-<epoch as 16 hex digits>/`: the zone's segment log. Each transaction is one log
///   entry; each push is one log record, so a push is in the log wholly or not at all. Beside the
///   log, `replicas.json` (which user each replica belongs to) and `retired-digests` (the digests
///   of transactions compaction retired): see `ZoneLedgerFiles`; and `devices.json`, the zone's
///   device registry (see `EmbeddedZoneStorage+Devices.swift`).
/// - `replica-owners.json`: which user each replica belongs to, server-wide (the layout of a
///   zone's `replicas.json`). A new replica's binding is appended to `replica-owners.journal` before
///   its first push or state upload is acknowledged, and the journal is folded into the file when
///   it holds as many bindings as the file, on open and on close (`ReplicaBindingJournal`). A
///   data directory from before the file existed gets it on open, from the zones' owners.
/// - `assets/`: the bytes of assets, by owner, and which zone holds which (see `EmbeddedAssets`).
/// - `LOCK`: held while the storage is open.
///
/// Per zone and replica, the owner, the highest sequence held and each held transaction's digest
/// are kept in memory (`ReplicaLedger`) and rebuilt on open from those files and a scan of the
/// zone's log. Appends are durable under `Durability.groupCommit` by default: a
/// push is answered only once its record is on stable storage, and concurrent pushes share a sync.
///
/// What it does lives in one file per concern, as `PostgresZoneStorage`'s does:
/// `+Catalog` (zones and their rules), `+Append` (pushes, executing `AppendPlan`), `+Read`,
/// `+Compaction`, `+StateMerge`, `+Recovery` (opening and reopening logs) and `+Usage` (stored
/// bytes).
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
        /// The wall clock assets' confirmations are stamped with and swept by
        /// (``AssetStorage/sweepAssets(grace:)``); tests move it.
        public var clock: ServerClock

        public init(log: LogOptions = LogOptions(durability: .groupCommit),
                    makeEpoch: @escaping @Sendable () -> UInt64 = { UInt64.random(in: 1 ... .max) },
                    clock: ServerClock = .system) {
            self.log = log
            self.makeEpoch = makeEpoch
            self.clock = clock
        }
    }

    /// The data directory.
    public nonisolated let directory: String
    let options: Options
    let logger: Logger
    let lock: DirectoryLock
    var zoneStates: [ZoneID: ZoneState]
    /// The rules of deleted zones, kept for their recreation (in the catalog).
    var keptRules: [ZoneID: KeptRules] = [:]
    /// Recoveries of zones whose log failed.
    var recoveries: [ZoneID: Task<Void, Never>] = [:]
    /// Why the last reopen of a failed zone log failed (a full disk answers `storageFull`).
    var recoveryFailures: [ZoneID: ZoneStorageError] = [:]
    /// Bytes on disk per zone owner (their zones' logs and snapshots), for the stored-bytes quota:
    /// measured on open, kept up to date by every change.
    var usage: [String: Int64] = [:]
    /// Which user each replica belongs to, server-wide (`replica-owners.json`): see
    /// ``claimReplica(_:for:zone:)``.
    var replicaBindings: [ReplicaID: String] = [:]
    /// The bindings made since `replica-owners.json` was last written (`ReplicaBindingJournal`).
    var bindingJournal = ReplicaBindingJournal(path: "")
    /// The assets' bytes, links and uploads (`assets/`, see `EmbeddedAssets`).
    nonisolated let assets: EmbeddedAssets
    /// The assets' confirmations and the lock a sweep takes per owner (see `EmbeddedAssets+Sweep.swift`).
    nonisolated let assetSweep: EmbeddedAssetSweep
    var closed = false
    /// The database changes' counter, stamps and removals, in memory (see `EmbeddedDatabase`).
    var database = EmbeddedDatabase()
    /// The zones' device registries as read from their `devices.json`, by zone, with the life
    /// they belong to (see `EmbeddedZoneStorage+Devices.swift`).
    var deviceRegistries: [ZoneID: (epoch: UInt64, devices: [DeviceKey: DeviceEntry])] = [:]

    /// A zone as the storage holds it open.
    struct ZoneState {
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

    /// The format of `zones.json`.
    struct Catalog: Codable {
        var formatVersion: Int
        var zones: [ZoneInfo]
        /// The access rules of deleted zones, kept for their recreation, oldest deletion first
        /// (absent in catalogs written before they were kept; older servers ignore the key).
        var deleted: [KeptRules]?
    }

    /// A deleted zone's access and grants (see ``ZoneStorage/deletedZoneRules(_:)``).
    struct KeptRules: Codable {
        var owner: String
        var name: String
        var access: ZoneAccess
        var grants: [String: ZoneGrant]
        /// Orders deletions (the oldest are dropped beyond the per-owner limit).
        var order: UInt64
        /// The deleted life's epoch and the lives it continued (absent in catalogs written
        /// before they were kept): a recreation continuing it continues those too.
        var epoch: UInt64?
        var lineage: [UInt64]?
        /// The grantees who had accepted (absent in catalogs written before acceptance was
        /// kept: every grant counts as accepted).
        var accepted: [String]?

        var id: ZoneID { ZoneID(owner: owner, name: name) }
        var settings: ZoneSettings { ZoneSettings(access: access, grants: grants) }
    }

    static let catalogVersion = 2

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
        self.assetSweep = EmbeddedAssetSweep(timeline: AssetTimeline(options.clock.wallMilliseconds))
        try DurableFile.makeDirectories(DurableFile.join(directory, "zones"))
        let lock = try DirectoryLock.forDataDirectory(directory)
        self.lock = lock
        var states: [ZoneID: ZoneState] = [:]
        var kept: [ZoneID: KeptRules] = [:]
        do {
            try Self.openZones(in: directory, options: options, logger: logger, into: &states, keeping: &kept)
        } catch {
            // Logs just opened, nothing appended: released now, not in tasks nobody awaits.
            for state in states.values { state.log.releaseUnwritten() }
            lock.release()
            throw error
        }
        for id in Array(states.keys) {
            if let state = states[id] { states[id]?.storedBytes = Self.measure(state.log) }
        }
        self.zoneStates = states
        self.database.stampOpened(states.keys)
        self.keptRules = kept
        self.usage = states.values.reduce(into: [:]) { $0[$1.info.owner, default: 0] += $1.storedBytes }
        do {
            var (bindings, journal) = try Self.openReplicaBindings(in: directory, zones: states, logger: logger)
            // Best effort: a journal that cannot be folded now (a full disk) is kept and read
            // as it is; the server still starts.
            do {
                try Self.fold(bindings, in: directory, journal: &journal)
            } catch {
                logger.warning("could not fold the replica bindings' journal; it is kept", metadata: ["error": "\(error)"])
            }
            self.replicaBindings = bindings
            self.bindingJournal = journal
            let assets = try EmbeddedAssets(dataDirectory: directory)
            try assets.removeZones(except: states.values.map(\.info))
            self.assets = assets
        } catch {
            for state in states.values { state.log.releaseUnwritten() }
            lock.release()
            throw error
        }
    }

    deinit {
        lock.release()
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
        // A data directory at rest holds its bindings in the one file older servers read.
        do {
            try foldBindingJournal()
        } catch {
            failures.append("replica bindings: \(error)")
        }
        lock.release()
        if !failures.isEmpty {
            throw ZoneStorageError(.storageFailure, "closing the zones' logs failed: " + failures.joined(separator: "; "))
        }
    }

    func checkOpen() throws(ZoneStorageError) {
        if closed { throw ZoneStorageError(.storageFailure, "the storage in \(directory) is closed") }
    }

    /// Whether `error` (a log's or the storage's) says the disk or the file-system quota is full.
    static func diskFull(_ error: any Error) -> Bool {
        if let error = error as? LogError { return DurableFile.isDiskFull(error.errno) }
        if let error = error as? ZoneStorageError { return error.code == .storageFull }
        return false
    }

    static func logDirectoryName(for info: ZoneInfo) -> String {
        "\(info.name)-\(hex(info.epoch))"
    }

    static func logDirectory(in directory: String, for info: ZoneInfo) -> String {
        DurableFile.join(DurableFile.join(directory, "zones"), logDirectoryName(for: info))
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    static func notFound(_ id: ZoneID) -> ZoneStorageError {
        ZoneStorageError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name)", zone: id.description)
    }
}
