/// A compact reference to the event that set something: its HLC, and its sequence number and the
/// index of its replica in the projection's replica table packed into one word (16 bytes instead
/// of 40). Sequence 0 never occurs in an event, so `Ref.none` (all zero) means "no event".
package struct Ref: Hashable, Sendable {
    package var hlc: UInt64
    private var packed: UInt64

    /// Sequence numbers below 2^40 and up to 2^24 replicas per store fit.
    package static let maxSequence: UInt64 = (1 << 40) - 1
    package static let maxReplicas = 1 << 24

    package init(hlc: UInt64, sequence: UInt64, replica: UInt32) {
        self.hlc = hlc
        packed = sequence << 24 | UInt64(replica)
    }

    package static let none = Ref(hlc: 0, sequence: 0, replica: 0)

    package var sequence: UInt64 { packed >> 24 }
    package var replica: UInt32 { UInt32(truncatingIfNeeded: packed & 0xFF_FFFF) }
    package var isNone: Bool { packed == 0 }
}

/// The last-writer-wins register of one attribute or to-one reference (40 bytes: the value, then
/// the key in the value's padding, then the setting event).
package struct FieldSlot: Sendable, Equatable {
    package var value: Value
    package var key: UInt32
    package var ref: Ref

    package init(key: UInt32, value: Value, ref: Ref) {
        self.value = value
        self.key = key
        self.ref = ref
    }
}

/// One target of a to-many relationship (an observed-remove set element): the adds seen for it
/// and the adds that removes have named.
package struct SetMember: Sendable, Equatable {
    package var key: UInt32
    package var target: ObjectID
    package var adds: [Ref]
    package var removedAdds: [AddKey]
}

/// An add event, by replica index and sequence.
package struct AddKey: Hashable, Sendable {
    package var replica: UInt32
    package var sequence: UInt64
}

/// Everything the projection knows of one object, visible or not: the newest insert and delete,
/// a register per field, the to-many sets. Fields are kept sorted by key, sets by (key, target).
package struct ObjectRecord: Sendable, Equatable {
    /// The newest insert and delete (``Ref/none`` when there is none).
    package var inserted = Ref.none
    package var deleted = Ref.none
    package var fields: [FieldSlot] = []
    package var sets: [SetMember] = []
    package var entity: UInt32
    /// The projection's tracking batch that last saved this record's original (or created it):
    /// while that batch is open, the record needs no more bookkeeping. Not part of the state
    /// (never encoded); it fills padding, so the record stays 56 bytes.
    package var batch: UInt32 = 0

    /// The newest timestamp of any event this record holds (insert, delete, field, add): a local
    /// edit of the object is stamped after it, so that it supersedes what it was made on, whatever
    /// the editing device's wall clock says.
    package var newestHLC: UInt64 {
        var newest = max(inserted.hlc, deleted.hlc)
        for slot in fields { newest = max(newest, slot.ref.hlc) }
        for member in sets { for add in member.adds { newest = max(newest, add.hlc) } }
        return newest
    }

    package init(entity: UInt32) { self.entity = entity }

    package func fieldIndex(_ key: UInt32) -> (found: Bool, index: Int) {
        var lo = 0
        var hi = fields.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if fields[mid].key < key { lo = mid + 1 } else { hi = mid }
        }
        return (lo < fields.count && fields[lo].key == key, lo)
    }

    package func setIndex(_ key: UInt32, _ target: ObjectID) -> (found: Bool, index: Int) {
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
    package var referenceTargets: [(key: UInt32, target: ObjectID)] {
        fields.compactMap { slot in
            if case .reference(let target) = slot.value { (slot.key, target) } else { nil }
        }
    }
}
