import Foundation
import Synchronization
import StrataLog
public import StrataCore

/// Several zones in one place: a private zone, zones other users share with this one, a public
/// catalog — each kept as its own ``Store`` (its own log, replica and history, synced with its
/// zone on the server), read and written together.
///
/// ```swift
/// let db = try await Database.open(at: path, schema: schema)             // zone "default"
/// let list = ZoneReference("groceries", owner: "alice")
/// try await db.addZone(list)
/// try await db.transaction { tx in
///     try tx.insert("Item", ["title": "Milk"], in: list)
///     try tx.insert("Note", ["title": "Private"])                        // the default zone
/// }
/// let items = db.fetch("Item")                                            // every zone
/// let shared = db.fetch("Item", in: [list])                               // one zone
/// ```
///
/// Every object belongs to one zone. Reads span zones unless restricted to some; a reference
/// may point into another zone, and reads as absent when that zone is not in the database
/// (never shared with this user, or access lost). ``move(_:to:)`` moves an object to another
/// zone in one local transaction. When access to a zone is lost, ``removeZone(_:reason:)`` takes
/// its objects out of every read and keeps its store, with the edits no server acknowledged,
/// aside (``lostZones``).
///
/// On disk: `database.json` (the zones, see the Databases article), `zones/own/NAME/` and
/// `zones/shared/OWNER/NAME/` (a store each), `lost/` (stores set aside), `commit-*.journal`
/// (multi-zone commits being written).
public final class Database: Sendable {
    /// The database's directory.
    public let directory: String
    let schema: Schema
    let options: StoreOptions
    let state: Mutex<DatabaseState>
    /// Serializes changes to the set of zones (add, remove) with each other; reads and
    /// transactions take a snapshot of the set under `state`.
    let membership = AsyncGate()

    struct DatabaseState {
        var manifest: DatabaseManifest
        var stores: [ZoneReference: Store]
        var observers: [UInt64: AsyncStream<DatabaseChange>.Continuation] = [:]
        var nextObserver: UInt64 = 0
        /// Forwards each zone store's change sets to the database's observers.
        var forwarders: [ZoneReference: Task<Void, Never>] = [:]
        var willRemoveZone: (@Sendable (ZoneReference, Store) async -> Void)?
        /// Zones whose removal's hook is running (`removeZone`).
        var removing: Set<ZoneReference> = []
        var closed = false
        /// Tests only: a multi-zone commit stops after this many parts, as a crash would.
        var interruptCommitAfterParts: Int?
    }

    init(directory: String, schema: Schema, options: StoreOptions, manifest: DatabaseManifest, stores: [ZoneReference: Store]) {
        self.directory = directory
        self.schema = schema
        self.options = options
        self.state = Mutex(DatabaseState(manifest: manifest, stores: stores))
    }

    /// Opens (or creates) the database in `directory` with the app's `schema`, opening the store
    /// of every zone it holds. A new database holds `defaultZone`, the zone inserts go to when
    /// they name none.
    ///
    /// A multi-zone commit that a crash interrupted is completed first (see
    /// ``DatabaseTransaction``): no zone ends up with only part of it.
    ///
    /// - Throws: `StoreError` — `corruptDatabase` when `database.json` is damaged, or what
    ///   opening a zone's store throws (naming the zone); `invalidArgument` for
    ///   `StoreSharing.processes`, which a database does not support yet.
    public static func open(at directory: String, schema: Schema, defaultZone: ZoneReference = ZoneReference("default"),
                            options: StoreOptions = StoreOptions()) async throws -> Database {
        try defaultZone.validate()
        // Its zone list (`database.json`), the journal of multi-zone commits and a transaction's
        // several zone stores are written by one process: a shared database would need them all
        // under the cross-process lock. Refused rather than half-shared.
        guard options.sharing == .exclusive else {
            throw StoreError(.invalidArgument, "a database cannot be shared by several processes yet (StoreSharing.processes): share a single store, or open the database in one process")
        }
        var zoneOptions = options
        // Every zone's store authors under its own replica.
        zoneOptions.newReplicaID = nil
        var manifest: DatabaseManifest
        if let existing = try DatabaseManifest.read(in: directory) {
            manifest = existing
        } else {
            do {
                try FileSystem.makeDirectory(directory)
            } catch {
                throw StoreError(.invalidArgument, "cannot create the database at \(directory): \(error)")
            }
            manifest = DatabaseManifest(defaultZone: defaultZone, zones: [.init(zone: defaultZone, directory: defaultZone.relativeDirectory)])
            try manifest.write(in: directory)
        }
        // A zone set aside just before a crash: its store is moved now, not reopened as a zone.
        for lost in manifest.lost { try finishSettingAside(lost, database: directory) }
        var stores: [ZoneReference: Store] = [:]
        do {
            for entry in manifest.zones {
                stores[entry.zone] = try await openZoneStore(directory + "/" + entry.directory, zone: entry.zone, schema: schema, options: zoneOptions)
            }
        } catch {
            for store in stores.values { try? await store.close() }
            throw error
        }
        let database = Database(directory: directory, schema: schema, options: zoneOptions, manifest: manifest, stores: stores)
        do {
            try await database.completeInterruptedCommit()
        } catch {
            try? await database.close()
            throw error
        }
        for (zone, store) in stores { database.forwardChanges(of: store, zone: zone) }
        return database
    }

