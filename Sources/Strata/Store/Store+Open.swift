import Synchronization
import Foundation
import Logging
import StrataLog
public import StrataCore

extension Store {
    static let manifestName = "store.json"
    static let logDirectoryName = "log"

    /// Opens (or creates) the store in `directory` with the app's `schema`: loads the newest
    /// snapshot that verifies (falling back to older ones, or to a full replay, with a warning),
    /// replays the log after it, and records the app's schema when it adds to the recorded one.
    ///
    /// - Throws: `StoreError` — `StoreError.Code.invalidSchema`,
    ///   `StoreError.Code.incompatibleSchema` (not an additive change),
    ///   `StoreError.Code.invalidArgument` (an index in `StoreOptions.indexes` that names no
    ///   attribute of the schema), `StoreError.Code.corruptEvent`, or `StoreError.Code.log` from
    ///   the segment log.
    public static func open(at directory: String, schema: Schema, options: StoreOptions = StoreOptions()) async throws -> Store {
        let problems = schema.problems()
        guard problems.isEmpty else { throw StoreError(.invalidSchema, problems.joined(separator: "; ")) }
        try AttributeIndex.check(options.indexes, against: schema)
        // The replay reads and decodes the whole log past the snapshot: not on the cooperative pool.
        let store = try await BlockingIO.run { try openWithoutSchemaCheck(at: directory, options: options) }
        try await store.adopt(schema)
        if !options.indexes.isEmpty {
            // Built here, off the caller's thread, once the schemas are set (each setting would
            // rebuild them), so that the first fetch does not pay for it.
            try await BlockingIO.run { store.core.withLock { $0.projection.prepareIndexes() } }
        }
        // A long replay now should not be repeated on the next open (see `AutoCompaction`).
        store.startAutoCompactionIfDue()
        return store
    }

    /// Opens an existing store with the schema recorded in it (for tools that have no app code).
    public static func open(at directory: String, options: StoreOptions = StoreOptions()) throws -> Store {
        guard FileManager.default.fileExists(atPath: directory + "/" + manifestName) else {
            throw StoreError(.invalidArgument, "\(directory) is not a Strata store (no \(manifestName))")
        }
        let store = try openWithoutSchemaCheck(at: directory, options: options)
        store.core.withLock { $0.projection.prepareIndexes() }
        store.startAutoCompactionIfDue()
        return store
    }

    /// The replica ID recorded in a store's `store.json`, read without opening the store (for tools
    /// that read a copied store's files and must not change them).
    ///
    /// - Throws: `StoreError.Code.invalidArgument` when the directory is not a store,
    ///   `StoreError.Code.corruptIdentity` when its `store.json` is damaged or of an unknown format.
    public static func replicaID(ofStoreAt directory: String) throws -> ReplicaID {
        try identity(ofStoreAt: directory).replicaID
    }

    /// The identity recorded in a store's `store.json` — current replica, log ID, lineage — read
    /// without opening the store and without writing anything (a format-1 file is not upgraded).
    ///
    /// - Throws: `StoreError.Code.invalidArgument` when the directory is not a store,
    ///   `StoreError.Code.corruptIdentity` (naming the file) when `store.json` is damaged,
    ///   undecodable or of an unknown format.
    @_spi(StrataInternals)
    public static func identity(ofStoreAt directory: String) throws -> StoreIdentity {
        guard let loaded = try StoreIdentityFile.read(in: directory) else {
            throw StoreError(.invalidArgument, "\(directory) is not a Strata store (no \(manifestName))")
        }
        return loaded.identity
    }

    /// The log directory inside a store directory.
    public static func logDirectory(ofStoreAt directory: String) -> String { directory + "/" + logDirectoryName }

