import Foundation

/// An object as readers see it: its attributes and to-one references after the merge rule, with
/// references to objects that do not exist reading as absent, and attributes the object lacks
/// (it was written by an app version whose schema did not have them) reading as their
/// ``Attribute/defaultValue`` (or null).
public struct ObjectSnapshot: Sendable, Hashable {
    public var id: ObjectID
    public var entity: String
    /// Attributes and to-one references (unknown attributes from newer app versions included).
    public var values: [String: Value]
    /// To-many relationships, when they were asked for (targets sorted by ID).
    public var toMany: [String: [ObjectID]]

    public subscript(key: String) -> Value { values[key] ?? .null }
}

/// How the objects of one entity read: the fields the schema declares (interned key, name, what
/// it reads as when absent) in declaration order, the derived to-ones and the to-manys.
struct EntityReadPlan {
    var entity: String
    var fields: [(key: UInt32?, name: String, absent: Value)] = []
    /// Keys of `fields` and of the derived to-ones: stored slots under other names are read as
    /// they are.
    var plannedKeys: Set<UInt32> = []
    var derivedToOne: [String] = []
    var toMany: [String] = []
}

/// What ``Projection/insertProbe(_:)`` found.
package enum InsertProbe: Equatable {
    case absent
    case exists
    case deleted(newestHLC: UInt64)
}

/// Which event set a value: the provenance kept per field, for the tools' "blame".
public struct FieldProvenance: Sendable, Hashable {
    public var event: EventID
    public var hlc: HLC
}

extension Projection {
    package func exists(_ record: ObjectRecord) -> Bool {
        if record.inserted.isNone { return false }
        if record.deleted.isNone { return true }
        return isNewer(record.inserted, than: record.deleted)
    }

    package func exists(_ id: ObjectID) -> Bool {
        guard let position = records.position(of: id) else { return false }
        return exists(records[position: position])
    }

    /// What an insert of `id` finds, in one lookup: no record, an existing object, or the record
    /// of a deleted one (with the newest timestamp it holds, which the insert is stamped after).
    /// The slot is where the lookup found the ID, for the insert's apply
    /// (``applyLocalInsert(_:entity:replica:sequence:hlc:keys:values:slot:)``).
    package func insertProbe(_ id: ObjectID) -> (InsertProbe, RecordTable.Slot) {
        let slot = records.slot(of: id)
        guard let position = slot.position else { return (.absent, slot) }
        if exists(records[position: position]) { return (.exists, slot) }
        return (.deleted(newestHLC: records[position: position].newestHLC), slot)
    }

    /// The record of an existing object.
    package func existing(_ id: ObjectID) -> ObjectRecord? {
        guard let record = records[id], exists(record) else { return nil }
        return record
    }

    /// Whether a slot written at `ref` belongs to the object's current incarnation: an insert sets
    /// every attribute, so anything older than the newest insert is gone.
    package func isCurrent(_ ref: Ref, in record: ObjectRecord) -> Bool {
        if record.inserted.isNone { return true }
        return !isNewer(record.inserted, than: ref)
    }

    package func entityName(of record: ObjectRecord) -> String { names[Int(record.entity)] }

    /// The visible value of one field, or `nil` when absent.
    package func visibleValue(_ record: ObjectRecord, key: UInt32) -> (value: Value, ref: Ref)? {
        let (found, index) = record.fieldIndex(key)
        guard found else { return nil }
        let slot = record.fields[index]
        guard isCurrent(slot.ref, in: record) else { return nil }
        if case .reference(let target) = slot.value, !exists(target), elsewhere?(target) == nil { return (.null, slot.ref) }
        return (slot.value, slot.ref)
    }

    /// The visible members of one stored to-many set, sorted.
    package func visibleMembers(_ record: ObjectRecord, key: UInt32) -> [ObjectID] {
        var result: [ObjectID] = []
        let (_, start) = record.setIndex(key, ObjectID(rawValue: 0))
        var index = start
        while index < record.sets.count, record.sets[index].key == key {
            let member = record.sets[index]
            if isPresent(member, in: record), exists(member.target) || elsewhere?(member.target) != nil { result.append(member.target) }
            index += 1
        }
        return result
    }

