import Synchronization
import StrataCore

/// The mutable view of a database inside ``Database/transaction(_:)``: inserts go to the zone
/// they name (the default zone otherwise); every other change goes to the zone that holds the
/// object; reads see every zone, with this transaction's changes.
///
/// Each zone's part is one transaction of that zone's store (one log record, pushed to that
/// zone). A transaction that changes several zones is committed atomically on this device: the
/// parts are written to a journal first, and opening the database completes a commit a crash
/// interrupted. On the server each zone takes its own part, as CloudKit's zones do.
///
/// Do not keep it beyond the closure.
public final class DatabaseTransaction {
    let cores: [LockedZone]
    let defaultZone: ZoneReference
    /// The zones' transactions begun so far (by index in `cores`).
    private(set) var opened: [Int: Transaction] = [:]
    /// The schemas in effect of zones a move widened in this transaction, as they were before
    /// (restored when the transaction is rolled back).
    private var widened: [Int: Schema] = [:]

    init(cores: [LockedZone], defaultZone: ZoneReference) {
        self.cores = cores
        self.defaultZone = defaultZone
    }

    /// The transaction of the zone at `index`, begun on first use.
    func transaction(at index: Int) -> Transaction {
        if let tx = opened[index] { return tx }
        let core = cores[index].core
        core.projection.beginBatch()
        let tx = Transaction(core: core)
        tx.outside = { [unowned self] id in self.entity(of: id, outsideOf: index) }
        opened[index] = tx
        return tx
    }

    /// Puts back the schemas a move widened (the transaction is rolled back).
    func restoreWidenedSchemas() {
        for (index, schema) in widened { cores[index].core.projection.schema = schema }
        widened = [:]
    }

    func index(of zone: ZoneReference) throws -> Int {
        guard let index = cores.firstIndex(where: { $0.zone == zone }) else {
            throw StoreError(.unknownZone, "the database holds no zone \(zone) (add it with addZone)")
        }
        return index
    }

    /// The zone (by index) whose copy of `id` is the object, with this transaction's changes.
    func holder(of id: ObjectID) -> Int? {
        var best: (index: Int, stamp: EventStamp)?
        for (index, entry) in cores.enumerated() {
            let projection = entry.core.projection
            guard let record = projection.existing(id) else { continue }
            let stamp = projection.stamp(of: record.inserted)
            if best == nil || DatabaseView.precedes((entry.zone, stamp), (cores[best!.index].zone, best!.stamp)) { best = (index, stamp) }
        }
        return best?.index
    }

    func entity(of id: ObjectID, outsideOf zone: Int) -> String? {
        for (index, entry) in cores.enumerated() where index != zone {
            if let record = entry.core.projection.existing(id) { return entry.core.projection.entityName(of: record) }
        }
        return nil
    }

    /// The transaction of the zone that holds `id`.
    private func holding(_ id: ObjectID) throws -> Transaction {
        guard let index = holder(of: id) else {
            throw StoreError(.objectNotFound, "no zone of the database holds this object", object: id)
        }
        return transaction(at: index)
    }

    // MARK: Reads

    /// The object in whatever zone holds it, or `nil`.
    public func object(_ id: ObjectID) -> ObjectSnapshot? {
        holder(of: id).flatMap { cores[$0].core.projection.appSnapshot(id, includeToMany: true) }
    }

    /// The zone that holds the object, or `nil`.
    public func zone(of id: ObjectID) -> ZoneReference? { holder(of: id).map { cores[$0].zone } }

    /// The existing objects of `entity` in every zone (or in `zones`), as
    /// ``Database/fetch(_:where:sortedBy:limit:in:)->[ObjectSnapshot]`` reads them, with this transaction's changes.
    public func fetch(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil, in zones: Set<ZoneReference>? = nil) -> [ObjectSnapshot] {
        // Through the live projections (their lookups into other zones are set already).
        var results: [ObjectSnapshot] = []
        for (index, entry) in cores.enumerated() where zones?.contains(entry.zone) ?? true {
            for object in Query(entity: entity, predicate: predicate, sort: [], limit: nil).run(on: entry.core.projection)
            where cores.count == 1 || holder(of: object.id) == index {
                results.append(object)
            }
        }
        results.sort { Query.ordered($0, $1, by: sort) }
        if let limit, results.count > limit { results.removeSubrange(limit...) }
        return results
    }

    // MARK: Changes

