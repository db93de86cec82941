import Foundation

/// The object graph as the merge rule makes it from a set of events, whatever their order.
///
/// Events are applied in *batches* (one transaction, or one batch of remote transactions): the
/// records they touch are changed in place and their original values kept, so a batch can be
/// rolled back (a failed local transaction) or committed (indexes updated, events marked
/// applied, changes reported). Reads in the middle of a batch see its effects.
///
/// Not thread-safe: the store serialises access to it.
///
/// The state every event touches is marked `@exclusivity(unchecked)`: Swift's run-time check
/// that no two accesses to a class property overlap cost about an eighth of applying a pulled
/// event (a call, a thread-local lookup and a set insert per property access, a dozen per event).
/// Nothing here needs the check: the projection is used from one serial context at a time, and
/// no code runs inside an access to one of these properties except the projection's own merge
/// rule (`modify`'s bodies), which never reaches the property being changed.
package final class Projection {
    // Interning keeps records small: names and replicas are 4-byte indexes.
    @exclusivity(unchecked) package private(set) var names: [String] = []
    @exclusivity(unchecked) private var nameIDs: [String: UInt32] = [:]
    @exclusivity(unchecked) package private(set) var replicas: [ReplicaID] = []
    @exclusivity(unchecked) private var replicaIDs: [ReplicaID: UInt32] = [:]
    /// Which events each replica (by index) has had applied.
    @exclusivity(unchecked) package private(set) var applied: [AppliedSet] = []

    @exclusivity(unchecked) package private(set) var records = RecordTable()
    // The three indexes below grow through the merge rule (MergeRule.swift) and `modify`
    // (`members` is also decided again in `commitBatch` and at loading, see EntityMembers).
    /// Every object ever seen per entity, or "scan the records" for a large one (see
    /// ``EntityMembers``).
    @exclusivity(unchecked) package var members = EntityMembers()
    /// Target → objects whose reference fields have pointed at it (a superset: reads check the value).
    @exclusivity(unchecked) package var referrers: [ObjectID: Set<Referrer>] = [:]
    /// Target → objects whose to-many sets have held it (a superset: reads check membership).
    @exclusivity(unchecked) package var memberships: [ObjectID: Set<Referrer>] = [:]
    /// Schema events in event order, and the schema they add up to.
    package private(set) var schemaEvents: [(ref: Ref, schema: Schema)] = []
    package private(set) var recordedSchema = Schema.empty
    /// The newest HLC seen in any event (the store's clock must stay ahead of it).
    @exclusivity(unchecked) package private(set) var maxHLC: UInt64 = 0
    /// Events applied, in all.
    @exclusivity(unchecked) package private(set) var eventCount: UInt64 = 0

    /// In a database of several zones (one projection each): the entity of an object that
    /// exists in another zone, so that a reference into it reads as present. `nil` for a store on
    /// its own, where a reference to an object it does not hold reads as absent. Set only for the
    /// time of a read or transaction of the database (it is not copied by ``frozenCopy()``).
    package var elsewhere: ((ObjectID) -> String?)?
    /// With ``elsewhere``: the objects of other zones whose relationship stored on them points at
    /// an object of this one (what this zone reads as the derived side).
    package var sourcesElsewhere: ((ObjectID, _ sourceEntity: String, _ sourceRelationship: String, _ storedIsToMany: Bool) -> [(ObjectID, EventStamp)])?

    /// Declared indexes (see Projection+Indexes.swift), the entities they cover (by name ID),
    /// objects of those entities changed since the indexes were last brought up to date, and
    /// whether they must be rebuilt (the schema changed).
    var indexes: [ProjectionIndex] = []
    @exclusivity(unchecked) var indexedEntities: Set<UInt32> = []
    /// With, per index, the key each had when the batch first touched it (to find its entry).
    @exclusivity(unchecked) var indexDirty: [ObjectID: [IndexKey?]] = [:]
    var indexesStale = false

    /// The schema reads interpret records with: the recorded one merged with the app's.
    package var schema = Schema.empty {
        didSet {
            storageCache = [:]
            readPlans = [:]
            if !indexes.isEmpty { indexesStale = true }
            if schema.migrations != oldValue.migrations || schema.version != oldValue.version { rebuildView() }
        }
    }
    /// The app's schema under its own names (`nil` for tools, which read stored names).
    package var appSchema: Schema? {
        didSet {
            rebuildView()
            if !indexes.isEmpty { indexesStale = true }
        }
    }
    /// How the app's version reads and writes, once any version has declared migrations (see
    /// ``SchemaView``); `nil` while names and stored names are the same.
    package private(set) var view: SchemaView?

    private func rebuildView() {
        view = appSchema.flatMap { SchemaView(app: $0, recorded: schema) }
    }
    private var storageCache: [String: RelationshipStorage] = [:]
    /// How each entity's objects read (by entity name ID): built on first read, dropped when the
    /// schema changes or a name is interned (a key the plan lacked may now exist).
    var readPlans: [UInt32: EntityReadPlan] = [:]

    package init() {}

    package struct Referrer: Hashable {
        package var source: ObjectID
        package var key: UInt32
    }

    // MARK: Batches

    /// Whether the query indexes (`members`, `referrers`, `memberships`) are kept. Off only in a
    /// projection that is merged and written out, never read (a server merging an uploaded state,
    /// ``ProjectionBuilder/mergedPayload(with:believingApplied:withholding:crediting:)``).
    @exclusivity(unchecked) package var indexing = true

    /// With tracking (local transactions, remote batches) a batch keeps what it changed, to roll
    /// back or to report; replay of the log needs neither and skips the bookkeeping.
    @exclusivity(unchecked) package private(set) var batchOpen = false
    @exclusivity(unchecked) private var tracking = false
    /// Objects the open tracking batch changed that existed before it, with their values then.
    @exclusivity(unchecked) package private(set) var batchOriginals: [ObjectID: ObjectRecord] = [:]
    /// Objects the open tracking batch created (no record before it).
    @exclusivity(unchecked) package private(set) var batchCreated: [ObjectID] = []
    /// Stamps the records the open tracking batch has accounted for (``ObjectRecord/batch``), so
    /// that touching one again costs no lookup in `batchOriginals`.
    @exclusivity(unchecked) private var batchGeneration: UInt32 = 0
    @exclusivity(unchecked) private var batchApplied: [UInt32: AppliedSet] = [:]
    /// The replica whose applied set the open batch saved last (a batch is mostly one replica's).
    @exclusivity(unchecked) private var batchAppliedLast: UInt32?
    private var batchReplicaCount = 0
    private var batchSchemaEvents = 0
    @exclusivity(unchecked) private var batchEventCount: UInt64 = 0

    package func beginBatch(tracking: Bool = true) {
        precondition(!batchOpen, "internal: nested projection batch")
        batchOpen = true
        self.tracking = tracking
        batchReplicaCount = replicas.count
        if tracking {
            batchGeneration &+= 1
            if batchGeneration == 0 {
                // Wrapped around (after 2^32 batches): forget every stamp.
                records.clearBatchStamps()
                batchGeneration = 1
            }
        }
    }

    /// The objects the open tracking batch changed (reads add them to index lookups).
    package var batchObjectIDs: [ObjectID] {
        guard tracking else { return [] }
        return Array(batchOriginals.keys) + batchCreated
    }

    /// Undoes everything applied since ``beginBatch(tracking:)`` (tracking batches only). The
    /// reverse indexes may keep entries the batch added: they are supersets that reads verify.
    package func rollbackBatch() {
        precondition(tracking, "internal: rollback of an untracked batch")
        for (id, original) in batchOriginals { records[id] = original }
        for id in batchCreated { records[id] = nil }
        for (replica, original) in batchApplied { applied[Int(replica)] = original }
        if batchSchemaEvents > 0 {
            schemaEvents.removeLast(batchSchemaEvents)
            recomputeSchema()
        }
        resetBatch()
        // The indexes were not changed by the batch; the records it touched are back as they were.
        indexDirty.removeAll(keepingCapacity: true)
        if indexesStale { rebuildIndexes() }
    }

    /// Makes the batch permanent and returns what it changed, as seen by readers (computed only
    /// when `report` is set).
    @discardableResult
    package func commitBatch(report: Bool) -> [ObjectChange] {
        eventCount += batchEventCount
        var changes: [ObjectChange] = []
        if report && tracking {
            var inverse: [(ObjectID, String)] = []
            for (id, original) in batchOriginals {
                if let described = describeChange(id: id, old: original, new: records[id]) {
                    changes.append(described.change)
                    inverse += described.inverse
                }
            }
            for id in batchCreated {
                if let described = describeChange(id: id, old: nil, new: records[id]) {
                    changes.append(described.change)
                    inverse += described.inverse
                }
            }
            changes = merge(changes, inverse: inverse)
        }
        resetBatch()
        if indexing { members.review(records) }
        if !indexes.isEmpty { refreshIndexes() }
        return changes
    }

    private func resetBatch() {
        batchOriginals.removeAll(keepingCapacity: true)
        batchCreated.removeAll(keepingCapacity: true)
        batchApplied.removeAll(keepingCapacity: true)
        batchAppliedLast = nil
        batchSchemaEvents = 0
        batchEventCount = 0
        batchOpen = false
        tracking = false
    }

    // MARK: Applied sequences

    package func isApplied(_ id: EventID) -> Bool {
        guard let replica = replicaIDs[id.replica] else { return false }
        return applied[Int(replica)].contains(id.sequence)
    }

    /// The highest sequence of `replica` below which every event has been applied.
    package func contiguousSequence(of replica: ReplicaID) -> UInt64 {
        replicaIDs[replica].map { applied[Int($0)].contiguous } ?? 0
    }

    /// The highest sequence of `replica` applied (0 when none).
    package func highestSequence(of replica: ReplicaID) -> UInt64 {
        replicaIDs[replica].map { applied[Int($0)].highest } ?? 0
    }

    /// Every replica and how far it has been applied (contiguously, and the highest seen).
    package func appliedSummary() -> [(replica: ReplicaID, contiguous: UInt64, highest: UInt64)] {
        replicas.enumerated().compactMap { index, replica in
            let set = applied[index]
            return set.isEmpty ? nil : (replica, set.contiguous, set.highest)
        }.sorted { $0.replica < $1.replica }
    }

    /// Marks an event applied; `false` when it already was (duplicates are skipped).
    private func markApplied(_ replica: UInt32, _ sequence: UInt64) -> Bool {
        if applied[Int(replica)].contains(sequence) { return false }
        if tracking && batchAppliedLast != replica {
            if batchApplied[replica] == nil { batchApplied[replica] = applied[Int(replica)] }
            batchAppliedLast = replica
        }
        applied[Int(replica)].insert(sequence)
        batchEventCount += 1
        return true
    }

    // MARK: Applying events

    /// Applies one event inside the open batch. Returns `false` when it was already applied.
    ///
    /// - Throws: ``StoreError`` when the store would exceed 2^24 replicas.
    @discardableResult
    package func apply(_ event: Event) throws -> Bool {
        precondition(batchOpen, "internal: apply outside a batch")
        guard event.id.sequence >= 1, event.id.sequence <= Ref.maxSequence else {
            throw StoreError(.corruptEvent, "sequence \(event.id.sequence) of replica \(event.id.replica) is out of range")
        }
        let replica = try internReplica(event.id.replica)
        guard markApplied(replica, event.id.sequence) else { return false }
        let ref = Ref(hlc: event.hlc.rawValue, sequence: event.id.sequence, replica: replica)
        maxHLC = max(maxHLC, event.hlc.rawValue)
        switch event.change {
        case .insert(let entity, let object, let fields), .update(let entity, let object, let fields):
            let named = fields.map { (key: intern($0.key), value: $0.value) }
            let inserting = if case .insert = event.change { true } else { false }
            applyFields(object, entity: intern(entity), ref: ref, inserting: inserting, count: named.count) { named[$0] }
        case .delete(let entity, let object):
            applyDelete(object, entity: intern(entity), ref: ref)
        case .add(let entity, let object, let relationship, let target):
            applyAdd(object, entity: intern(entity), key: intern(relationship), target: target, ref: ref)
        case .remove(let entity, let object, let relationship, let target, let adds):
            let named = try adds.map { AddKey(replica: try internReplica($0.replica), sequence: $0.sequence) }
            applyRemove(object, entity: intern(entity), key: intern(relationship), target: target, adds: named)
        case .schema(let schema):
            applySchema(schema, ref: ref)
        case .withheld:
            break  // only its sequence (marked applied above) and its HLC
        }
        return true
    }

    /// Applies a decoded transaction (replay): names are interned once per transaction and no
    /// per-event dictionary or string is built. Returns the number of events newly applied.
    @discardableResult
    package func apply(_ t: DecodedTransaction) throws -> Int {
        precondition(batchOpen, "internal: apply outside a batch")
        let replica = try internReplica(t.replica)
        let nameMap = t.names.map(intern)
        var replicaMap: [UInt32] = [replica]
        for other in t.replicas.dropFirst() { replicaMap.append(try internReplica(other)) }
        var count = 0
        // The closures below capture these arrays, not `t` (a capture of `t` copied all six of
        // its arrays, a retain and a release each, per event).
        let rawFields = t.fields
        for (index, e) in t.events.enumerated() {
            let sequence = t.firstSequence + UInt64(index)
            guard markApplied(replica, sequence) else { continue }
            count += 1
            let ref = Ref(hlc: e.hlc, sequence: sequence, replica: replica)
            if e.hlc > maxHLC { maxHLC = e.hlc }
            switch e.kind {
            case .insert, .update:
                // The fields go from the decoded arrays into the record: no array of them per event.
                let start = Int(e.start)
                applyFields(e.object, entity: nameMap[Int(e.entity)], ref: ref, inserting: e.kind == .insert, count: Int(e.count)) {
                    (nameMap[Int(rawFields[start + $0].name)], rawFields[start + $0].value)
                }
            case .delete:
                applyDelete(e.object, entity: nameMap[Int(e.entity)], ref: ref)
            case .add:
                applyAdd(e.object, entity: nameMap[Int(e.entity)], key: nameMap[Int(e.relationship)], target: e.target, ref: ref)
            case .remove:
                let named = t.adds[Int(e.start)..<Int(e.start + e.count)].map { AddKey(replica: replicaMap[Int($0.replica)], sequence: $0.sequence) }
                applyRemove(e.object, entity: nameMap[Int(e.entity)], key: nameMap[Int(e.relationship)], target: e.target, adds: named)
            case .schema:
                applySchema(t.schemas[Int(e.start)], ref: ref)
            case .withheld:
                break
            }
        }
        return count
    }

    /// Applies an insert made by this store's own transaction: its replica (index `replica`,
    /// interned once per transaction) and names are interned already, and the fields come as two
    /// parallel arrays, so nothing is looked up or built per event beyond the record itself.
    /// Returns `false` when the event was already applied.
    ///
    /// - Throws: ``StoreError`` when the sequence is out of range.
    package func applyLocalInsert(_ object: ObjectID, entity: UInt32, replica: UInt32, sequence: UInt64, hlc: UInt64,
                          keys: [UInt32], values: [Value], slot: RecordTable.Slot? = nil) throws -> Bool {
        precondition(batchOpen, "internal: apply outside a batch")
        guard sequence >= 1, sequence <= Ref.maxSequence else {
            throw StoreError(.corruptEvent, "sequence \(sequence) of replica \(replicas[Int(replica)]) is out of range")
        }
        guard markApplied(replica, sequence) else { return false }
        let ref = Ref(hlc: hlc, sequence: sequence, replica: replica)
        maxHLC = max(maxHLC, hlc)
        applyFields(object, entity: entity, ref: ref, inserting: true, count: keys.count, at: slot) { (keys[$0], values[$0]) }
        return true
    }

    // Each kind of event is one call of the merge rule (MergeRule.swift) on the object's record.

    /// An insert (`inserting`) or an update: its `count` fields, each given by `field(i)` (so that
    /// every caller passes them as it holds them — an event's dictionary, a decoded transaction's
    /// shared arrays, a local insert's layout — without building an array of them per event). A
    /// new record's fields are allocated once.
    private func applyFields(_ object: ObjectID, entity: UInt32, ref: Ref, inserting: Bool, count: Int,
                             at slot: RecordTable.Slot? = nil, field: (Int) -> (key: UInt32, value: Value)) {
        modify(object, entity: entity, at: slot) { record in
            if inserting { self.mergeInsert(&record, object: object, entity: entity, ref: ref) }
            if record.fields.isEmpty { record.fields.reserveCapacity(count) }
            for i in 0..<count {
                let (key, value) = field(i)
                self.mergeField(&record, object: object, key: key, value: value, ref: ref)
            }
        }
    }

    private func applyDelete(_ object: ObjectID, entity: UInt32, ref: Ref) {
        modify(object, entity: entity) { record in self.mergeDelete(&record, ref: ref) }
    }

    private func applyAdd(_ object: ObjectID, entity: UInt32, key: UInt32, target: ObjectID, ref: Ref) {
        modify(object, entity: entity) { record in
            self.mergeMember(&record, object: object, key: key, target: target, adds: [ref], removed: [])
        }
    }

    private func applyRemove(_ object: ObjectID, entity: UInt32, key: UInt32, target: ObjectID, adds: [AddKey]) {
        modify(object, entity: entity) { record in
            self.mergeRemovals(&record, key: key, target: target, removed: adds)
        }
    }

    private func applySchema(_ schema: Schema, ref: Ref) {
        insertSchemaEvent(schema, ref: ref)
    }

    package func insertSchemaEvent(_ schema: Schema, ref: Ref) {
        let position = schemaEvents.firstIndex { isNewer($0.ref, than: ref) } ?? schemaEvents.count
        schemaEvents.insert((ref, schema), at: position)
        if tracking { batchSchemaEvents += 1 }
        recomputeSchema()
    }

    // MARK: Merging whole states (see Projection+Merge.swift)

    package func unionApplied(_ replica: UInt32, _ set: AppliedSet) {
        if tracking && batchApplied[replica] == nil { batchApplied[replica] = applied[Int(replica)] }
        var merged = applied[Int(replica)]
        if set.contiguous > merged.contiguous {
            merged.above = merged.above.filter { $0 > set.contiguous }
            merged.contiguous = set.contiguous
        }
        for sequence in set.above { merged.insert(sequence) }
        while !merged.above.isEmpty, merged.above.remove(merged.contiguous + 1) != nil { merged.contiguous += 1 }
        applied[Int(replica)] = merged
    }

    /// Runs `body` on the record of `object` in place (for Projection+Merge.swift's whole-state
    /// merge). Not visible outside the module: `body` runs inside an access to `records`, which
    /// is not checked at run time (see the class's comment), so it must never reach `records`.
    func mergeRecord(_ object: ObjectID, entity: UInt32, _ body: (inout ObjectRecord) -> Void) {
        modify(object, entity: entity, body)
    }

    package func noteHLC(_ hlc: UInt64) { maxHLC = max(maxHLC, hlc) }

    /// Drops a record of a projection that keeps no indexes (one merged and written out object
    /// by object, which then holds no more than it started with).
    package func dropRecord(_ object: ObjectID) {
        precondition(!indexing, "internal: a record dropped from an indexed projection")
        records.removeValue(forKey: object)
    }

    /// Empties the projection.
    package func reset() {
        load(names: [], replicas: [], records: RecordTable(), applied: [], schemaEvents: [], maxHLC: 0, eventCount: 0,
             members: EntityMembers(), referrers: [:], memberships: [:])
    }

    /// Changes one record in place (an object first seen is created with the event's entity).
    /// Changes the record of `object`, made for `entity` if there is none. `known` is where a
    /// lookup of `object` just now found it (used if the table has not changed since).
    private func modify(_ object: ObjectID, entity: UInt32, at known: RecordTable.Slot? = nil, _ body: (inout ObjectRecord) -> Void) {
        let slot = known.flatMap { records.isCurrent($0, for: object) ? $0 : nil } ?? records.slot(of: object)
        if let position = slot.position {
            if tracking && records[position: position].batch != batchGeneration {
                // First touched in this batch: keep its original (the stamp marks it kept).
                batchOriginals[object] = records[position: position]
                records[position: position].batch = batchGeneration
            }
            let before = records[position: position].entity
            if !indexedEntities.isEmpty, indexedEntities.contains(before) { noteIndexed(object, existed: true) }
            body(&records[position: position])
            // An insert can make it an object of another entity (an ID reused after a delete):
            // it then enters that entity's index.
            let after = records[position: position].entity
            if after != before, !indexedEntities.isEmpty, indexedEntities.contains(after) { noteIndexed(object, existed: false) }
        } else {
            var record = ObjectRecord(entity: entity)
            if tracking {
                record.batch = batchGeneration
                batchCreated.append(object)
            }
            body(&record)
            records.insert(object, consume record, at: slot)
            if indexing { members.noteNew(object, entity: entity, recordCount: records.count) }
            if !indexedEntities.isEmpty, indexedEntities.contains(entity) { noteIndexed(object, existed: false) }
        }
    }

    private func recomputeSchema() {
        recordedSchema = schemaEvents.reduce(Schema.empty) { $0.merged(with: $1.schema) }
    }

    // MARK: Order and interning

    package func intern(_ name: String) -> UInt32 {
        if let id = nameIDs[name] { return id }
        let id = UInt32(names.count)
        names.append(name)
        nameIDs[name] = id
        if !indexes.isEmpty { indexesNoteInterned(name) }
        if !readPlans.isEmpty { readPlans = [:] }
        return id
    }

    package func nameID(_ name: String) -> UInt32? { nameIDs[name] }

    package func knows(_ replica: ReplicaID) -> Bool { replicaIDs[replica] != nil }

    /// The replica's index in this projection's table, without interning it.
    package func replicaIndex(_ replica: ReplicaID) -> UInt32? { replicaIDs[replica] }

    package func internReplica(_ replica: ReplicaID) throws -> UInt32 {
        if let id = replicaIDs[replica] { return id }
        guard replicas.count < Ref.maxReplicas else {
            throw StoreError(.invalidArgument, "a store can hold events of at most \(Ref.maxReplicas) replicas")
        }
        let id = UInt32(replicas.count)
        replicas.append(replica)
        replicaIDs[replica] = id
        applied.append(AppliedSet())
        return id
    }

    package func eventID(of ref: Ref) -> EventID { EventID(replica: replicas[Int(ref.replica)], sequence: ref.sequence) }

    /// The replica of the event at `ref` (`nil` for ``Ref/none``).
    package func replica(of ref: Ref) -> ReplicaID? { ref.isNone || Int(ref.replica) >= replicas.count ? nil : replicas[Int(ref.replica)] }

    // MARK: Loading (snapshots)

    /// Replaces the whole state (used when loading a snapshot). Indexes are built by the caller
    /// through ``indexLoaded(_:_:)`` while it decodes, so records are not walked twice.
    package func load(names: [String], replicas: [ReplicaID], records: RecordTable, applied: [AppliedSet],
              schemaEvents: [(ref: Ref, schema: Schema)], maxHLC: UInt64, eventCount: UInt64,
              members: EntityMembers, referrers: [ObjectID: Set<Referrer>], memberships: [ObjectID: Set<Referrer>]) {
        self.names = names
        nameIDs = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, UInt32($0)) })
        self.replicas = replicas
        replicaIDs = Dictionary(uniqueKeysWithValues: replicas.enumerated().map { ($1, UInt32($0)) })
        self.records = records
        self.applied = applied
        self.schemaEvents = schemaEvents
        self.maxHLC = maxHLC
        self.eventCount = eventCount
        self.members = members
        self.referrers = referrers
        self.memberships = memberships
        readPlans = [:]
        recomputeSchema()
        if !indexes.isEmpty { rebuildIndexes() }
    }

    // MARK: Frozen copies (read views)

    /// A copy of the committed state for reading outside the store's lock (`StoreView`). O(1):
    /// the tables are copy-on-write, so the copy shares them until the next commit changes the
    /// original, which then copies what it changes. Never called with a batch open (batches
    /// open and close under the store's lock).
    package func frozenCopy() -> Projection {
        precondition(!batchOpen, "internal: copy of a projection with an open batch")
        // A copy is read outside the store's lock: its indexes must need no more work.
        if !indexes.isEmpty { refreshIndexes() }
        let copy = Projection()
        copy.names = names
        copy.nameIDs = nameIDs
        copy.replicas = replicas
        copy.replicaIDs = replicaIDs
        copy.applied = applied
        copy.records = records
        copy.members = members
        copy.referrers = referrers
        copy.memberships = memberships
        copy.schemaEvents = schemaEvents
        copy.recordedSchema = recordedSchema
        copy.maxHLC = maxHLC
        copy.eventCount = eventCount
        copy.schema = schema
        copy.appSchema = appSchema
        copy.storageCache = storageCache
        copy.readPlans = readPlans
        // After the schemas: setting them marks indexes stale, and these are current.
        copy.indexes = indexes
        copy.indexedEntities = indexedEntities
        copy.indexesStale = false
        return copy
    }

    // MARK: Relationship storage

    package func storage(entity: String, relationship: String) -> (Relationship, RelationshipStorage)? {
        guard let r = schema.entity(entity)?.relationship(relationship) else { return nil }
        let cacheKey = entity + "." + relationship
        if let cached = storageCache[cacheKey] { return (r, cached) }
        let storage = schema.storage(of: r, in: entity)
        storageCache[cacheKey] = storage
        return (r, storage)
    }
}

/// The sequences of one replica that have been applied: all up to `contiguous`, plus any above it
/// (events may arrive out of order), so that a duplicate is always recognised.
package struct AppliedSet: Sendable, Hashable {
    package var contiguous: UInt64 = 0
    package var above: Set<UInt64> = []

    package var highest: UInt64 { above.max() ?? contiguous }
    package var isEmpty: Bool { contiguous == 0 && above.isEmpty }

    package func contains(_ sequence: UInt64) -> Bool { sequence <= contiguous || (!above.isEmpty && above.contains(sequence)) }

    package mutating func insert(_ sequence: UInt64) {
        if sequence <= contiguous { return }
        if sequence == contiguous + 1 {
            contiguous = sequence
            // The common case (in order) never touches the set.
            while !above.isEmpty, above.remove(contiguous + 1) != nil { contiguous += 1 }
        } else {
            above.insert(sequence)
        }
    }
}