    /// An element of an observed-remove set is present while some add of it, in the object's
    /// current incarnation, is named by no remove.
    package func isPresent(_ member: SetMember, in record: ObjectRecord) -> Bool {
        member.adds.contains { add in
            isCurrent(add, in: record) && !member.removedAdds.contains(AddKey(replica: add.replica, sequence: add.sequence))
        }
    }

    /// The adds of `target` in `record`'s set `key` that are not yet removed (what a local remove
    /// must name).
    package func liveAdds(_ record: ObjectRecord, key: UInt32, target: ObjectID) -> [EventID] {
        let (found, index) = record.setIndex(key, target)
        guard found else { return [] }
        let member = record.sets[index]
        return member.adds.filter { !member.removedAdds.contains(AddKey(replica: $0.replica, sequence: $0.sequence)) }.map(eventID(of:))
    }

    /// The objects related to `id` through `relationship` (stored or derived), sorted.
    package func related(_ id: ObjectID, relationship: String) -> [ObjectID] {
        guard let record = existing(id) else { return [] }
        let entity = entityName(of: record)
        guard let (r, storage) = storage(entity: entity, relationship: relationship) else {
            // Unknown to the schema: read what is stored under that name.
            guard let key = nameID(relationship) else { return [] }
            if let value = visibleValue(record, key: key), case .reference(let target) = value.value { return [target] }
            return visibleMembers(record, key: key)
        }
        switch storage {
        case .field:
            guard let key = nameID(relationship), let value = visibleValue(record, key: key), case .reference(let target) = value.value,
                  existing(target).map({ entityName(of: $0) == r.destination }) ?? (elsewhere?(target) == r.destination)
            else { return [] }
            return [target]
        case .set:
            guard let key = nameID(relationship) else { return [] }
            return visibleMembers(record, key: key)
        case .derived(let sourceEntity, let sourceRelationship, let storedIsToMany):
            var sources = derivedSources(of: id, sourceEntity: sourceEntity, sourceRelationship: sourceRelationship, storedIsToMany: storedIsToMany)
            // In a database: the objects of other zones that point here.
            let foreign = sourcesElsewhere?(id, sourceEntity, sourceRelationship, storedIsToMany) ?? []
            if !r.isToMany {
                // One-to-one read from the other side: the newest claim wins.
                if foreign.isEmpty {
                    guard let newest = sources.max(by: { isNewer($1.1, than: $0.1) }) else { return [] }
                    return [newest.0]
                }
                let all = sources.map { ($0.0, stamp(of: $0.1)) } + foreign
                return all.max { $0.1 < $1.1 }.map { [$0.0] } ?? []
            }
            sources += foreign.map { ($0.0, Ref.none) }
            return Array(Set(sources.map(\.0))).sorted()
        }
    }

    /// The objects of this projection whose `sourceRelationship` (of `sourceEntity`) holds `id`,
    /// with the event that set it (none for to-many members): the other side of a relationship
    /// stored on them.
    package func derivedSources(of id: ObjectID, sourceEntity: String, sourceRelationship: String, storedIsToMany: Bool) -> [(ObjectID, Ref)] {
        guard let key = nameID(sourceRelationship), let sourceEntityID = nameID(sourceEntity) else { return [] }
        var sources: [(ObjectID, Ref)] = []
        var candidates = (storedIsToMany ? memberships[id] : referrers[id]) ?? []
        if batchOpen {
            // Objects the open batch changed are not indexed yet.
            for source in batchObjectIDs { candidates.insert(Referrer(source: source, key: key)) }
        }
        for referrer in candidates where referrer.key == key {
            guard let source = existing(referrer.source), source.entity == sourceEntityID else { continue }
            if storedIsToMany {
                if visibleMembers(source, key: key).contains(id) { sources.append((referrer.source, Ref(hlc: 0, sequence: 0, replica: 0))) }
            } else if let value = visibleValue(source, key: key), value.value == .reference(id) {
                sources.append((referrer.source, value.ref))
            }
        }
        return sources
    }

