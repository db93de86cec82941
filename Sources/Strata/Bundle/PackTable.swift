/// The packer's tables from a thing to its index, the order things were first met: open
/// addressing with linear probing over fixed-width keys, because a million lookups through
/// `Dictionary`'s per-key SipHash were most of a bundle's time. Keys come from the user's own
/// store (the reader uses arrays, never hashes), so no one else chooses them.
struct PackTable<Key: PackKey> {
    private var keys: [Key]
    /// Index + 1; 0 is an empty slot.
    private var slots: [Int32]
    private var mask: Int
    private(set) var count = 0

    init() {
        keys = Array(repeating: Key.empty, count: 1024)
        slots = Array(repeating: 0, count: 1024)
        mask = 1023
    }

    /// The index of `key`, or `nil` after adding it with the index `next`.
    mutating func index(of key: Key, orInsert next: Int) -> Int? {
        var slot = Int(truncatingIfNeeded: key.hash64 >> 7) & mask
        while true {
            let found = slots[slot]
            if found == 0 { break }
            if keys[slot] == key { return Int(found - 1) }
            slot = (slot + 1) & mask
        }
        keys[slot] = key
        count += 1
        slots[slot] = Int32(next + 1)
        if count * 2 > slots.count { grow() }
        return nil
    }

    private mutating func grow() {
        let oldKeys = keys
        let oldSlots = slots
        keys = Array(repeating: Key.empty, count: oldSlots.count * 2)
        slots = Array(repeating: 0, count: oldSlots.count * 2)
        mask = slots.count - 1
        for i in oldSlots.indices where oldSlots[i] != 0 {
            var slot = Int(truncatingIfNeeded: oldKeys[i].hash64 >> 7) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            keys[slot] = oldKeys[i]
            slots[slot] = oldSlots[i]
        }
    }
}

protocol PackKey: Equatable {
    static var empty: Self { get }
    var hash64: UInt64 { get }
}

@inline(__always) private func mix(_ x: UInt64) -> UInt64 {
    // The finalizer of MurmurHash3: every input bit reaches every output bit.
    var h = x
    h ^= h >> 33
    h &*= 0xff51_afd7_ed55_8ccd
    h ^= h >> 33
    h &*= 0xc4ce_b9fe_1a85_ec53
    h ^= h >> 33
    return h
}

extension UInt128: PackKey {
    static var empty: UInt128 { 0 }
    var hash64: UInt64 { mix(UInt64(truncatingIfNeeded: self) &+ mix(UInt64(truncatingIfNeeded: self >> 64))) }
}

/// A value's encoded payload of at most 23 bytes, with its length: every integer, double, date
/// and UUID, and strings and bytes up to 22 bytes (a redacted string is 19).
struct ShortValue: PackKey {
    var a: UInt64 = 0
    var b: UInt64 = 0
    var c: UInt64 = 0

    static let maxBytes = 23
    static var empty: ShortValue { ShortValue() }
    var hash64: UInt64 { mix(a &+ mix(b &+ mix(c))) }

    init() {}

    /// `nil` when the payload is longer than ``maxBytes``.
    init?(_ payload: ArraySlice<UInt8>) {
        guard payload.count <= Self.maxBytes else { return nil }
        var words: (UInt64, UInt64, UInt64) = (0, 0, UInt64(payload.count) << 56)
        for (i, byte) in payload.enumerated() {
            let shift = UInt64(8 * (i % 8))
            switch i / 8 {
            case 0: words.0 |= UInt64(byte) << shift
            case 1: words.1 |= UInt64(byte) << shift
            default: words.2 |= UInt64(byte) << shift
            }
        }
        (a, b, c) = words
    }
}
