/// The projection's object records, by object ID: the records side by side in one array, and a
/// table from ID to position.
///
/// Why not `[ObjectID: ObjectRecord]`: a dictionary keeps its buckets at most three quarters
/// full and grows by doubling, so every empty bucket costs a whole record (16 + 56 bytes). At
/// 100,000 objects it had 262,144 buckets, 189 bytes per object. Here an empty bucket costs a
/// key and a position (20 bytes), and the records themselves are packed: 124 bytes per object at
/// the same count. Iterating the records walks memory in order.
///
/// Removing swaps the last record into the hole (positions are not stable across removals; no
/// one keeps them across a change). At most 2^32 records (far more than memory holds).
package struct RecordTable: Sequence {
    private var positions: [ObjectID: UInt32] = [:]
    private var ids: ContiguousArray<ObjectID> = []
    private var records: ContiguousArray<ObjectRecord> = []

    package init() {}

    package var count: Int { records.count }
    package var isEmpty: Bool { records.isEmpty }

    package mutating func reserveCapacity(_ capacity: Int) {
        positions.reserveCapacity(capacity)
        ids.reserveCapacity(capacity)
        records.reserveCapacity(capacity)
    }

    /// The IDs, in storage order.
    package var keys: ContiguousArray<ObjectID> { ids }
    /// The records, in storage order.
    package var values: ContiguousArray<ObjectRecord> { records }

    /// Where the record of `id` is, for changing it in place (``subscript(position:)``).
    package func position(of id: ObjectID) -> Int? { positions[id].map(Int.init) }

    /// The record at a position ``position(of:)`` gave, changed in place (no copy of its fields).
    package subscript(position position: Int) -> ObjectRecord {
        get { records[position] }
        _modify { yield &records[position] }
    }

    /// The record of `id`; setting `nil` removes it.
    package subscript(id: ObjectID) -> ObjectRecord? {
        get { positions[id].map { records[Int($0)] } }
        set {
            guard let newValue else {
                removeValue(forKey: id)
                return
            }
            if let position = positions[id] {
                records[Int(position)] = newValue
            } else {
                positions[id] = UInt32(truncatingIfNeeded: records.count)
                ids.append(id)
                records.append(newValue)
            }
        }
    }

    @discardableResult
    package mutating func removeValue(forKey id: ObjectID) -> ObjectRecord? {
        guard let found = positions.removeValue(forKey: id) else { return nil }
        let position = Int(found)
        let last = records.count - 1
        if position != last {
            records.swapAt(position, last)
            ids.swapAt(position, last)
            positions[ids[position]] = found
        }
        ids.removeLast()
        return records.removeLast()
    }

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
