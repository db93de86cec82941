import Dispatch
import Strata
import StrataLog
import StrataCore

/// How far back to go: up to and including a log position, or everything stored at or before a
/// time (the device's clock when it stored each transaction).
enum Cutoff: Sendable, Hashable, CustomStringConvertible {
    case position(UInt64)
    case time(Int64)

    /// Parses `POSITION` or `TIME` (ISO 8601, or `@microseconds`).
    init?(argument: String) {
        if let position = UInt64(argument) {
            self = .position(position)
        } else if let time = TimeArgument.microseconds(argument) {
            self = .time(time)
        } else {
            return nil
        }
    }

    func includes(position: UInt64, timestamp: Int64) -> Bool {
        switch self {
        case .position(let last): position <= last
        case .time(let last): timestamp <= last
        }
    }

    var description: String {
        switch self {
        case .position(let p): "position \(p)"
        case .time(let t): Format.time(microseconds: t)
        }
    }
}

/// A store's projection rebuilt read-only from its files — the newest state, or the state at a
/// cutoff — with the index of its log and the verification findings of the read.
final class LoadedStore: @unchecked Sendable {
    let files: StoreFiles
    let projection: ProjectionBuilder
    /// The snapshot the projection started from (`nil`: an empty projection, the whole log).
    let base: SnapshotInfo?
    var index = EntryIndex()
    var report = VerifyReport()
    /// Transactions and events applied from the log (after the base).
    var appliedTransactions = 0
    var appliedEvents = 0
    /// The last position applied, and where the log ends.
    var lastApplied: UInt64?
    var notes: [String] = []
    /// The projection's digest, when a caller computed it.
    var digest: String?
    /// When asked for: every (subject, target) reference an applied event made (see
    /// `DecodedTransaction.references`), repeats and all.
    var references: [(subject: ObjectID, target: ObjectID)] = []

    private init(files: StoreFiles, projection: ProjectionBuilder, base: SnapshotInfo?) {
        self.files = files
        self.projection = projection
        self.base = base
    }

    /// Where a rebuild starts.
    enum Start {
        /// The newest snapshot that verifies, then the log after it (fast; what a store does).
        case newest
        /// The whole log from an empty projection when the log still starts at position 0,
        /// otherwise the oldest snapshot that verifies (what can be checked or replayed).
        case earliest
        /// This snapshot (`nil`: the whole log), as an earlier read of the same store started:
        /// a second pass over a store in use must not start from a snapshot written since.
        case base(SnapshotInfo?)
    }

