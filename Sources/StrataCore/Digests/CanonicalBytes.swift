import StrataLog

/// The buffer an event's canonical encoding is written into before it is hashed (``Fingerprint``):
/// one allocation reused for every event of a transaction, written through a raw pointer.
///
/// Why not ``ByteWriter``: a diff fingerprints every event of two stores, two million encodings
/// of about 70 bytes, and each `Array` append checks capacity and uniqueness and may go through
/// the exclusivity checker; that bookkeeping was two thirds of the fingerprints' time, the
/// hashing the rest. The bytes written are the same (``FingerprintGoldenTests`` pins them).
///
/// Noncopyable: it owns its memory and frees it when it goes out of scope.
struct CanonicalBytes: ~Copyable {
    private(set) var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    mutating func removeAll() { count = 0 }

    @inline(__always) private mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(count + more) }
    }

    @inline(never) private mutating func grow(_ needed: Int) {
        let grown = max(needed, capacity * 2)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 8)
        fresh.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = fresh
        capacity = grown
    }

    @inline(__always) mutating func u8(_ v: UInt8) {
        reserve(1)
        base.storeBytes(of: v, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// Little-endian, as ``ByteWriter/u64(_:)``.
    @inline(__always) mutating func u64(_ v: UInt64) {
        reserve(8)
        base.storeBytes(of: v.littleEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    /// A 128-bit identifier's 16 big-endian bytes, as ``ByteWriter/id(_:)``.
    @inline(__always) mutating func id<ID: Identifier128>(_ id: ID) {
        let raw = id.rawValue
        reserve(16)
        base.storeBytes(of: UInt64(truncatingIfNeeded: raw >> 64).bigEndian, toByteOffset: count, as: UInt64.self)
        base.storeBytes(of: UInt64(truncatingIfNeeded: raw).bigEndian, toByteOffset: count + 8, as: UInt64.self)
        count += 16
    }

    /// As ``ByteWriter/varint(_:)``.
    @inline(__always) mutating func varint(_ value: UInt64) {
        reserve(10)
        var v = value
        while v >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: count, as: UInt8.self)
            count += 1
            v >>= 7
        }
        base.storeBytes(of: UInt8(v), toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// As ``ByteWriter/svarint(_:)``.
    @inline(__always) mutating func svarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        if bytes.count <= 16 {
            // Names and short values: a call to memmove costs more than the copy.
            for i in 0..<bytes.count { base.storeBytes(of: bytes[i], toByteOffset: count + i, as: UInt8.self) }
        } else {
            (base + count).copyMemory(from: source, byteCount: bytes.count)
        }
        count += bytes.count
    }

    mutating func raw(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw($0) }
    }

    /// Length-prefixed, as ``ByteWriter/lengthPrefixed(_:)``.
    mutating func lengthPrefixed(_ bytes: UnsafeRawBufferPointer) {
        varint(UInt64(bytes.count))
        raw(bytes)
    }

    /// A value as ``EventCodec/writeValue(_:into:)`` writes it: the kinds events carry most
    /// directly, the others through that function.
    mutating func value(_ value: Value) {
        switch value {
        case .null: u8(EventCodec.Tag.null.rawValue)
        case .string(let text):
            u8(EventCodec.Tag.string.rawValue)
            var text = text
            text.withUTF8 { lengthPrefixed(UnsafeRawBufferPointer($0)) }
        case .integer(let v):
            u8(EventCodec.Tag.integer.rawValue)
            svarint(v)
        case .double(let v):
            u8(EventCodec.Tag.double.rawValue)
            u64(v.bitPattern)
        case .bool(let v): u8(v ? EventCodec.Tag.boolTrue.rawValue : EventCodec.Tag.boolFalse.rawValue)
        case .date(let v):
            u8(EventCodec.Tag.date.rawValue)
            svarint(v)
        case .reference(let v):
            u8(EventCodec.Tag.reference.rawValue)
            id(v)
        case .bytes, .uuid, .asset:
            var w = ByteWriter(capacity: 32)
            EventCodec.writeValue(value, into: &w)
            raw(w.bytes)
        }
    }
}
