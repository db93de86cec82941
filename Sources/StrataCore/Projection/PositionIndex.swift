/// The hash index of a ``RecordTable``: from an object ID to the position of its record, in a
/// table of 8-byte buckets (open addressing, linear probing, at most three quarters full). A
/// bucket holds a position + 1 (0: empty) and the top 32 bits of its ID's hash; the ID is not
/// stored again — it is compared with the table's packed IDs — so an empty bucket costs 8 bytes,
/// not a dictionary entry's 20 or more.
///
/// Why the hash is kept in the bucket:
/// - A probe compares hashes, and reads a packed ID (a cache miss in a large table) only when
///   they match: an ID that is not there — every new object's insert — costs one miss, and the
///   bucket it then fills is on the same cache line.
/// - The table grows without hashing any ID again. A bucket's home is the hash's *top* bits, so
///   the buckets are roughly in order of home (linear probing keeps a run's entries after their
///   homes, not sorted), and walking the old table in order fills the new one about in order
///   too, home h going to 2h or 2h + 1: a doubling is two nearly sequential passes, not a random
///   write per entry (which was a fifth of a catch-up's apply into a fresh store). The price: the
///   old table is freed only after the new one is filled, so a doubling to N buckets briefly
///   holds 12·N bytes (the rehash from the IDs it replaced freed the old tables first: 5·N).
/// - Removal's backward shift finds each entry's home from its bucket alone.
///
/// IDs come from other devices: they are hashed with the process's seeded `Hasher`, so IDs
/// chosen to collide cannot be prepared in advance.
struct PositionIndex {
    struct Bucket {
        var position: UInt32  // position + 1; 0 marks an empty bucket
        var hash: UInt32
    }

    private var buckets: [Bucket] = []
    /// 32 − log2(number of buckets): a hash's home bucket is `hash >> shift`.
    private var shift = 32
    private(set) var count = 0

    private var mask: Int { buckets.count - 1 }

    /// The top 32 bits of the seeded hash of `id` (64- and 32-bit platforms alike).
    static func hash(_ id: ObjectID) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(id)
        return UInt32(truncatingIfNeeded: UInt(bitPattern: hasher.finalize()) >> (UInt.bitWidth - 32))
    }

    /// The bucket of `id`, and the position of its record if it is there (else the empty bucket
    /// where it goes), with the ID's hash for ``insert(_:at:hash:)``.
    func find(_ id: ObjectID, in ids: ContiguousArray<ObjectID>) -> (bucket: Int, position: Int?, hash: UInt32) {
        let hash = Self.hash(id)
        guard !buckets.isEmpty else { return (0, nil, hash) }
        let mask = self.mask
        return buckets.withUnsafeBufferPointer { buckets in
            var bucket = Int(hash >> shift)
            while true {
                let held = buckets[bucket]
                if held.position == 0 { return (bucket, nil, hash) }
                if held.hash == hash {
                    let position = Int(held.position - 1)
                    if ids[position] == id { return (bucket, position, hash) }
                }
                bucket = (bucket + 1) & mask
            }
        }
    }

    /// Puts `position` (a record just appended) in the empty `bucket` that ``find(_:in:)`` gave,
    /// with the hash it gave.
    mutating func insert(_ position: Int, at bucket: Int, hash: UInt32) {
        // position + 1 must fit a bucket (0 is "empty"); memory runs out long before.
        precondition(position < Int(UInt32.max), "a record table holds fewer than 2^32 − 1 records")
        var bucket = bucket
        if buckets.isEmpty || (count + 1) * 4 > buckets.count * 3 {
            // Grown: the bucket `find` gave is of the old table; probed for again.
            rebuild(capacity: max(count + 1, buckets.count))
            bucket = emptyBucket(for: hash)
        }
        buckets[bucket] = Bucket(position: UInt32(truncatingIfNeeded: position + 1), hash: hash)
        count += 1
    }

    /// Points a bucket at another position (its record moved).
    mutating func set(_ position: Int, at bucket: Int) {
        buckets[bucket].position = UInt32(truncatingIfNeeded: position + 1)
    }

    /// Empties `bucket`, shifting back the entries after it that probed past it (so that every
    /// entry stays reachable from its home bucket without tombstones).
    mutating func remove(at bucket: Int) {
        let mask = self.mask
        var hole = bucket
        var next = (hole + 1) & mask
        while buckets[next].position != 0 {
            let home = Int(buckets[next].hash >> shift)
            // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
            let homeAfterHole = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            if !homeAfterHole {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = Bucket(position: 0, hash: 0)
        count -= 1
    }

    mutating func reserveCapacity(_ capacity: Int) {
        if capacity * 4 > buckets.count * 3 { rebuild(capacity: capacity) }
    }

    /// The first empty bucket from the home of `hash` on.
    private func emptyBucket(for hash: UInt32) -> Int {
        var bucket = Int(hash >> shift)
        while buckets[bucket].position != 0 { bucket = (bucket + 1) & mask }
        return bucket
    }

    /// A table for at least `capacity` entries, holding the entries of this one. The old
    /// table is walked in bucket order, which is (but for a wrapped run at its start) the order
    /// of the homes, so the new one is written front to back.
    private mutating func rebuild(capacity: Int) {
        var bits = 3
        while (1 << bits) * 3 < capacity * 4 + 4 { bits += 1 }
        // More buckets than a 32-bit hash can address would need more records than memory holds
        // (positions are 32-bit as well).
        bits = min(bits, 32)
        let old = buckets
        buckets = []  // so that `old` is the only reference, and its memory is freed at the end
        var grown = [Bucket](repeating: Bucket(position: 0, hash: 0), count: 1 << bits)
        let newShift = 32 - bits
        let mask = (1 << bits) - 1
        grown.withUnsafeMutableBufferPointer { grown in
            old.withUnsafeBufferPointer { old in
                for entry in old where entry.position != 0 {
                    var bucket = Int(entry.hash >> newShift)
                    while grown[bucket].position != 0 { bucket = (bucket + 1) & mask }
                    grown[bucket] = entry
                }
            }
        }
        buckets = grown
        shift = newShift
    }
}