    /// Rebuilds the projection.
    ///
    /// - Parameters:
    ///   - until: stop after this cutoff (entries past it are still verified, not applied).
    ///   - each: called with every entry of the log, after applying it when it is (`applied`:
    ///     false for entries the base snapshot covers or past the cutoff).
    /// - Throws: ``CLIError``: not a store, no snapshot covers retired history, a cutoff before
    ///   the earliest state still held, or an event that does not decode (with its position).
    ///   - digests: when given, collects the fingerprints of every event the log holds of the
    ///     store's history, as the log is read.
    ///   - replayingOnly: a partial replay of these objects (see
    ///     `ProjectionBuilder.replayingOnly`); `nil`: every object.
    ///   - before: apply no entry at or past this position (later ones are still read and indexed).
    ///   - collectingReferences: fill ``references`` from the events applied.
    static func load(_ files: StoreFiles, start: Start = .newest, until cutoff: Cutoff? = nil, progress: Progress? = nil, slot: Int = 0,
                     digests: HistoryDigestCollector? = nil, replayingOnly: Set<ObjectID>? = nil, before: UInt64? = nil,
                     collectingReferences: Bool = false,
                     each: ((_ entry: HistoryEntry, _ header: TransactionHeader, _ applied: Bool) throws -> Void)? = nil) throws -> LoadedStore {
        let identity = try files.identity()
        // Snapshots that may count transactions a fork abandoned are never a base.
        var candidates = identity.snapshots.filter { info in
            info.position >= identity.startPosition && !(files.storeIdentity?.isTainted(snapshotAt: info.position) ?? false)
        }
        switch (start, cutoff) {
        case (.base(let info), _):
            candidates = info.map { [$0] } ?? []
        case (.earliest, _), (_, .time?):
            candidates.reverse()
            if identity.startPosition == 0 { candidates = [] }
        case (.newest, .position(let last)?):
            candidates = candidates.filter { last == .max || $0.position <= last + 1 }
            if identity.startPosition == 0 { candidates = [] }
        case (.newest, nil):
            break
        }
        var loaded: LoadedStore?
        var skipped: [String] = []
        for info in candidates {
            do {
                let snapshot = try SegmentLog.readSnapshot(info, logID: identity.logID)
                let builder = try ProjectionBuilder(snapshot: snapshot.payload, identity: files.storeIdentity)
                builder.adoptedStates = AdoptedStates(storeDirectory: files.directory)
                loaded = LoadedStore(files: files, projection: builder, base: info)
                break
            } catch {
                skipped.append("skipped the damaged snapshot \(info.name): \(error)")
            }
        }
        if loaded == nil {
            guard identity.startPosition == 0 else {
                let held = identity.snapshots.map { String($0.position) }.joined(separator: ", ")
                if case .position(let last)? = cutoff, identity.snapshots.contains(where: { $0.position >= identity.startPosition }) {
                    throw CLIError("history before position \(identity.startPosition) was compacted away; the earliest state \(files.name) can show is at a snapshot (positions \(held)), not position \(last)")
                }
                throw CLIError("no valid snapshot covers the history before position \(identity.startPosition) that \(files.name) retired (snapshots: \(held.isEmpty ? "none" : held))")
            }
            let builder = ProjectionBuilder(identity: files.storeIdentity)
            builder.adoptedStates = AdoptedStates(storeDirectory: files.directory)
            loaded = LoadedStore(files: files, projection: builder, base: nil)
        }
        guard let store = loaded else { throw CLIError("internal: no projection") }
        store.projection.replayingOnly = replayingOnly
        store.notes = skipped
        let from = store.base?.position ?? 0
        store.report = try files.scan(progress: progress, slot: slot) { entry in
            let header: TransactionHeader
            do {
                header = try TransactionHeader(decoding: entry.payload, position: entry.position)
            } catch {
                throw CLIError("\(files.name): \(error) (record at byte \(entry.recordOffset) of \(entry.segment))", exitCode: ExitStatus.finding)
            }
            store.index.add(position: entry.position, timestamp: entry.timestamp, header: header, segment: entry.segment, recordOffset: entry.recordOffset)
            // A transaction a fork abandoned is not part of the store's history (it was re-authored).
            let abandoned = files.storeIdentity?.isAbandoned(header: header, position: entry.position) ?? false
            let applies = entry.position >= from && !abandoned && (cutoff?.includes(position: entry.position, timestamp: entry.timestamp) ?? true)
                && (before.map { entry.position < $0 } ?? true)
            // An entry applied is fingerprinted from the decoding the apply makes; one a snapshot
            // covers (or past the cutoff) is decoded for it alone.
            if let digests, !abandoned, !applies { digests.add(entry, schema: store.projection.schema) }
            guard applies else {
                try each?(entry, header, false)
                return
            }
            do {
                if digests != nil || collectingReferences {
                    let projection = store.projection
                    store.appliedEvents += try projection.apply(encoded: entry.payload, position: entry.position) { decoded in
                        digests?.add(decoded, schema: projection.schema)
                        if collectingReferences { decoded.references { store.references.append(($0, $1)) } }
                    }
                } else {
                    store.appliedEvents += try store.projection.apply(encoded: entry.payload, position: entry.position)
                }
            } catch {
                throw CLIError("\(files.name): \(error) (record at byte \(entry.recordOffset) of \(entry.segment))", exitCode: ExitStatus.finding)
            }
            store.appliedTransactions += 1
            store.lastApplied = entry.position
            try each?(entry, header, true)
        }
        if let base = store.base, case .time = cutoff, identity.startPosition > 0 {
            store.notes.append("history before position \(identity.startPosition) was compacted; the state starts from the snapshot at position \(base.position)")
        }
        return store
    }
}