    /// ``derivedSources(of:sourceEntity:sourceRelationship:storedIsToMany:)`` with stamps that
    /// compare across projections.
    package func stampedDerivedSources(of id: ObjectID, sourceEntity: String, sourceRelationship: String, storedIsToMany: Bool) -> [(ObjectID, EventStamp)] {
        derivedSources(of: id, sourceEntity: sourceEntity, sourceRelationship: sourceRelationship, storedIsToMany: storedIsToMany)
            .map { ($0.0, stamp(of: $0.1)) }
    }

    /// A reference's event as a stamp that compares across projections (merge order).
    package func stamp(of ref: Ref) -> EventStamp {
        EventStamp(hlc: HLC(rawValue: ref.hlc), replica: ref.isNone ? ReplicaID(rawValue: 0) : replicas[Int(ref.replica)], sequence: ref.sequence)
    }

    /// The visible object, or `nil` when it does not exist.
    ///
    /// Every attribute and to-one relationship the schema declares is present: one the object
    /// lacks (written by an app version that did not know it, or an insert older than the
    /// attribute) reads as its default, a to-one as null; fields the schema does not know are
    /// present as stored. What to read is planned once per entity (``EntityReadPlan``), so a
    /// read does no schema lookups.
    package func snapshot(_ id: ObjectID, includeToMany: Bool = false) -> ObjectSnapshot? {
        guard let record = existing(id) else { return nil }
        return snapshot(of: record, id: id, includeToMany: includeToMany)
    }

    /// The snapshot of an existing object whose record the caller already holds (a walk over
    /// every record: ``RecordTable/forEachInIDOrder(where:_:)``), without looking it up again.
    package func snapshot(of record: ObjectRecord, id: ObjectID, includeToMany: Bool) -> ObjectSnapshot {
        let plan = readPlan(record.entity)
        var values: [String: Value] = [:]
        values.reserveCapacity(plan.fields.count + record.fields.count)
        for field in plan.fields {
            if let key = field.key, let visible = visibleValue(record, key: key) {
                values[field.name] = visible.value
            } else {
                values[field.name] = field.absent
            }
        }
        for slot in record.fields where !plan.plannedKeys.contains(slot.key) {
            if let visible = visibleValue(record, key: slot.key) { values[names[Int(slot.key)]] = visible.value }
        }
        for name in plan.derivedToOne {
            values[name] = related(id, relationship: name).first.map(Value.reference) ?? .null
        }
        var toMany: [String: [ObjectID]] = [:]
        if includeToMany {
            for name in plan.toMany { toMany[name] = related(id, relationship: name) }
            // Stored sets under names the schema does not know.
            for member in record.sets where toMany[names[Int(member.key)]] == nil {
                toMany[names[Int(member.key)]] = visibleMembers(record, key: member.key)
            }
        }
        return ObjectSnapshot(id: id, entity: plan.entity, values: values, toMany: toMany)
    }

    /// The read plan of an entity (by name ID), built on first use.
    func readPlan(_ entity: UInt32) -> EntityReadPlan {
        if let plan = readPlans[entity] { return plan }
        let name = names[Int(entity)]
        var plan = EntityReadPlan(entity: name)
        if let declared = schema.entity(name) {
            for attribute in declared.attributes {
                plan.fields.append((nameID(attribute.name), attribute.name, attribute.defaultValue ?? .null))
            }
            for relationship in declared.relationships {
                if relationship.isToMany {
                    plan.toMany.append(relationship.name)
                } else if case .derived? = storage(entity: name, relationship: relationship.name)?.1 {
                    plan.derivedToOne.append(relationship.name)
                } else {
                    plan.fields.append((nameID(relationship.name), relationship.name, .null))
                }
            }
            // A derived to-one stored under its own name (an older schema) reads as derived.
            for key in plan.fields.compactMap(\.key) + plan.derivedToOne.compactMap(nameID) { plan.plannedKeys.insert(key) }
        }
        readPlans[entity] = plan
        return plan
    }