    static func openZoneStore(_ path: String, zone: ZoneReference, schema: Schema, options: StoreOptions) async throws -> Store {
        do {
            return try await Store.open(at: path, schema: schema, options: options)
        } catch let error as StoreError {
            var named = error
            named.message = "zone \(zone): \(error.message)"
            throw named
        }
    }

    /// Closes every zone's store; the database refuses everything afterwards.
    public func close() async throws {
        let (stores, forwarders, observers) = state.withLock { state in
            state.closed = true
            let result = (Array(state.stores.values), Array(state.forwarders.values), Array(state.observers.values))
            state.forwarders = [:]
            state.observers = [:]
            return result
        }
        for task in forwarders { task.cancel() }
        for continuation in observers { continuation.finish() }
        var failure: (any Error)?
        for store in stores {
            do { try await store.close() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    // MARK: Zones

    /// The zones the database holds, own zones first.
    public var zones: [ZoneReference] { state.withLock { $0.stores.keys.sorted() } }

    /// The zone inserts go to when they name none.
    public var defaultZone: ZoneReference { state.withLock { $0.manifest.defaultZone } }

    /// The store of `zone` (for tools, and for a sync engine of that zone), or `nil` when the
    /// database does not hold it.
    public func store(for zone: ZoneReference) -> Store? { state.withLock { $0.stores[zone] } }

    /// The zones set aside when access to them was lost, with their stores kept.
    public var lostZones: [LostZone] { state.withLock { $0.manifest.lost } }

    /// The kept store of a lost zone's directory (absolute).
    public func path(of lost: LostZone) -> String { directory + "/" + lost.directory }

    /// Adds a zone (its store is created empty; a sync engine fills it). Adding a zone the
    /// database holds returns its store.
    @discardableResult
    public func addZone(_ zone: ZoneReference) async throws -> Store {
        try zone.validate()
        await membership.enter()
        defer { membership.leave() }
        if let store = try state.withLock({ state -> Store? in
            if state.closed { throw StoreError(.storeFailed, "the database is closed") }
            return state.stores[zone]
        }) { return store }
        let store = try await Self.openZoneStore(directory + "/" + zone.relativeDirectory, zone: zone, schema: schema, options: options)
        do {
            try state.withLock { state in
                var manifest = state.manifest
                manifest.zones.append(.init(zone: zone, directory: zone.relativeDirectory))
                try manifest.write(in: directory)
                state.manifest = manifest
                state.stores[zone] = store
            }
        } catch {
            try? await store.close()
            throw error
        }
        forwardChanges(of: store, zone: zone)
        deliver(DatabaseChange(zone: zone, kind: .zoneAdded))
        return store
    }

    /// Sets the hook called before a zone leaves the database (``removeZone(_:reason:)``), with
    /// the zone's store still open: the app may copy what it wants to keep.
    public func whenRemovingZone(_ hook: @escaping @Sendable (ZoneReference, Store) async -> Void) {
        state.withLock { $0.willRemoveZone = hook }
    }

    /// The stores of every zone, or of `zones` only, in zone order.
    func stores(_ zones: Set<ZoneReference>? = nil) throws -> [(zone: ZoneReference, store: Store)] {
        try state.withLock { state in
            if state.closed { throw StoreError(.storeFailed, "the database is closed") }
            if let zones {
                for zone in zones where state.stores[zone] == nil {
                    throw StoreError(.unknownZone, "the database holds no zone \(zone)")
                }
            }
            return state.stores.filter { zones?.contains($0.key) ?? true }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        }
    }
}

/// A change set of one zone of a database.
public struct DatabaseChange: Sendable {
    public var zone: ZoneReference
    public var kind: Kind

    public enum Kind: Sendable {
        /// Committed changes in the zone (local or pulled).
        case changes(ChangeSet)
        /// The zone was added to the database.
        case zoneAdded
        /// The zone left the database (its objects left every read); `lost` says where its store
        /// is kept and how many of its edits no server had acknowledged.
        case zoneRemoved(LostZone)
        /// The zone's store was emptied to be downloaded again (``Database/emptyZone(_:)``, when
        /// its download mask changed): its objects left every read until a sync brings them back.
        case zoneEmptied
    }
}
