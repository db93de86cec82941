/// Little-endian fixed-width integers and LEB128 varints, the building blocks of every layout in
/// the format article (and of the event encoding of the modules above). Inlinable, as
/// ``ByteReader`` is: the encoders above write every event through it.
public struct ByteWriter: Sendable {
    public var bytes: [UInt8] = []

    @inlinable public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    @inlinable public mutating func u8(_ v: UInt8) { bytes.append(v) }
    @inlinable public mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    @inlinable public mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    @inlinable public mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    @inlinable public mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    @inlinable public mutating func raw(_ v: some Sequence<UInt8>) { bytes.append(contentsOf: v) }
    @inlinable public mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// A signed integer as a zigzag varint (small magnitudes of either sign stay short).
    @inlinable public mutating func svarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A length-prefixed byte string.
    @inlinable public mutating func lengthPrefixed(_ v: some Collection<UInt8>) {
        varint(UInt64(v.count))
        bytes.append(contentsOf: v)
    }

    /// Overwrites a little-endian UInt32 at `offset` (used to fill in checksums last).
    @inlinable public mutating func setU32(_ v: UInt32, at offset: Int) {
        withUnsafeBytes(of: v.littleEndian) { src in
            for i in 0..<4 { bytes[offset + i] = src[i] }
        }
    }
}

/// A bounds-checked reader over raw bytes. Every read returns `nil` past the end rather than
/// trapping, because the bytes come from disk or the network.
///
/// Its reads are `@inlinable`: the decoders of the modules above call them per byte of every
/// event, and a call across the module boundary each time was a tenth of a catch-up's decode.
public struct ByteReader {
    public let base: UnsafeRawBufferPointer
    public var offset: Int

    @inlinable
    public init(_ base: UnsafeRawBufferPointer, offset: Int = 0) {
        self.base = base
        self.offset = offset
    }

    @inlinable public var remaining: Int { base.count - offset }

    @inlinable @inline(__always) public mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return base[offset]
    }
    @inlinable public mutating func u16() -> UInt16? { fixed(UInt16.self) }
    @inlinable public mutating func u32() -> UInt32? { fixed(UInt32.self) }
    @inlinable public mutating func u64() -> UInt64? { fixed(UInt64.self) }
    @inlinable public mutating func i64() -> Int64? { u64().map { Int64(bitPattern: $0) } }

    @inlinable public mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: base[offset..<offset + count])
    }

    /// Reads a LEB128 varint of at most 10 bytes; `nil` when truncated or overlong.
    @inlinable public mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64 {
            guard let byte = u8() else { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    /// A zigzag varint (see ``ByteWriter/svarint(_:)``).
    @inlinable public mutating func svarint() -> Int64? {
        guard let raw = varint() else { return nil }
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A length-prefixed byte string, or `nil` when truncated.
    @inlinable public mutating func lengthPrefixed() -> UnsafeRawBufferPointer? {
        guard let count = varint(), count <= UInt64(remaining) else { return nil }
        return bytes(Int(count))
    }

    @inlinable
    mutating func fixed<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        defer { offset += size }
        return T(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