    // MARK: Reads under the app's names

    /// The visible object as the app's version reads it (see ``SchemaView``).
    package func appSnapshot(_ id: ObjectID, includeToMany: Bool = false) -> ObjectSnapshot? {
        guard let stored = snapshot(id, includeToMany: includeToMany) else { return nil }
        guard let view, let record = records[id] else { return stored }
        return view.snapshot(stored, record: record, in: self)
    }

    /// The stored name of the entity the app calls `name`.
    package func storedEntity(_ name: String) -> String { view?.storedEntity(name) ?? name }

    /// Whether `id` is an object (existing or not) of the entity the app calls `entity`: an index
    /// entry may be left from what the object was before the open batch changed it.
    package func isRecord(_ id: ObjectID, of entity: String) -> Bool {
        guard let record = records[id], let entityID = nameID(storedEntity(entity)) else { return false }
        return record.entity == entityID
    }

    /// The existing objects of the entity the app calls `entity` (unsorted).
    package func appObjectIDs(of entity: String) -> [ObjectID] { objectIDs(of: storedEntity(entity)) }

    /// The objects related to `id` through the relationship the app calls `relationship`.
    package func appRelated(_ id: ObjectID, relationship: String) -> [ObjectID] {
        guard let view, let record = records[id] else { return related(id, relationship: relationship) }
        return related(id, relationship: view.storedKey(relationship, in: entityName(of: record)))
    }

    /// Which event set each visible field.
    package func provenance(_ id: ObjectID) -> [String: FieldProvenance] {
        guard let record = records[id] else { return [:] }
        var result: [String: FieldProvenance] = [:]
        for slot in record.fields where isCurrent(slot.ref, in: record) {
            result[names[Int(slot.key)]] = FieldProvenance(event: eventID(of: slot.ref), hlc: HLC(rawValue: slot.ref.hlc))
        }
        return result
    }

    /// ``provenance(_:)`` under the app's names: an attribute with several representations is
    /// blamed on the event that wrote the newest of them (the one its read shows).
    package func appProvenance(_ id: ObjectID) -> [String: FieldProvenance] {
        guard let view, let record = records[id] else { return provenance(id) }
        let entity = entityName(of: record)
        var result: [String: (FieldProvenance, Ref)] = [:]
        for slot in record.fields where isCurrent(slot.ref, in: record) {
            guard let name = view.appKeys([names[Int(slot.key)]], in: entity).first else { continue }
            if let held = result[name], !isNewer(slot.ref, than: held.1) { continue }
            result[name] = (FieldProvenance(event: eventID(of: slot.ref), hlc: HLC(rawValue: slot.ref.hlc)), slot.ref)
        }
        return result.mapValues(\.0)
    }

    /// The IDs of the existing objects of `entity` (unsorted).
    package func objectIDs(of entity: String) -> [ObjectID] {
        guard let entityID = nameID(entity) else { return [] }
        // Local copies: the loops then read plain values, without an exclusivity check per access.
        let records = self.records
        let replicas = self.replicas
        func existing(_ record: ObjectRecord) -> Bool {
            guard record.entity == entityID, !record.inserted.isNone else { return false }
            if record.deleted.isNone { return true }
            let (a, b) = (record.inserted, record.deleted)
            return a.hlc != b.hlc ? a.hlc > b.hlc : (a.replica != b.replica ? replicas[Int(a.replica)] > replicas[Int(b.replica)] : a.sequence > b.sequence)
        }
        // An entity with a good share of the records: one pass over the packed records (exact,
        // also for an open batch's new objects, which are in the table) beats a hash lookup per
        // ID of the entity's set, which reads the records in no order.
        guard case .ids(let seen) = members.lookup(entityID), seen.count * 4 < records.count else {
            return records.keys(where: existing)
        }
        var ids = seen
        if batchOpen { ids.formUnion(batchObjectIDs) }
        return ids.filter { id in records[id].map(existing) ?? false }
    }

    /// Every existing object's ID, sorted.
    package func allObjectIDs() -> [ObjectID] {
        records.keys(where: exists).sorted()
    }
}
