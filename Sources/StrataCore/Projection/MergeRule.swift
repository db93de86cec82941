/// The merge rule, in one place: every way state reaches a projection — a local commit, a replayed
/// or pulled transaction, a whole state merged from a snapshot — goes through these few calls on
/// an object's record, so that they cannot disagree.
///
/// - The order of events is ``isNewer(_:than:)``: by hybrid logical clock, then by replica ID,
///   then by sequence — the same on every replica.
/// - An object's insert: the newer one wins (it names the object's entity).
/// - An object's delete: the newer one is kept (an object is visible when it has an insert that
///   is newer than its delete, or none).
/// - A field: last writer wins, per field.
/// - A relationship's members: the adds and the removals are each a union; a member is present
///   while some add of it is not removed (add wins over a concurrent remove).
extension Projection {
    /// Whether `a` is newer than `b` in the merge order (``EventStamp``'s): by HLC, then by
    /// replica ID, then by sequence. Written on interned references so that no ID is looked up
    /// unless two HLCs tie.
    package func isNewer(_ a: Ref, than b: Ref) -> Bool {
        if a.hlc != b.hlc { return a.hlc > b.hlc }
        if a.replica != b.replica { return replicas[Int(a.replica)] > replicas[Int(b.replica)] }
        return a.sequence > b.sequence
    }

    /// An insert of `object` as `entity`: kept when newer than the record's.
    package func mergeInsert(_ record: inout ObjectRecord, object: ObjectID, entity: UInt32, ref: Ref) {
        guard record.inserted.isNone || isNewer(ref, than: record.inserted) else { return }
        if indexing, record.entity != entity { members.note(object, entity: entity) }
        record.inserted = ref
        record.entity = entity
    }

    /// A delete: kept when newer than the record's.
    package func mergeDelete(_ record: inout ObjectRecord, ref: Ref) {
        if record.deleted.isNone || isNewer(ref, than: record.deleted) { record.deleted = ref }
    }

    /// A field's value: kept when newer than the field's (last writer wins).
    package func mergeField(_ record: inout ObjectRecord, object: ObjectID, key: UInt32, value: Value, ref: Ref) {
        let (found, index) = record.fieldIndex(key)
        if found {
            guard isNewer(ref, than: record.fields[index].ref) else { return }
            record.fields[index] = FieldSlot(key: key, value: value, ref: ref)
        } else if index == record.fields.count {
            record.fields.append(FieldSlot(key: key, value: value, ref: ref))
        } else {
            record.fields.insert(FieldSlot(key: key, value: value, ref: ref), at: index)
        }
        if indexing, case .reference(let target) = value { referrers[target, default: []].insert(Referrer(source: object, key: key)) }
    }

    /// Adds and removals of `target` in the relationship `key`: unions of each.
    package func mergeMember(_ record: inout ObjectRecord, object: ObjectID, key: UInt32, target: ObjectID, adds: [Ref], removed: [AddKey]) {
        // Many adds against many held: a set, not a scan per add (a merged state can carry a
        // member with millions of them; their product would stall the merge).
        var held: Set<Ref>?
        for add in adds {
            let (found, index) = record.setIndex(key, target)
            if found {
                if adds.count > 8, record.sets[index].adds.count > 8 {
                    if held == nil { held = Set(record.sets[index].adds) }
                    if held?.insert(add).inserted == true { record.sets[index].adds.append(add) }
                } else if !record.sets[index].adds.contains(add) {
                    record.sets[index].adds.append(add)
                }
            } else {
                record.sets.insert(SetMember(key: key, target: target, adds: [add], removedAdds: []), at: index)
                if indexing { memberships[target, default: []].insert(Referrer(source: object, key: key)) }
            }
        }
        if !removed.isEmpty { mergeRemovals(&record, key: key, target: target, removed: removed) }
    }

    /// Removals of `target` in the relationship `key` (the adds they name): a union. The member
    /// is recorded even when it names none (a remove event does, as it always has).
    package func mergeRemovals(_ record: inout ObjectRecord, key: UInt32, target: ObjectID, removed: [AddKey]) {
        let (found, index) = record.setIndex(key, target)
        if !found { record.sets.insert(SetMember(key: key, target: target, adds: [], removedAdds: []), at: index) }
        if removed.count > 8 {
            var held = Set(record.sets[index].removedAdds)
            for add in removed where held.insert(add).inserted { record.sets[index].removedAdds.append(add) }
        } else {
            for add in removed where !record.sets[index].removedAdds.contains(add) { record.sets[index].removedAdds.append(add) }
        }
    }
}
