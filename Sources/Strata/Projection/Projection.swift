import Foundation

/// The object graph as the merge rule makes it from a set of events, whatever their order.
///
/// Events are applied in *batches* (one transaction, or one batch of remote transactions): the
/// records they touch are changed in place and their original values kept, so a batch can be
/// rolled back (a failed local transaction) or committed (indexes updated, events marked
/// applied, changes reported). Reads in the middle of a batch see its effects.
///
/// Not thread-safe: the store serialises access to it.
final class Projection {
    // Interning keeps records small: names and replicas are 4-byte indexes.
    private(set) var names: [String] = []
    private var nameIDs: [String: UInt32] = [:]
    private(set) var replicas: [ReplicaID] = []
    private var replicaIDs: [ReplicaID: UInt32] = [:]

    private(set) var records: [ObjectID: ObjectRecord] = [:]
    /// Every object ever seen per entity (a superset: reads check existence).
    private(set) var byEntity: [UInt32: Set<ObjectID>] = [:]
    /// Target → objects whose reference fields point at it (a superset: reads check the value).
    private(set) var referrers: [ObjectID: Set<Referrer>] = [:]
    /// Target → objects whose to-many sets hold it (a superset: reads check membership).
    private(set) var memberships: [ObjectID: Set<Referrer>] = [:]
    /// Which events each replica has had applied.
    private(set) var applied: [UInt32: AppliedSet] = [:]
    /// Schema events in event order, and the schema they add up to.
    private(set) var schemaEvents: [(ref: Ref, schema: Schema)] = []
    private(set) var recordedSchema = Schema.empty
    /// The newest HLC seen in any event (the store's clock must stay ahead of it).
    private(set) var maxHLC: UInt64 = 0
    /// Events applied, in all.
    private(set) var eventCount: UInt64 = 0

    /// The schema reads interpret records with: the recorded one merged with the app's.
    var schema = Schema.empty {
        didSet { storageCache = [:] }
    }
    private var storageCache: [String: RelationshipStorage] = [:]

    struct Referrer: Hashable {
        var source: ObjectID
        var key: UInt32
    }

    // MARK: Batches

    /// Objects touched by the open batch, with their values before it (readable by the read side,
    /// which must see objects the batch created before the indexes know them).
    private(set) var batchOriginals: [ObjectID: ObjectRecord?] = [:]
    private var batchEvents: Set<EventID> = []
    private var batchSchemaEvents = 0
    private(set) var batchOpen = false

    func beginBatch() {
        precondition(!batchOpen, "internal: nested projection batch")
        batchOpen = true
    }

    /// Undoes everything applied since ``beginBatch()``.
    func rollbackBatch() {
        for (id, original) in batchOriginals { records[id] = original }
        if batchSchemaEvents > 0 {
            schemaEvents.removeLast(batchSchemaEvents)
            recomputeSchema()
        }
        resetBatch()
    }

    /// Makes the batch permanent and returns what it changed, as seen by readers (computed only
    /// when `report` is set: replay of a whole log does not need it).
    @discardableResult
    func commitBatch(report: Bool) -> [ObjectChange] {
        var changes: [ObjectChange] = []
        for id in batchEvents {
            markApplied(id)
        }
        eventCount += UInt64(batchEvents.count)
        var inverse: [(ObjectID, String)] = []
        for (id, original) in batchOriginals {
            let current = records[id]
            updateIndexes(id: id, old: original ?? nil, new: current)
            if report, let described = describeChange(id: id, old: original ?? nil, new: current) {
                changes.append(described.change)
                inverse += described.inverse
            }
        }
        if report { changes = merge(changes, inverse: inverse) }
        resetBatch()
        return changes
    }

    private func resetBatch() {
        batchOriginals.removeAll(keepingCapacity: true)
        batchEvents.removeAll(keepingCapacity: true)
        batchSchemaEvents = 0
        batchOpen = false
    }

    // MARK: Applying events

    func isApplied(_ id: EventID) -> Bool {
        guard let replica = replicaIDs[id.replica] else { return false }
        return applied[replica]?.contains(id.sequence) ?? false
    }

