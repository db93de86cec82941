import Foundation
import Logging
import Synchronization
public import StrataLog
public import StrataCore

/// A store: an object graph kept as an event log on this device.
///
/// ```swift
/// let store = try await Store.open(at: path, schema: schema)
/// let id = try await store.transaction { tx in
///     try tx.insert("Note", ["title": "Groceries"])
/// }
/// for await change in store.changes() { … }
/// ```
///
/// Every transaction is one record of the store's log (see `StrataLog`); the object graph is the
/// projection of the log's events under the merge rule, rebuilt on open from the newest snapshot
/// plus the log's tail.
public final class Store: Sendable {
    /// The store's directory: `store.json` (identity) and `log/` (the segment log).
    public let directory: String
    /// The replica this store authors under now: every event it authors carries it. A fork
    /// (`fork(keepingThrough:reason:restamp:)`) or a lost log gives the store a new one.
    public var replicaID: ReplicaID { core.withLock { $0.replica } }
    /// The store's identity: its current replica, its log's ID, the replicas it abandoned.
    @_spi(StrataInternals)
    public var identity: StoreIdentity { core.withLock { $0.identity } }
    let log: SegmentLog
    let core: Mutex<StoreCore>
    let observers = Mutex<[UInt64: AsyncStream<ChangeSet>.Continuation]>([:])
    let nextObserver = Atomic<UInt64>(0)
    /// Log entries the push path has read (see ``entriesReadForSyncCount``).
    let entriesReadForSync = Atomic<Int>(0)
    let logger: Logger
    /// Held by a compaction while it runs: one at a time, automatic or not.
    let compactionGate = AsyncGate()
    /// What open did: snapshot used, events replayed, warnings.
    public let openReport: OpenReport
    /// The asset files (`assets/`) and what fetches them (see Store+Assets).
    let assets: LocalAssets
    let assetFetching = Mutex(AssetFetching())
    /// With `StoreSharing.processes`: the commits of this process waiting for their turn at the
    /// shared log.
    let turnGate = AsyncGate()
    /// Whether the watcher has a follow of the other processes' commits scheduled.
    let followScheduled = SharedFlag()
    /// With `StoreSharing.processes`: what tells this process that another one committed.
    let watcher = Mutex<LogWatcher?>(nil)

    init(directory: String, log: SegmentLog, core: sending StoreCore, logger: Logger, report: OpenReport) {
        self.assets = LocalAssets(storeDirectory: directory)
        self.directory = directory
        self.log = log
        self.core = Mutex(core)
        self.logger = logger
        self.openReport = report
    }

    /// The segment log under the store (for tools).
    @_spi(StrataInternals)
    public var segmentLog: SegmentLog { log }

    // MARK: Reads

    /// The object with this ID, or `nil` when it does not exist.
    public func object(_ id: ObjectID) -> ObjectSnapshot? {
        core.withLock { $0.projection.appSnapshot(id, includeToMany: true) }
    }

