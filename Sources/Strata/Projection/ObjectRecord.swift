/// A compact reference to the event that set something: its HLC, sequence number and the index
/// of its replica in the projection's replica table (24 bytes instead of 40).
struct Ref: Hashable, Sendable {
    var hlc: UInt64
    var sequence: UInt64
    var replica: UInt32
}

/// The last-writer-wins register of one attribute or to-one reference.
struct FieldSlot: Sendable {
    var key: UInt32
    var value: Value
    var ref: Ref
}

/// One target of a to-many relationship (an observed-remove set element): the adds seen for it
/// and the adds that removes have named.
struct SetMember: Sendable {
    var key: UInt32
    var target: ObjectID
    var adds: [Ref]
    var removedAdds: [AddKey]
}

/// An add event, by replica index and sequence.
struct AddKey: Hashable, Sendable {
    var replica: UInt32
    var sequence: UInt64
}

/// Everything the projection knows of one object, visible or not: the newest insert and delete,
/// a register per field, the to-many sets. Fields are kept sorted by key, sets by (key, target).
struct ObjectRecord: Sendable {
    var entity: UInt32
    var inserted: Ref?
    var deleted: Ref?
    var fields: [FieldSlot] = []
    var sets: [SetMember] = []

    init(entity: UInt32) { self.entity = entity }

    func fieldIndex(_ key: UInt32) -> (found: Bool, index: Int) {
        var lo = 0
        var hi = fields.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if fields[mid].key < key { lo = mid + 1 } else { hi = mid }
        }
        return (lo < fields.count && fields[lo].key == key, lo)
    }

    func setIndex(_ key: UInt32, _ target: ObjectID) -> (found: Bool, index: Int) {
        var lo = 0
        var hi = sets.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let m = sets[mid]
            if m.key < key || (m.key == key && m.target < target) { lo = mid + 1 } else { hi = mid }
        }
        return (lo < sets.count && sets[lo].key == key && sets[lo].target == target, lo)
    }

    /// The targets every reference field holds (visible or not), for the reverse index.
    var referenceTargets: [(key: UInt32, target: ObjectID)] {
        fields.compactMap { slot in
            if case .reference(let target) = slot.value { (slot.key, target) } else { nil }
        }
    }
}