    /// Inserts a new object into `zone` (the default zone when `nil`).
    @discardableResult
    public func insert(_ entity: String, id: ObjectID = ObjectID(), _ values: [String: Value] = [:], in zone: ZoneReference? = nil) throws -> ObjectID {
        if holder(of: id) != nil {
            throw StoreError(.objectExists, "an object with this ID already exists in a zone of the database", entity: entity, object: id)
        }
        return try transaction(at: index(of: zone ?? defaultZone)).insert(entity, id: id, values)
    }

    /// Inserts a model as a new object into `zone` (the default zone when `nil`).
    public func insert<M: StrataModel>(_ model: M, in zone: ZoneReference? = nil) throws {
        if holder(of: model.id) != nil {
            throw StoreError(.objectExists, "an object with this ID already exists in a zone of the database", entity: M.entityName, object: model.id)
        }
        try transaction(at: index(of: zone ?? defaultZone)).insert(model)
    }

    /// Changes attributes and to-one relationships of an object, in its zone.
    public func update(_ id: ObjectID, _ values: [String: Value]) throws { try holding(id).update(id, values) }

    /// Writes what differs between the model and `original` (see `Transaction.update(_:from:)`),
    /// in the object's zone.
    public func update<M: StrataModel>(_ model: M, from original: M? = nil) throws { try holding(model.id).update(model, from: original) }

    /// Sets one attribute or to-one relationship, in the object's zone.
    public func set(_ id: ObjectID, _ key: String, _ value: Value) throws { try holding(id).set(id, key, value) }

    /// Deletes an object (with its delete rules, within its zone).
    public func delete(_ id: ObjectID) throws { try holding(id).delete(id) }

    /// Adds `target` (in any zone) to a to-many relationship of `id`.
    public func add(_ id: ObjectID, _ relationship: String, _ target: ObjectID) throws { try holding(id).add(id, relationship, target) }

    /// Removes `target` from a to-many relationship of `id`.
    public func remove(_ id: ObjectID, _ relationship: String, _ target: ObjectID) throws { try holding(id).remove(id, relationship, target) }