extension LoadedStore {
    /// Two stores rebuilt at once (they are independent: one per core), each with the history
    /// digests of its log (`diff`, `merge --what-if`).
    ///
    /// - Parameters:
    ///   - replayingOnly: a partial replay of these objects (`[]`: of none — the applied
    ///     sequences, the schema and the base state only); `nil`: a full one.
    ///   - collectingReferences: fill each store's ``references``.
    static func loadPair(_ a: StoreFiles, _ b: StoreFiles, replayingOnly: Set<ObjectID>? = nil, collectingReferences: Bool = false,
                         progress: Progress?) throws
        -> ((store: LoadedStore, digests: HistoryDigests), (store: LoadedStore, digests: HistoryDigests)) {
        let files = [a, b]
        let results = Slots<Result<(store: LoadedStore, digests: HistoryDigests), any Error>>()
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            results.set(i, Result {
                let collector = HistoryDigestCollector(files[i])
                let loaded = try LoadedStore.load(files[i], start: .newest, progress: progress, slot: i, digests: collector,
                                                  replayingOnly: replayingOnly, collectingReferences: collectingReferences)
                return (loaded, collector.finish())
            })
        }
        progress?.finish()
        guard let first = results.get(0), let second = results.get(1) else { throw CLIError("internal: a store was not read") }
        return (try first.get(), try second.get())
    }

    /// The two stores of a first pass replayed again (one per core), from the snapshot that pass
    /// started from and as far as it read their logs, with the given objects only (`nil`: all).
    /// Each keeps the first pass's index and findings, so that what was found in the log and what
    /// the projection holds are of one read even when a writer appended or wrote a snapshot in
    /// between. (A compaction in between that retired what the first pass read fails the second
    /// with the reason; a diff run again reads the store as it is then.)
    static func replayPair(_ first: (LoadedStore, LoadedStore), replayingOnly: Set<ObjectID>?, progress: Progress?) throws -> (LoadedStore, LoadedStore) {
        let sides = [first.0, first.1]
        let results = Slots<Result<LoadedStore, any Error>>()
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            results.set(i, Result {
                let earlier = sides[i]
                let again = try LoadedStore.load(earlier.files, start: .base(earlier.base), progress: progress, slot: i, replayingOnly: replayingOnly,
                                                 before: earlier.index.entries.last.map { $0.position + 1 } ?? 0)
                again.index = earlier.index
                again.report = earlier.report
                again.notes = earlier.notes
                return again
            })
        }
        progress?.finish()
        guard let a = results.get(0), let b = results.get(1) else { throw CLIError("internal: a store was not read") }
        return (try a.get(), try b.get())
    }
}

/// The history digests of a store as ``LoadedStore/load(_:start:until:progress:slot:digests:each:)``
/// reads its log: every entry of its history, also those a snapshot covers (their content is still
/// here); not an adoption record (no events) nor a transaction a fork abandoned. Local-only
/// attributes of the schema as far as the log has been read are left out of the store's own
/// replicas' events (they are never pushed, so no other copy has them).
final class HistoryDigestCollector: @unchecked Sendable {
    private var builder = HistoryDigests.Builder()
    /// The store's own replicas: only their events can hold local-only attributes.
    private let own: Set<ReplicaID>

    init(_ files: StoreFiles) {
        own = files.storeIdentity?.ownReplicas ?? [files.replicaID]
    }
    private var schema: Schema?
    private var localOnly: [String: Set<String>] = [:]
    /// Entries whose events did not decode (the read reports them elsewhere).
    private(set) var undecodable = 0

    func add(_ entry: HistoryEntry, schema now: Schema) {
        if AdoptionRecord.isAdoption(entry.payload) { return }
        guard let decoded = try? EventCodec.decodeRaw(entry.payload, position: entry.position) else {
            undecodable += 1
            return
        }
        add(decoded, schema: now)
    }

    /// A transaction already decoded (by the projection's apply).
    func add(_ decoded: DecodedTransaction, schema now: Schema) {
        if schema != now {
            schema = now
            localOnly = now.localOnlyAttributes
        }
        builder.add(decoded, leavingOut: localOnly, own: own)
    }

    func finish() -> HistoryDigests { builder.finish() }
}