    /// The existing objects of `entity` that match `predicate`, sorted by `sort` (then by ID), at
    /// most `limit` of them: one state of the store. A predicate runs outside the store's lock
    /// (on a view, see ``read(_:)``), so a slow filter never holds up commits or sync.
    public func fetch(_ entity: String, where predicate: (@Sendable (ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        guard let predicate else {
            return core.withLock { Query(entity: entity, predicate: nil, sort: sort, limit: limit).run(on: $0.projection) }
        }
        return read { $0.fetch(entity, where: predicate, sortedBy: sort, limit: limit) }
    }

    /// The existing objects of `entity` that match `filter`, sorted by `sort` (then by ID), at
    /// most `limit`: one state of the store. A filter stated as data is planned: an equality or a
    /// range on an indexed attribute (``StoreOptions/indexes``) reads only the objects the index
    /// names, and a sort by an index's first attribute with a limit stops early. It runs under
    /// the store's lock (it calls no app code), without copying the store's state.
    ///
    /// ```swift
    /// let urgent = store.fetch("Task", matching: .equal("done", false) && .lessOrEqual("due", Value(now)),
    ///                          sortedBy: [SortKey("due")], limit: 50)
    /// ```
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        core.withLock { Query(entity: entity, predicate: nil, filter: filter, sort: sort, limit: limit).run(on: $0.projection) }
    }

    /// The number of existing objects of `entity`.
    public func count(_ entity: String) -> Int {
        core.withLock { $0.projection.appObjectIDs(of: entity).count }
    }

    /// The number of existing objects of `entity` that match `filter` (planned on the indexes,
    /// see ``fetch(_:matching:sortedBy:limit:)->[ObjectSnapshot]``).
    public func count(_ entity: String, matching filter: Filter) -> Int {
        core.withLock { Query(entity: entity, predicate: nil, filter: filter, sort: [], limit: nil).run(on: $0.projection).count }
    }

    /// The objects related to `id` through `relationship`, sorted by ID.
    public func related(_ id: ObjectID, _ relationship: String) -> [ObjectSnapshot] {
        core.withLock { core in
            core.projection.appRelated(id, relationship: relationship).compactMap { core.projection.appSnapshot($0) }
        }
    }

    /// Which event set each visible field of an object ("blame").
    public func provenance(_ id: ObjectID) -> [String: FieldProvenance] {
        core.withLock { $0.projection.appProvenance(id) }
    }

    /// A canonical SHA-256 (hex) of the visible object graph, local-only attributes excluded: two
    /// stores that applied the same events have the same digest.
    public func digest() -> String {
        core.withLock { $0.projection.digest() }
    }

    /// The schema in effect: the one recorded in the log merged with the app's.
    public var schema: Schema {
        core.withLock { $0.projection.schema }
    }

    /// The app's schema version (`Schema.version`); for a store opened without app code, the
    /// newest version recorded. What sync tells the server it runs (from 1 to 1,000,000: a
    /// recorded version is any device's claim).
    public var schemaVersion: Int {
        let version = core.withLock { $0.projection.appSchema?.version ?? $0.projection.schema.version }
        return min(max(version, 1), 1_000_000)
    }

    /// How far each replica's events have been applied.
    public func appliedSequences() -> [(replica: ReplicaID, contiguous: UInt64, highest: UInt64)] {
        core.withLock { $0.projection.appliedSummary() }
    }

    /// Every existing object's ID, sorted.
    public func allObjectIDs() -> [ObjectID] {
        core.withLock { $0.projection.allObjectIDs() }
    }

    /// Finishes pending commits, makes them durable and releases the store. A compaction that
    /// is running (automatic, or ``compact()``) is finished first; none starts afterwards.
    public func close() async throws {
        watcher.withLock { $0?.stop() }
        let compacting = core.withLock { core -> Task<Void, Never>? in
            core.closed = true
            return core.autoCompaction.task
        }
        await compacting?.value
        await compactionGate.enter()
        defer { compactionGate.leave() }
        // Observers end after the last in-flight commit has been delivered to them.
        defer { for continuation in observers.withLock({ Array($0.values) }) { continuation.finish() } }
        do {
            try await log.close()
        } catch let error as LogError {
            throw StoreError(error)
        }
    }
}

/// What ``Store/open(at:schema:options:)`` did.
public struct OpenReport: Sendable, Hashable {
    /// The snapshot loaded, if any.
    public var snapshot: SnapshotInfo?
    /// Log entries (transactions) replayed after it.
    public var replayedTransactions = 0
    public var replayedEvents = 0
    /// The encoded (uncompressed) bytes of the transactions replayed.
    public var replayedBytes = 0
    /// Damaged snapshots skipped (newest first), with why.
    public var skippedSnapshots: [String] = []
}

/// An asynchronous lock: `enter()` suspends (never blocks a thread) until the holder calls
/// `leave()`; waiters enter in arrival order. (Also the sync engine's turn between a push and its
/// long poll's answer.)
package final class AsyncGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    package init() {}

    package func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let entered = state.withLock { s -> Bool in
                if !s.busy {
                    s.busy = true
                    return true
                }
                s.waiters.append(continuation)
                return false
            }
            if entered { continuation.resume() }
        }
    }

    package func leave() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiters.isEmpty else {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// An atomic flag that closures can capture (an `Atomic` cannot be).
final class SharedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    /// Sets the flag; whether it was set already.
    func set() -> Bool { value.exchange(true, ordering: .acquiringAndReleasing) }
    func clear() { value.store(false, ordering: .releasing) }
}
