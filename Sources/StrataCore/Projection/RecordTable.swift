/// The projection's object records, by object ID: the records side by side in one array, and a
/// table from ID to position.
///
/// Why not `[ObjectID: ObjectRecord]`: a hash table keeps its buckets at most three quarters
/// full and grows by doubling, so every empty bucket of a dictionary costs a whole record (16 +
/// 56 bytes). At 100,000 objects it had 262,144 buckets, 189 bytes per object. Here a bucket is
/// a 4-byte position and 4 bytes of the ID's hash (``PositionIndex``; the ID is read from the
/// packed IDs), and the records are packed: about 93 bytes per object at the same count. Iterating the
/// records walks memory in order.
///
/// Removing swaps the last record into the hole (positions are not stable across removals; no
/// one keeps them across a change). At most 2^32 − 1 records (far more than memory holds).
package struct RecordTable: Sequence {
    private var positions = PositionIndex()
    private var ids: ContiguousArray<ObjectID> = []
    private var records: ContiguousArray<ObjectRecord> = []
    /// Counts insertions, removals and rehashes: a ``Slot`` is good only while it is unchanged.
    /// (A slot belongs to the table it was taken from; copies count on from the same number.)
    private var version = 0

    package init() {}

    package var count: Int { records.count }
    package var isEmpty: Bool { records.isEmpty }

    package mutating func reserveCapacity(_ capacity: Int) {
        version &+= 1  // the buckets may move
        positions.reserveCapacity(capacity)
        ids.reserveCapacity(capacity)
        records.reserveCapacity(capacity)
    }

    /// The IDs, in storage order.
    package var keys: ContiguousArray<ObjectID> { ids }
    /// The records, in storage order.
    package var values: ContiguousArray<ObjectRecord> { records }

    /// Where the record of `id` is, for changing it in place (``subscript(position:)``).
    package func position(of id: ObjectID) -> Int? { positions.find(id, in: ids).position }

    /// What one lookup of an ID found: its record's position, or where a record for it would go.
    /// A new object's insert looks its ID up once, then puts the record there
    /// (``insert(_:_:at:)``), instead of a second lookup in a table too large for the cache.
    package struct Slot {
        package let position: Int?
        fileprivate let id: ObjectID
        fileprivate let bucket: Int
        fileprivate let hash: UInt32
        fileprivate let version: Int
    }

    package func slot(of id: ObjectID) -> Slot {
        let found = positions.find(id, in: ids)
        return Slot(position: found.position, id: id, bucket: found.bucket, hash: found.hash, version: version)
    }

    /// Whether `slot` is still what a lookup of `id` would give: taken for `id`, in this table,
    /// and nothing added, removed or rehashed since.
    package func isCurrent(_ slot: Slot, for id: ObjectID) -> Bool {
        slot.version == version && slot.id == id
    }

    /// Adds the record of `id`, which ``slot(of:)`` found absent. If the slot is not current (see
    /// ``isCurrent(_:for:)``), the ID is looked up again.
    package mutating func insert(_ id: ObjectID, _ record: consuming ObjectRecord, at slot: Slot) {
        guard isCurrent(slot, for: id), slot.position == nil else {
            self[id] = record
            return
        }
        ids.append(id)
        records.append(record)
        positions.insert(records.count - 1, at: slot.bucket, hash: slot.hash)
        version &+= 1
    }

    /// The record at a position ``position(of:)`` gave, read or changed in place (no copy of its
    /// fields).
    package subscript(position position: Int) -> ObjectRecord {
        _read { yield records[position] }
        _modify { yield &records[position] }
    }

    /// The record of `id`; setting `nil` removes it.
    package subscript(id: ObjectID) -> ObjectRecord? {
        get { position(of: id).map { records[$0] } }
        set {
            guard let newValue else {
                removeValue(forKey: id)
                return
            }
            let found = positions.find(id, in: ids)
            if let position = found.position {
                records[position] = newValue
            } else {
                ids.append(id)
                records.append(newValue)
                positions.insert(records.count - 1, at: found.bucket, hash: found.hash)
                version &+= 1
            }
        }
    }

    @discardableResult
    package mutating func removeValue(forKey id: ObjectID) -> ObjectRecord? {
        let found = positions.find(id, in: ids)
        guard let position = found.position else { return nil }
        version &+= 1
        positions.remove(at: found.bucket)
        let last = records.count - 1
        if position != last {
            // The last record moves into the hole: its bucket is found by its ID (still at `last`).
            let moved = positions.find(ids[last], in: ids)
            records.swapAt(position, last)
            ids.swapAt(position, last)
            if moved.position != nil { positions.set(position, at: moved.bucket) }
        }
        ids.removeLast()
        return records.removeLast()
    }

    /// The IDs of the records `include` accepts, in storage order: one pass over packed memory,
    /// no hash lookup per record.
    package func keys(where include: (ObjectRecord) -> Bool) -> [ObjectID] {
        var result: [ObjectID] = []
        records.withUnsafeBufferPointer { records in
            ids.withUnsafeBufferPointer { ids in
                for position in records.indices where include(records[position]) { result.append(ids[position]) }
            }
        }
        return result
    }

    /// Calls `body` with each record `include` accepts, in the order of their IDs, each read in
    /// place: one pass over packed memory to choose, one sort, and no hash lookup or copy of a
    /// record after (a digest visits every object of a store; looking each up by ID was a third
    /// of its time). `body` must not change the table: it reads the records in place.
    package func forEachInIDOrder(where include: (ObjectRecord) -> Bool,
                                  _ body: (ObjectID, ObjectRecord) throws -> Void) rethrows {
        var chosen: [(id: ObjectID, position: UInt32)] = []
        records.withUnsafeBufferPointer { records in
            ids.withUnsafeBufferPointer { ids in
                for position in records.indices where include(records[position]) {
                    chosen.append((ids[position], UInt32(truncatingIfNeeded: position)))
                }
            }
        }
        chosen.sort { $0.id < $1.id }
        // In ID order the records are scattered over memory: each is a cache miss, and so are
        // its arrays. Touching a block of them first, in a loop that does nothing else, lets the
        // processor wait for all of those misses at once instead of one after the other.
        var touched = 0
        try records.withUnsafeBufferPointer { records in
            var start = 0
            while start < chosen.count {
                let end = Swift.min(start + 32, chosen.count)
                for index in start..<end {
                    let position = Int(chosen[index].position)
                    touched &+= records[position].fields.count &+ records[position].sets.count
                }
                for index in start..<end { try body(chosen[index].id, records[Int(chosen[index].position)]) }
                start = end
            }
        }
        RecordTable.keep(touched)
    }

    /// Keeps a value the optimizer would otherwise see as unused (the touches above): not
    /// inlined and not optimized, so the value must be computed.
    @inline(never) @_optimize(none)
    package static func keep(_ value: Int) {}

    /// Every record's `batch` stamp set to 0 (the projection's batch counter wrapped around).
    package mutating func clearBatchStamps() {
        for position in records.indices { records[position].batch = 0 }
    }

    package func makeIterator() -> Iterator { Iterator(table: self) }

    package struct Iterator: IteratorProtocol {
        let table: RecordTable
        var position = 0

        package mutating func next() -> (key: ObjectID, value: ObjectRecord)? {
            guard position < table.records.count else { return nil }
            defer { position += 1 }
            return (table.ids[position], table.records[position])
        }
    }
}