    /// The highest sequence of `replica` below which every event has been applied.
    func contiguousSequence(of replica: ReplicaID) -> UInt64 {
        replicaIDs[replica].flatMap { applied[$0]?.contiguous } ?? 0
    }

    /// Every replica and how far it has been applied (contiguously, and the highest seen).
    func appliedSummary() -> [(replica: ReplicaID, contiguous: UInt64, highest: UInt64)] {
        applied.map { (replicas[Int($0.key)], $0.value.contiguous, $0.value.highest) }.sorted { $0.replica < $1.replica }
    }

    /// Applies one event inside the open batch. Returns `false` when it was already applied
    /// (duplicates are harmless).
    @discardableResult
    func apply(_ event: Event) -> Bool {
        precondition(batchOpen, "internal: apply outside a batch")
        if isApplied(event.id) || batchEvents.contains(event.id) { return false }
        let ref = Ref(hlc: event.hlc.rawValue, sequence: event.id.sequence, replica: intern(event.id.replica))
        maxHLC = max(maxHLC, event.hlc.rawValue)
        batchEvents.insert(event.id)
        switch event.change {
        case .insert(let entity, let object, let fields):
            modify(object, entity: entity) { record in
                if record.inserted.map({ self.isNewer(ref, than: $0) }) ?? true {
                    record.inserted = ref
                    record.entity = self.intern(entity)
                }
                for (key, value) in fields { self.setField(&record, key: self.intern(key), value: value, ref: ref) }
            }
        case .update(let entity, let object, let fields):
            modify(object, entity: entity) { record in
                for (key, value) in fields { self.setField(&record, key: self.intern(key), value: value, ref: ref) }
            }
        case .delete(let entity, let object):
            modify(object, entity: entity) { record in
                if record.deleted.map({ self.isNewer(ref, than: $0) }) ?? true { record.deleted = ref }
            }
        case .add(let entity, let object, let relationship, let target):
            modify(object, entity: entity) { record in
                let key = self.intern(relationship)
                let (found, index) = record.setIndex(key, target)
                if found {
                    if !record.sets[index].adds.contains(ref) { record.sets[index].adds.append(ref) }
                } else {
                    record.sets.insert(SetMember(key: key, target: target, adds: [ref], removedAdds: []), at: index)
                }
            }
        case .remove(let entity, let object, let relationship, let target, let adds):
            modify(object, entity: entity) { record in
                let key = self.intern(relationship)
                let named = adds.map { AddKey(replica: self.intern($0.replica), sequence: $0.sequence) }
                let (found, index) = record.setIndex(key, target)
                if !found { record.sets.insert(SetMember(key: key, target: target, adds: [], removedAdds: []), at: index) }
                for add in named where !record.sets[index].removedAdds.contains(add) { record.sets[index].removedAdds.append(add) }
            }
        case .schema(let schema):
            let position = schemaEvents.firstIndex { isNewer($0.ref, than: ref) } ?? schemaEvents.count
            schemaEvents.insert((ref, schema), at: position)
            batchSchemaEvents += 1
            recomputeSchema()
        }
        return true
    }

    private func modify(_ object: ObjectID, entity: String, _ body: (inout ObjectRecord) -> Void) {
        if batchOriginals[object] == nil { batchOriginals[object] = .some(records[object]) }
        let entityID = intern(entity)
        body(&records[object, default: ObjectRecord(entity: entityID)])
    }

    private func setField(_ record: inout ObjectRecord, key: UInt32, value: Value, ref: Ref) {
        let (found, index) = record.fieldIndex(key)
        if found {
            if isNewer(ref, than: record.fields[index].ref) { record.fields[index] = FieldSlot(key: key, value: value, ref: ref) }
        } else {
            record.fields.insert(FieldSlot(key: key, value: value, ref: ref), at: index)
        }
    }

    private func recomputeSchema() {
        recordedSchema = schemaEvents.reduce(Schema.empty) { $0.merged(with: $1.schema) }
    }

