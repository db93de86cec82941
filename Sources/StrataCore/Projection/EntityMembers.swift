/// Which objects each entity has had, so that an entity's objects are found without reading every
/// record — except for an entity that holds a large share of the records.
///
/// Finding an entity's objects through a set of its IDs costs a hash lookup per ID, in no order;
/// one pass over the packed records (``RecordTable/keys(where:)``) costs about the same once the
/// entity holds a quarter of them. Keeping that entity's set then buys nothing, and costs every
/// insert a hash-set insert into a set too large for the cache: a quarter of a 256-insert
/// commit's time in a store of one large entity. So an entity that reaches a quarter of the
/// records (in a table of at least ``minimumRecords``) is *scanned*: its set is dropped, and its
/// objects are found by a pass over the records. The share is checked again each time the table
/// has doubled since the last check; an entity back under an eighth gets its set again (the
/// hysteresis keeps an entity near the line from switching back and forth).
///
/// A kept set is a superset of the IDs whose records are of the entity: it may also hold IDs of
/// deleted objects, IDs reused by another entity since, and objects a rolled-back batch created.
/// Readers check each record's existence and entity.
///
/// The decision costs some reads: an entity between an eighth and a quarter of the records may
/// be scanned (a pass over all the records, where its set would read fewer), and a table that
/// stops growing keeps its decisions (they are checked again only at a doubling, or when the
/// store is opened from a snapshot).
package struct EntityMembers {
    /// The IDs of each kept entity.
    private var sets: [UInt32: Set<ObjectID>] = [:]
    /// By entity ID: the table's record count when the entity's share was last checked, if it
    /// is scanned; 0 if its set is kept (an array, not a dictionary: every insert reads it).
    private var scannedAt: [Int] = []

    private func scanning(_ entity: UInt32) -> Bool { Int(entity) < scannedAt.count && scannedAt[Int(entity)] > 0 }

    private mutating func setScanned(_ entity: UInt32, at recordCount: Int) {
        if Int(entity) >= scannedAt.count { scannedAt += repeatElement(0, count: Int(entity) + 1 - scannedAt.count) }
        scannedAt[Int(entity)] = recordCount
    }

    /// Below this many records every entity keeps its set (a scan is not worth a decision).
    package static let minimumRecords = 4_096

    package init() {}

    /// How to find an entity's objects.
    package enum Lookup {
        /// Scan the records for those of the entity.
        case scan
        /// These IDs, a superset.
        case ids(Set<ObjectID>)
    }

    package func lookup(_ entity: UInt32) -> Lookup {
        if scanning(entity) { return .scan }
        return .ids(sets[entity] ?? [])
    }

    /// `object`'s record is now of `entity` (an insert changed the entity of an existing record).
    package mutating func note(_ object: ObjectID, entity: UInt32) {
        guard !scanning(entity) else { return }
        sets[entity, default: []].insert(object)
    }

    /// A record for `object` of `entity` was added to a table now holding `recordCount` records.
    package mutating func noteNew(_ object: ObjectID, entity: UInt32, recordCount: Int) {
        guard !scanning(entity) else { return }
        sets[entity, default: []].insert(object)
        let count = sets[entity]?.count ?? 0
        if recordCount >= Self.minimumRecords, count * 4 >= recordCount {
            sets[entity] = nil
            setScanned(entity, at: recordCount)
        }
    }

    /// Checks the scanned entities' shares once the table has doubled since their last check
    /// (amortized: one pass over the records per doubling); an entity back under an eighth of
    /// the records gets its set again.
    package mutating func review(_ records: RecordTable) {
        let due = scannedAt.indices.filter { scannedAt[$0] > 0 && records.count >= 2 * scannedAt[$0] }
        guard !due.isEmpty else { return }
        var counts = [Int](repeating: 0, count: scannedAt.count)
        records.values.withUnsafeBufferPointer { all in
            for record in all where Int(record.entity) < counts.count { counts[Int(record.entity)] += 1 }
        }
        for index in due {
            let entity = UInt32(index)
            if counts[index] * 8 < records.count {
                scannedAt[index] = 0
                sets[entity] = Set(records.keys { $0.entity == entity })
            } else {
                scannedAt[index] = records.count
            }
        }
    }

    /// The members of every entity of `records`: a set for each entity under a quarter of them,
    /// a scan for the others (what loading a snapshot builds).
    package static func build(from records: RecordTable) -> EntityMembers {
        var members = EntityMembers()
        var counts: [UInt32: Int] = [:]
        records.values.withUnsafeBufferPointer { all in
            for record in all { counts[record.entity, default: 0] += 1 }
        }
        var kept: [UInt32: [ObjectID]] = [:]
        for (entity, count) in counts {
            if records.count >= minimumRecords, count * 4 >= records.count {
                members.setScanned(entity, at: records.count)
            } else {
                kept[entity] = []
                kept[entity]?.reserveCapacity(count)
            }
        }
        if !kept.isEmpty {
            let ids = records.keys
            records.values.withUnsafeBufferPointer { all in
                for position in all.indices where kept[all[position].entity] != nil {
                    kept[all[position].entity]?.append(ids[position])
                }
            }
            // Each list is let go once its set is made (not all kept until the last).
            for entity in Array(kept.keys) {
                if let list = kept.removeValue(forKey: entity) { members.sets[entity] = Set(list) }
            }
        }
        return members
    }
}
