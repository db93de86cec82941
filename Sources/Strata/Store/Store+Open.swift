import Synchronization
import Foundation
import Logging
import StrataLog

/// `store.json`: the store's identity and format version.
struct StoreManifest: Codable {
    var format: Int
    var replicaID: ReplicaID
}

extension Store {
    static let manifestName = "store.json"
    static let logDirectoryName = "log"

    /// Opens (or creates) the store in `directory` with the app's `schema`: loads the newest
    /// snapshot that verifies (falling back to older ones, or to a full replay, with a warning),
    /// replays the log after it, and records the app's schema when it adds to the recorded one.
    ///
    /// - Throws: ``StoreError`` — ``StoreError/Code/invalidSchema``,
    ///   ``StoreError/Code/incompatibleSchema`` (not an additive change),
    ///   ``StoreError/Code/corruptEvent``, or ``StoreError/Code/log`` from the segment log.
    public static func open(at directory: String, schema: Schema, options: StoreOptions = StoreOptions()) async throws -> Store {
        let problems = schema.problems()
        guard problems.isEmpty else { throw StoreError(.invalidSchema, problems.joined(separator: "; ")) }
        let store = try openWithoutSchemaCheck(at: directory, options: options)
        try await store.adopt(schema)
        return store
    }

    /// Opens an existing store with the schema recorded in it (for tools that have no app code).
    public static func open(at directory: String, options: StoreOptions = StoreOptions()) throws -> Store {
        guard FileManager.default.fileExists(atPath: directory + "/" + manifestName) else {
            throw StoreError(.invalidArgument, "\(directory) is not a Strata store (no \(manifestName))")
        }
        return try openWithoutSchemaCheck(at: directory, options: options)
    }

    /// The replica ID recorded in a store's `store.json`, read without opening the store (for tools
    /// that read a copied store's files and must not change them).
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` when the directory is not a store or its
    ///   manifest is damaged or of an unknown format.
    public static func replicaID(ofStoreAt directory: String) throws -> ReplicaID {
        let path = directory + "/" + manifestName
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.invalidArgument, "\(directory) is not a Strata store (no \(manifestName))")
        }
        return try loadOrCreateManifest(directory, options: StoreOptions()).replicaID
    }

    /// The log directory inside a store directory.
    public static func logDirectory(ofStoreAt directory: String) -> String { directory + "/" + logDirectoryName }

    private static func openWithoutSchemaCheck(at directory: String, options: StoreOptions) throws -> Store {
        let manifest = try loadOrCreateManifest(directory, options: options)
        var logOptions = LogOptions(durability: options.durability)
        logOptions.segmentSize = options.segmentSize
        let log: SegmentLog
        do {
            log = try SegmentLog.open(at: directory + "/" + logDirectoryName, options: logOptions)
        } catch let error as LogError {
            throw StoreError(error)
        }
        var report = OpenReport()
        let projection = Projection()
        var replayFrom = log.startPosition
        do {
            let (snapshot, skipped) = try log.latestValidSnapshot()
            for problem in skipped {
                options.logger.warning("skipping a damaged snapshot", metadata: ["error": "\(problem)"])
                report.skippedSnapshots.append(problem.description)
            }
            if let snapshot {
                if snapshot.info.position >= log.startPosition {
                    try ProjectionCodec.decode(snapshot.payload, into: projection)
                    replayFrom = snapshot.info.position
                    report.snapshot = snapshot.info
                } else {
                    options.logger.warning("the newest valid snapshot is older than the retained log", metadata: ["snapshot": "\(snapshot.info.name)"])
                }
            }
            if report.snapshot == nil && log.startPosition > 0 {
                throw StoreError(.corruptSnapshot, "no valid snapshot covers the retired history before position \(log.startPosition)", position: log.startPosition)
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        try replay(log, from: replayFrom, into: projection, report: &report)
        let clock = HybridClock(last: HLC(rawValue: projection.maxHLC), now: options.clock)
        let own = projection.appliedSummary().first { $0.replica == manifest.replicaID }
        let core = StoreCore(replica: manifest.replicaID, projection: projection, clock: clock,
                             nextSequence: (own?.highest ?? 0) + 1)
        core.projection.schema = projection.recordedSchema
        return Store(directory: directory, replicaID: manifest.replicaID, log: log, core: core, logger: options.logger, report: report)
    }

    private static func loadOrCreateManifest(_ directory: String, options: StoreOptions) throws -> StoreManifest {
        let path = directory + "/" + manifestName
        if FileManager.default.fileExists(atPath: path) {
            guard let data = FileManager.default.contents(atPath: path),
                  let manifest = try? JSONDecoder().decode(StoreManifest.self, from: data) else {
                throw StoreError(.invalidArgument, "\(path) is damaged")
            }
            guard manifest.format == 1 else { throw StoreError(.invalidArgument, "\(path): unsupported store format \(manifest.format)") }
            return manifest
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let manifest = StoreManifest(format: 1, replicaID: options.newReplicaID ?? .random())
            let data = try JSONEncoder().encode(manifest)
            // Written atomically and durably: the replica ID must never change under a store.
            let temporary = path + ".tmp"
            try data.write(to: URL(fileURLWithPath: temporary))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            try handle.synchronize()
            try handle.close()
            guard rename(temporary, path) == 0 else { throw StoreError(.invalidArgument, "cannot create \(path)") }
            return manifest
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.invalidArgument, "cannot create the store at \(directory): \(error)")
        }
    }

    /// Applies every transaction from `position` on, one batch per log record.
    static func replay(_ log: SegmentLog, from position: UInt64, into projection: Projection, report: inout OpenReport) throws {
        do {
            var cursor = try log.records(from: position)
            while let record = try cursor.next() {
                projection.beginBatch(tracking: false)
                for entry in record.entries where entry.position >= position {
                    let transaction = try EventCodec.decodeRaw(entry.payload, position: entry.position)
                    try projection.apply(transaction)
                    report.replayedTransactions += 1
                    report.replayedEvents += transaction.events.count
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
        let problems = recorded.incompatibilities(with: appSchema)
        guard problems.isEmpty else {
            throw StoreError(.incompatibleSchema, "the app's schema is not an additive change of the recorded one: " + problems.joined(separator: "; "))
        }
        let merged = recorded.merged(with: appSchema)
        core.withLock { $0.projection.schema = merged }
        if merged != recorded {
            try await commit { tx in try tx.recordSchema(merged) }
        }
    }
}

extension Transaction {
    func recordSchema(_ schema: Schema) throws {
        let event = Event(id: EventID(replica: core.replica, sequence: core.nextSequence + UInt64(eventCount)),
                          hlc: core.clock.tick(), change: .schema(schema))
        try appendRaw(event)
    }
}