    private static func openWithoutSchemaCheck(at directory: String, options: StoreOptions) throws -> Store {
        let recorded = try StoreIdentityFile.read(in: directory)
        let logPath = logDirectory(ofStoreAt: directory)
        let hadLog = hasSegments(logPath)
        if recorded == nil {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw StoreError(.invalidArgument, "cannot create the store at \(directory): \(error)")
            }
        }
        var logOptions = LogOptions(durability: options.durability)
        logOptions.segmentSize = options.segmentSize
        logOptions.sharing = options.sharing == .processes ? .processes : .exclusive
        let log: SegmentLog
        do {
            log = try SegmentLog.open(at: logPath, options: logOptions)
        } catch let error as LogError {
            throw StoreError(error)
        }
        // The log first, then `store.json` naming it: a crash in between leaves a log without an
        // identity, which simply gets a new one (its replica never authored anything).
        let identity: StoreIdentity
        if log.isShared {
            // Under the commit lock, reading `store.json` again: two processes creating the store
            // at once must end up with one identity (the first to write it), not one each.
            do {
                identity = try log.withCommitLock {
                    let now = try StoreIdentityFile.read(in: directory)
                    // A `store.json` naming this very log was written by the process that just
                    // created the log with us, not left over from a lost one.
                    let named = now?.identity.logID == log.logID.description
                    return try reconcile(now, log: log, hadLog: hadLog || named, directory: directory, options: options)
                }
            } catch let error as LogError {
                throw StoreError(error)
            }
        } else {
            identity = try reconcile(recorded, log: log, hadLog: hadLog, directory: directory, options: options)
        }
        var report = OpenReport()
        var ownTransactions = OwnTransactions(replica: identity.replicaID)
        let projection: Projection
        if log.isShared {
            // Under the commit lock: no other process writes or prunes a snapshot meanwhile (one
            // past this open's view of the log, or the one being read).
            do {
                projection = try log.withCommitLock {
                    try UncheckedBox(loadProjection(log, identity: identity, logger: options.logger, report: &report, own: &ownTransactions))
                }.value
            } catch let error as LogError {
                throw StoreError(error)
            }
        } else {
            projection = try loadProjection(log, identity: identity, logger: options.logger, report: &report, own: &ownTransactions)
        }
        var clock = HybridClock(now: options.clock, maxLead: options.maxClockLead)
        clock.observe(HLC(rawValue: projection.maxHLC))
        if projection.maxHLC > clock.last.rawValue {
            // Bounded: the newest event lies further ahead than the clock may be dragged. The
            // replica's own events are still never undercut (its clock never goes backwards).
            clock.advance(past: HLC(rawValue: projection.newestHLC(of: identity.replicaID)))
        }
        let own = projection.appliedSummary().first { $0.replica == identity.replicaID }
        let core = StoreCore(identity: identity, projection: projection, clock: clock,
                             nextSequence: (own?.highest ?? 0) + 1)
        core.projection.schema = projection.recordedSchema
        core.indexes = options.indexes.map(\.declaration)
        core.syncPins = SyncPins.load(in: directory, replica: identity.replicaID)
        core.downloadMasks = DownloadMasks.load(in: directory) ?? DownloadMasks()
        core.own = ownTransactions
        if core.syncPins.replica == identity.replicaID, !core.syncPins.pins.isEmpty {
            core.own.drop(acknowledgedThrough: core.syncPins.acknowledgedByAll)
        }
        core.retainsUnpushed = options.retainsUnpushed
        core.autoCompaction = AutoCompactionState(policy: options.autoCompaction, events: report.replayedEvents, bytes: report.replayedBytes)
        let store = Store(directory: directory, log: log, core: core, logger: options.logger, report: report)
        try store.finishInterruptedFork()
        // Imports a crash interrupted left only temporary files (downloads stay: they resume).
        // Shared: only with no other process open, whose imports may be under way.
        _ = log.whileAlone { try? store.assets.clearTemporary() }
        store.assetFetching.withLock {
            $0.budget = options.assetCacheBudget
            $0.collectionGrace = options.assetCollectionGrace
        }
        if log.isShared { try store.watchOtherProcesses() }
        return store
    }

    /// Whether a log directory holds segment files.
    static func hasSegments(_ logPath: String) -> Bool {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: logPath)) ?? []
        return names.contains { $0.hasSuffix(".seg") }
    }

    /// The identity to open with, written back when it changed: a new store's, a format-1 file
    /// upgraded, or — when `store.json` outlived its log or names another one — a fresh replica ID
    /// with a `ReplicaFork.Reason.logLost` lineage entry, because the replica's sequences can no
    /// longer be continued without authoring some of them twice.
    private static func reconcile(_ recorded: StoreIdentityFile.Loaded?, log: SegmentLog, hadLog: Bool,
                                  directory: String, options: StoreOptions) throws -> StoreIdentity {
        let logID = log.logID.description
        guard let recorded else {
            let identity = StoreIdentity(replicaID: options.newReplicaID ?? .random(), logID: logID)
            try StoreIdentityFile.write(identity, in: directory)
            return identity
        }
        var identity = recorded.identity
        var changed = recorded.format != StoreIdentityFile.format
        if !hadLog || (identity.logID != nil && identity.logID != logID) {
            let successor = ReplicaID.random()
            options.logger.warning("store.json outlived its log: the store takes a new replica ID", metadata: [
                "store": "\(directory)", "replica": "\(identity.replicaID)", "successor": "\(successor)",
                "recordedLog": "\(identity.logID ?? "none")", "log": "\(hadLog ? logID : "missing")",
            ])
            // before = 0: nothing of the old replica is abandoned (whatever this log holds of it is
            // genuine); only its sequences are not continued.
            identity.lineage.append(ReplicaFork(reason: .logLost, replica: identity.replicaID, keptThrough: 0, before: 0,
                                                successor: successor, reauthored: 0, date: Store.forkDate()))
            identity.replicaID = successor
            changed = true
        }
        if identity.logID != logID {
            identity.logID = logID
            changed = true
        }
        if changed { try StoreIdentityFile.write(identity, in: directory) }
        return identity
    }

    /// A fresh projection of the log under `identity`'s lineage: from the newest snapshot that
    /// verifies and holds no abandoned transaction (falling back to older ones, or to a full
    /// replay, with a warning), then the log after it, abandoned transactions skipped.
    ///
    /// - Throws: `StoreError.Code.corruptSnapshot` when no usable snapshot covers retired
    ///   history; event and log errors.
    static func loadProjection(_ log: SegmentLog, identity: StoreIdentity, logger: Logger, report: inout OpenReport) throws -> Projection {
        var own = OwnTransactions(replica: identity.replicaID)
        return try loadProjection(log, identity: identity, logger: logger, report: &report, own: &own)
    }

    /// The same, noting in `own` where the log holds the current replica's transactions: those
    /// the replay reads, and those in the retained log before the snapshot (headers only).
    static func loadProjection(_ log: SegmentLog, identity: StoreIdentity, logger: Logger, report: inout OpenReport,
                               own: inout OwnTransactions) throws -> Projection {
        let projection = Projection()
        var replayFrom = log.startPosition
        do {
            for info in try log.snapshots() {
                if identity.isTainted(snapshotAt: info.position) {
                    logger.debug("skipping a snapshot that predates a fork", metadata: ["snapshot": "\(info.name)"])
                    continue
                }
                guard info.position >= log.startPosition else {
                    logger.warning("the newest usable snapshot is older than the retained log", metadata: ["snapshot": "\(info.name)"])
                    break
                }
                do {
                    let snapshot = try log.readSnapshot(info)
                    try ProjectionCodec.decode(snapshot.payload, into: projection)
                    replayFrom = info.position
                    report.snapshot = info
                    break
                } catch let problem as LogError {
                    logger.warning("skipping a damaged snapshot", metadata: ["error": "\(problem)"])
                    report.skippedSnapshots.append(problem.description)
                }
            }
            if report.snapshot == nil && log.startPosition > 0 {
                throw StoreError(.corruptSnapshot, "no valid snapshot covers the retired history before position \(log.startPosition)", position: log.startPosition)
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        if replayFrom > log.startPosition {
            try noteOwnTransactions(log, from: log.startPosition, to: replayFrom, identity: identity, into: &own)
        }
        try replay(log, from: replayFrom, into: projection, identity: identity, report: &report, own: &own)
        return projection
    }

    /// Notes the current replica's transactions in `start..<end` (the log a snapshot covers but
    /// compaction kept: what some sync engine has not pushed).
    static func noteOwnTransactions(_ log: SegmentLog, from start: UInt64, to end: UInt64, identity: StoreIdentity,
                                    into own: inout OwnTransactions) throws {
        do {
            var cursor = try log.records(from: start)
            reading: while let record = try cursor.next() {
                for entry in record.entries where entry.position >= start {
                    if entry.position >= end { break reading }
                    let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    if !identity.lineage.isEmpty, identity.isAbandoned(header: header, position: entry.position) { continue }
                    own.note(header, position: entry.position)
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
    }

    /// Applies every transaction from `position` on, one batch per log record, skipping those
    /// `identity`'s lineage abandoned.
    static func replay(_ log: SegmentLog, from position: UInt64, into projection: Projection, identity: StoreIdentity,
                       report: inout OpenReport, own: inout OwnTransactions) throws {
        let checkLineage = !identity.lineage.isEmpty
        let adopted = AdoptedStates(logDirectory: log.directory)
        do {
            var cursor = try log.records(from: position)
            while let record = try cursor.next() {
                projection.beginBatch(tracking: false)
                for entry in record.entries where entry.position >= position {
                    let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    if header.isAdoption {
                        // The state the store adopted here, merged again as it was then.
                        let record = try AdoptionRecord(decoding: entry.payload, position: entry.position)
                        try projection.adopt(payload: adopted.payload(for: record, position: entry.position))
                        report.replayedBytes += entry.payload.count
                        continue
                    }
                    if checkLineage, identity.isAbandoned(header: header, position: entry.position) {
                        continue
                    }
                    own.note(header, position: entry.position)
                    let transaction = try EventCodec.decodeRaw(entry.payload, position: entry.position)
                    try projection.apply(transaction)
                    report.replayedTransactions += 1
                    report.replayedEvents += transaction.events.count
                    report.replayedBytes += entry.payload.count
                }
                projection.commitBatch(report: false)
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
    }

    /// Checks the app's schema against the recorded one and records it when it adds anything.
    func adopt(_ appSchema: Schema) async throws {
        let recorded = core.withLock { $0.projection.recordedSchema }
        // Every version works out its stored keys from its own steps: an app whose steps are not
        // those this device's earlier app versions recorded, for the versions both know (a
        // shipped step changed or dropped), would read and write other fields than before. Only
        // this store's own schema records count: another device's (any writer of the zone) must
        // not be able to keep the app from opening its store.
        let earlier = core.withLock { core in
            core.projection.schemaEvents.filter { core.projection.replica(of: $0.ref) == core.replica }
                .reduce(Schema.empty) { $0.merged(with: $1.schema) }
        }
        let known = min(appSchema.version, earlier.version)
        let ownSteps = SchemaLineage.ordered(appSchema.migrations.filter { $0.version <= known })
        let recordedSteps = earlier.migrations.filter { $0.version <= known }
        if recordedSteps != ownSteps {
            let missing = recordedSteps.filter { !ownSteps.contains($0) }.map(\.summary)
            let other = ownSteps.filter { !recordedSteps.contains($0) }.map(\.summary)
            throw StoreError(.incompatibleSchema, "the app's migration steps up to version \(known) are not those this store recorded when it ran that version: keep every shipped step as it was"
                             + (missing.isEmpty ? "" : "; recorded, not the app's: " + missing.joined(separator: ", "))
                             + (other.isEmpty ? "" : "; the app's, not recorded: " + other.joined(separator: ", ")))
        }
        // The log records schemas under stored names: a rename is no change there, a type change
        // a field of its own (see `SchemaLineage`).
        let stored = appSchema.stored
        let problems = recorded.incompatibilities(with: stored)
        guard problems.isEmpty else {
            throw StoreError(.incompatibleSchema, "the app's schema is not an additive change of the recorded one (declare a migration for a change that is not): " + problems.joined(separator: "; "))
        }
        let merged = recorded.merged(with: stored)
        core.withLock {
            $0.projection.schema = merged
            $0.projection.appSchema = appSchema
        }
        if merged != recorded {
            // The app's own schema, not the merge: this replica's schema records are what the
            // check of shipped steps above reads, and must hold only this app's steps. (The
            // recorded schema is the merge of every record anyway.)
            try await commit { tx in try tx.recordSchema(stored) }
        }
    }
}

/// Carries a value out of a closure that requires `Sendable` results (the log's commit lock)
/// when it never crosses a thread: the closure runs on the caller's.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