    /// The object as a model, or `nil`.
    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        guard let snapshot = object(id), snapshot.entity == M.entityName else { return nil }
        return try ModelCoding.model(type, from: snapshot)
    }

    /// Moves an object to another zone: a delete in the zone that holds it (the delete event
    /// alone: its delete rules do not run, what it relates to stays) and an insert of its current
    /// attributes, to-one references and to-many members under the same ID in `zone`. Both are
    /// parts of this transaction. Under the merge rule this is a delete there and an insert here:
    /// an edit another device makes in the old zone before it learns of the move stays in that
    /// zone's history and does not reach the moved object (as an edit concurrent with a delete
    /// does not resurrect it). See the Databases article.
    ///
    /// - Throws: `objectNotFound`, `unknownZone`; `invalidReference` when a relationship the
    ///   object's targets store (one-to-one stored on the other side, or a derived to-many) would
    ///   have to cross zones; `invalidArgument` when the object's zone is downloaded without
    ///   parts of its entity (a download mask: the move would write defaults in their place).
    public func move(_ id: ObjectID, to zone: ZoneReference) throws {
        guard let source = holder(of: id) else {
            throw StoreError(.objectNotFound, "no zone of the database holds this object", object: id)
        }
        let destination = try index(of: zone)
        guard source != destination else { return }
        let sourceTx = transaction(at: source)
        let projection = cores[source].core.projection
        // Under stored names: the move carries every field, those of other app versions too.
        guard let snapshot = projection.snapshot(id, includeToMany: true) else {
            throw StoreError(.objectNotFound, "no zone of the database holds this object", object: id)
        }
        guard let entity = projection.schema.entity(snapshot.entity) else {
            throw StoreError(.unknownEntity, "entity \(snapshot.entity) is not in this app's schema: its objects cannot be moved", entity: snapshot.entity, object: id)
        }
        // Moving writes the object anew elsewhere from what this device holds: what its zone's
        // download mask kept off the device would come out as defaults, on every device.
        let lacking = cores[source].core.downloadMasks.union
        if lacking == nil || lacking?.withholds(entity: snapshot.entity) == true
            || (entity.attributes.map(\.name) + entity.relationships.map(\.name)).contains(where: { lacking?.withholds($0, of: snapshot.entity) == true }) {
            throw StoreError(.invalidArgument, "zone \(cores[source].zone) is downloaded without parts of \(snapshot.entity) (its download mask\(lacking.map { ": \($0)" } ?? " is unknown")): moving the object would replace what this device never downloaded with defaults; move it from a device that downloads all of it", entity: snapshot.entity, object: id)
        }
        // What the object stores itself: its attributes and the relationships kept on it. One
        // kept on its targets (the other side of a one-to-one, a derived to-many) stays with them.
        var values: [String: Value] = [:]
        for attribute in entity.attributes { values[attribute.name] = snapshot.values[attribute.name] ?? .null }
        var members: [(String, [ObjectID])] = []
        for relationship in entity.relationships {
            guard let storage = projection.storage(entity: snapshot.entity, relationship: relationship.name)?.1 else { continue }
            if case .derived = storage { continue }
            if relationship.isToMany {
                members.append((relationship.name, snapshot.toMany[relationship.name] ?? []))
            } else {
                values[relationship.name] = snapshot.values[relationship.name] ?? .null
            }
        }
        // Representations of one attribute (a type change, a split) all get the newest's value.
        if let view = projection.view, let record = projection.existing(id) {
            values = view.movedValues(values, entity: snapshot.entity, record: record, in: projection)
        }
        try sourceTx.deleteMovingOut(id)
        let destinationTx = transaction(at: destination)
        // Fields the destination zone's schema does not know (another app version's, written in
        // the source zone) travel with their definitions: the source's schema is recorded in the
        // destination first, in this same transaction, so that nothing of the object is dropped.
        let target = cores[destination].core.projection
        let known = target.schema.entity(snapshot.entity)
        if known == nil || values.keys.contains(where: { known?.attribute($0) == nil && known?.relationship($0) == nil })
            || members.contains(where: { known?.relationship($0.0) == nil }) {
            // Recorded under this device's replica: the entities, with this app's own steps only
            // (another device's steps must not count as this app's, see `Store.adopt`). The
            // values written are consistent across representations (above), so the destination
            // needs no other version's steps to read them.
            var carried = projection.schema
            carried.version = projection.appSchema?.version ?? 1
            carried.migrations = SchemaLineage.ordered(projection.appSchema?.migrations ?? [])
            if widened[destination] == nil { widened[destination] = target.schema }
            try destinationTx.recordSchema(carried)
            target.schema = target.schema.merged(with: projection.schema)
            destinationTx.forgetLayouts()
        }
        try destinationTx.insert(stored: snapshot.entity, id: id, values)
        for (relationship, targets) in members {
            for target in targets { try destinationTx.add(id, stored: relationship, target) }
        }
    }
}