    private func markApplied(_ id: EventID) {
        applied[intern(id.replica), default: AppliedSet()].insert(id.sequence)
    }

    // MARK: Order and interning

    /// Whether `a` is newer than `b` in the merge order: by HLC, then by replica ID.
    func isNewer(_ a: Ref, than b: Ref) -> Bool {
        if a.hlc != b.hlc { return a.hlc > b.hlc }
        if a.replica != b.replica { return replicas[Int(a.replica)] > replicas[Int(b.replica)] }
        return a.sequence > b.sequence
    }

    func intern(_ name: String) -> UInt32 {
        if let id = nameIDs[name] { return id }
        let id = UInt32(names.count)
        names.append(name)
        nameIDs[name] = id
        return id
    }

    func nameID(_ name: String) -> UInt32? { nameIDs[name] }

    func intern(_ replica: ReplicaID) -> UInt32 {
        if let id = replicaIDs[replica] { return id }
        let id = UInt32(replicas.count)
        replicas.append(replica)
        replicaIDs[replica] = id
        return id
    }

    func eventID(of ref: Ref) -> EventID { EventID(replica: replicas[Int(ref.replica)], sequence: ref.sequence) }

    // MARK: Indexes

    private func updateIndexes(id: ObjectID, old: ObjectRecord?, new: ObjectRecord?) {
        if let new, old?.entity != new.entity {
            if let old { byEntity[old.entity]?.remove(id) }
            byEntity[new.entity, default: []].insert(id)
        }
        let oldRefs = Set(old?.referenceTargets.map { Pair(key: $0.key, target: $0.target) } ?? [])
        let newRefs = Set(new?.referenceTargets.map { Pair(key: $0.key, target: $0.target) } ?? [])
        for pair in oldRefs.subtracting(newRefs) { referrers[pair.target]?.remove(Referrer(source: id, key: pair.key)) }
        for pair in newRefs.subtracting(oldRefs) { referrers[pair.target, default: []].insert(Referrer(source: id, key: pair.key)) }
        if !(new?.sets.isEmpty ?? true) {
            let before = Set(old?.sets.map { Pair(key: $0.key, target: $0.target) } ?? [])
            let after = Set(new?.sets.map { Pair(key: $0.key, target: $0.target) } ?? [])
            for pair in after.subtracting(before) { memberships[pair.target, default: []].insert(Referrer(source: id, key: pair.key)) }
        }
    }

    private struct Pair: Hashable {
        var key: UInt32
        var target: ObjectID
    }

    // MARK: Loading (snapshots)

    /// Replaces the whole state (used when loading a snapshot).
    func load(names: [String], replicas: [ReplicaID], records: [ObjectID: ObjectRecord], applied: [UInt32: AppliedSet],
              schemaEvents: [(ref: Ref, schema: Schema)], maxHLC: UInt64, eventCount: UInt64) {
        self.names = names
        nameIDs = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, UInt32($0)) })
        self.replicas = replicas
        replicaIDs = Dictionary(uniqueKeysWithValues: replicas.enumerated().map { ($1, UInt32($0)) })
        self.records = records
        self.applied = applied
        self.schemaEvents = schemaEvents
        self.maxHLC = maxHLC
        self.eventCount = eventCount
        recomputeSchema()
        byEntity = [:]
        referrers = [:]
        memberships = [:]
        for (id, record) in records { updateIndexes(id: id, old: nil, new: record) }
    }

    // MARK: Relationship storage

    func storage(entity: String, relationship: String) -> (Relationship, RelationshipStorage)? {
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
struct AppliedSet: Sendable, Hashable {
    var contiguous: UInt64 = 0
    var above: Set<UInt64> = []

    var highest: UInt64 { above.max() ?? contiguous }

    func contains(_ sequence: UInt64) -> Bool { sequence <= contiguous || above.contains(sequence) }

    mutating func insert(_ sequence: UInt64) {
        if sequence <= contiguous { return }
        if sequence == contiguous + 1 {
            contiguous = sequence
            while above.remove(contiguous + 1) != nil { contiguous += 1 }
        } else {
            above.insert(sequence)
        }
    }
}
