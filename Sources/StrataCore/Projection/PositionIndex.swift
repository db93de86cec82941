/// The hash index of a ``RecordTable``: from an object ID to the position of its record, in a
/// table of 4-byte buckets (open addressing, linear probing, at most three quarters full). A
/// bucket holds a position + 1; the ID is not stored again — it is compared with the table's
/// packed IDs — so an empty bucket costs 5 bytes, not a dictionary entry's 20 or more.
///
/// Beside each bucket, one byte of its ID's hash (a *tag*, never 0: 0 marks an empty bucket).
/// A probe compares tags, and reads a packed ID (a cache miss in a large table) only when the
/// tags match: an ID that is not there — every new object's insert — costs about one miss
/// instead of one per bucket probed past.
///
/// IDs come from other devices: they are hashed with the process's seeded `Hasher`, so IDs
/// chosen to collide cannot be prepared in advance.
struct PositionIndex {
    private var buckets: [UInt32] = []
    private var tags: [UInt8] = []
    private(set) var count = 0

    private var mask: Int { buckets.count - 1 }

    private static func hash(_ id: ObjectID) -> Int {
        var hasher = Hasher()
        hasher.combine(id)
        return hasher.finalize()
    }

    /// The tag of a hash: its top byte (the bucket is chosen by its low bits), 0 made 1 (0
    /// marks an empty bucket), so 255 values. The top byte of the word: 64- and 32-bit alike.
    private static func tag(_ hash: Int) -> UInt8 {
        let top = UInt8(truncatingIfNeeded: UInt(bitPattern: hash) >> (UInt.bitWidth - 8))
        return top == 0 ? 1 : top
    }

    /// The bucket of `id`, and the position of its record if it is there (else the empty bucket
    /// where it goes).
    func find(_ id: ObjectID, in ids: ContiguousArray<ObjectID>) -> (bucket: Int, position: Int?, tag: UInt8) {
        guard !buckets.isEmpty else { return (0, nil, 0) }
        let hash = Self.hash(id)
        let tag = Self.tag(hash)
        var bucket = hash & mask
        while true {
            let held = tags[bucket]
            if held == 0 { return (bucket, nil, tag) }
            if held == tag {
                let position = Int(buckets[bucket] - 1)
                if ids[position] == id { return (bucket, position, tag) }
            }
            bucket = (bucket + 1) & mask
        }
    }

    /// Puts `position` (a record just appended; its ID is `ids[position]`) in the empty
    /// `bucket` that ``find(_:in:)`` gave, with the tag it gave.
    mutating func insert(_ position: Int, at bucket: Int, tag: UInt8, ids: ContiguousArray<ObjectID>) {
        if buckets.isEmpty || (count + 1) * 4 > buckets.count * 3 {
            // Grown: the bucket `find` gave is of the old table; found again.
            rebuild(capacity: max(count + 1, buckets.count), ids: ids, holding: position + 1)
            return
        }
        buckets[bucket] = UInt32(truncatingIfNeeded: position + 1)
        tags[bucket] = tag
        count += 1
    }

    /// Points a bucket at another position (its record moved).
    mutating func set(_ position: Int, at bucket: Int) {
        buckets[bucket] = UInt32(truncatingIfNeeded: position + 1)
    }

    /// Empties `bucket`, shifting back the entries after it that probed past it (so that every
    /// entry stays reachable from its home bucket without tombstones).
    mutating func remove(at bucket: Int, ids: ContiguousArray<ObjectID>) {
        var hole = bucket
        var next = (hole + 1) & mask
        while tags[next] != 0 {
            let home = Self.hash(ids[Int(buckets[next] - 1)]) & mask
            // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
            let homeAfterHole = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            if !homeAfterHole {
                buckets[hole] = buckets[next]
                tags[hole] = tags[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
        tags[hole] = 0
        count -= 1
    }

    mutating func reserveCapacity(_ capacity: Int, ids: ContiguousArray<ObjectID>) {
        if capacity * 4 > buckets.count * 3 { rebuild(capacity: capacity, ids: ids, holding: count) }
    }

    /// A table for at least `capacity` entries holding the first `entries` positions.
    private mutating func rebuild(capacity: Int, ids: ContiguousArray<ObjectID>, holding entries: Int) {
        var size = 8
        while size * 3 < capacity * 4 + 4 { size *= 2 }
        // The old tables go first, so that their memory is free before the new are made.
        buckets = []
        tags = []
        var newBuckets = [UInt32](repeating: 0, count: size)
        var newTags = [UInt8](repeating: 0, count: size)
        let mask = size - 1
        for position in 0..<entries {
            let hash = Self.hash(ids[position])
            var bucket = hash & mask
            while newTags[bucket] != 0 { bucket = (bucket + 1) & mask }
            newBuckets[bucket] = UInt32(truncatingIfNeeded: position + 1)
            newTags[bucket] = Self.tag(hash)
        }
        buckets = newBuckets
        tags = newTags
        count = entries
    }
}