extension Database {
    /// Runs `body` against every zone's current objects and commits its changes atomically on
    /// this device (see ``DatabaseTransaction``). A thrown error rolls everything back.
    ///
    /// - Throws: what `body` throws, or `StoreError`.
    @discardableResult
    nonisolated(nonsending)
    public func transaction<T: Sendable>(_ body: (DatabaseTransaction) throws -> T) async throws -> T {
        let stores = try self.stores()
        let defaultZone = self.defaultZone
        let journal = CommitJournal.newPath(in: directory)
        let interruption = state.withLock { $0.interruptCommitAfterParts }
        let (value, waiters, journaled) = try Self.locked(stores[...], []) { cores -> (T, [DurabilityWaiter], Bool) in
            for entry in cores {
                if let failure = entry.core.failure { throw failure }
                if entry.core.closed { throw StoreError(.storeFailed, "the store of zone \(entry.zone) is closed") }
            }
            let tx = DatabaseTransaction(cores: cores, defaultZone: defaultZone)
            // References into the other zones read as present while the body runs.
            for (index, entry) in cores.enumerated() where cores.count > 1 {
                entry.core.projection.elsewhere = { [unowned tx] id in tx.entity(of: id, outsideOf: index) }
                entry.core.projection.sourcesElsewhere = { id, entity, relationship, toMany in
                    var sources: [(ObjectID, EventStamp)] = []
                    for (other, entry) in cores.enumerated() where other != index {
                        sources += entry.core.projection.stampedDerivedSources(of: id, sourceEntity: entity, sourceRelationship: relationship, storedIsToMany: toMany)
                    }
                    return sources
                }
            }
            defer {
                for entry in cores {
                    entry.core.projection.elsewhere = nil
                    entry.core.projection.sourcesElsewhere = nil
                }
            }
            let opened = { tx.opened.sorted { $0.key < $1.key } }
            let value: T
            var parts: [(index: Int, bytes: [UInt8], count: Int)] = []
            do {
                value = try body(tx)
                for (index, zoneTx) in opened() where zoneTx.eventCount > 0 {
                    let core = cores[index].core
                    let bytes = zoneTx.encoder.finish(firstSequence: core.nextSequence)
                    let limit = cores[index].store.log.options.maxEntrySize
                    guard bytes.count <= limit else {
                        throw StoreError(.invalidArgument, "the transaction's part in zone \(cores[index].zone) encodes to \(bytes.count) bytes; the limit is \(limit)")
                    }
                    parts.append((index, bytes, zoneTx.eventCount))
                }
                if parts.count > 1 {
                    // Several logs: the parts go to the journal first, so that a crash between
                    // two appends is completed on the next open rather than leaving half.
                    try CommitJournal(parts: parts.map { .init(zone: cores[$0.index].zone, bytes: $0.bytes) }).write(to: journal)
                }
            } catch {
                for (_, zoneTx) in opened() { zoneTx.core.projection.rollbackBatch() }
                tx.restoreWidenedSchemas()
                throw error
            }
            var waiters: [DurabilityWaiter] = []
            for (_, zoneTx) in opened() where zoneTx.eventCount == 0 { zoneTx.core.projection.rollbackBatch() }
            for (number, part) in parts.enumerated() {
                if let interruption, number >= interruption {
                    // Tests: a crash after `interruption` parts (the rest never reach their logs).
                    for rest in parts[number...] { cores[rest.index].core.projection.rollbackBatch() }
                    tx.restoreWidenedSchemas()
                    throw StoreError(.storeFailed, "interrupted after \(interruption) parts (a test's simulated crash)")
                }
                let store = cores[part.index].store
                let core = cores[part.index].core
                let changes = core.projection.commitBatch(report: store.hasObservers)
                core.nextSequence += UInt64(part.count)
                waiters.append(try store.submit([part.bytes], origin: .local, changes: changes, core: core))
            }
            return (value, waiters, parts.count > 1)
        }
        for waiter in waiters { try await waiter.wait() }
        if journaled { try CommitJournal.remove(at: journal) }
        return value
    }

    /// Moves an object to another zone in one transaction (see ``DatabaseTransaction/move(_:to:)``).
    public func move(_ id: ObjectID, to zone: ZoneReference) async throws {
        try await transaction { try $0.move(id, to: zone) }
    }

    /// Runs `body` with the cores of `stores` locked, all at once (nested, in zone order: the
    /// order every multi-zone reader and writer takes them in, so none deadlocks).
    static func locked<T: Sendable>(_ stores: ArraySlice<(zone: ZoneReference, store: Store)>, _ held: [LockedZone],
                                    _ body: ([LockedZone]) throws -> T) throws -> T {
        guard let first = stores.first else { return try body(held) }
        return try first.store.core.withLock { core in
            let zone = LockedZone(zone: first.zone, store: first.store, core: core)
            return try locked(stores.dropFirst(), held + [zone], body)
        }
    }

    /// Completes a multi-zone commit that a crash interrupted: every part not in its zone's log
    /// yet is applied there (each zone skips what it holds), then the journal goes.
    func completeInterruptedCommit() async throws {
        for path in try CommitJournal.all(in: directory) {
            guard let journal = try CommitJournal.read(at: path) else { continue }
            try await complete(journal, at: path)
        }
    }

    private func complete(_ journal: CommitJournal, at path: String) async throws {
        for part in journal.parts {
            guard let store = store(for: part.zone) else {
                throw StoreError(.corruptDatabase, "\(path) holds a part for zone \(part.zone), which the database does not hold")
            }
            do {
                try await store.applyRemote(encoded: [part.bytes])
            } catch let error as StoreError {
                throw StoreError(.corruptDatabase, "\(path): the part for zone \(part.zone) cannot be applied: \(error)")
            }
        }
        try CommitJournal.remove(at: path)
    }
}

/// A zone's store and its core, while a multi-zone transaction holds the core's lock (the core
/// is read and changed only inside ``Database/locked(_:_:_:)``, which holds it).
struct LockedZone: @unchecked Sendable {
    var zone: ZoneReference
    var store: Store
    var core: StoreCore
}
