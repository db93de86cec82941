#if canImport(CLZ4)
import CLZ4

/// LZ4 block compression over the system liblz4 (Linux).
///
/// This is the only file that imports `CLZ4`, so no C type leaks into the rest of the module.
/// Apple platforms, which have no system liblz4 an app may link, use the Compression framework
/// below: the same block format, so logs written on either read on both.
enum LZ4Codec {
    /// The largest input the LZ4 block format accepts.
    static var maxInputSize: Int { Int(CLZ4_maxInputSize()) }

    /// Compresses `input`, or returns `nil` when the result would not be smaller than `limit` bytes
    /// (the caller then stores the bytes raw). The result starts with `reserving` zero bytes of
    /// room for a header.
    static func compress(_ input: UnsafeRawBufferPointer, limit: Int, acceleration: Int = 1, reserving: Int = 0) -> [UInt8]? {
        guard input.count > 0, input.count <= maxInputSize, limit > 0 else { return nil }
        let capacity = min(Int(CLZ4_compressBound(Int32(input.count))), limit)
        guard capacity > 0 else { return nil }
        var written: Int32 = 0
        let output = [UInt8](unsafeUninitializedCapacity: reserving + capacity) { buffer, count in
            let base = buffer.baseAddress!
            base.initialize(repeating: 0, count: reserving)
            written = LZ4_compress_fast(
                input.baseAddress!.assumingMemoryBound(to: CChar.self),
                UnsafeMutableRawPointer(base + reserving).assumingMemoryBound(to: CChar.self),
                Int32(input.count),
                Int32(capacity),
                Int32(clamping: max(1, acceleration))
            )
            count = reserving + max(0, Int(written))
        }
        // 0 means "did not fit in `capacity`", which is exactly "compression does not pay".
        guard written > 0, Int(written) < limit else { return nil }
        return output
    }

    /// Decompresses `input` into exactly `into.count` bytes. Returns `false` when the input is not a
    /// valid LZ4 block of exactly that decompressed size (the caller reports where).
    static func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard input.count > 0, input.count <= Int(Int32.max), output.count <= Int(Int32.max) else {
            return output.count == 0 && input.count == 0
        }
        guard let src = input.baseAddress else { return false }
        if output.count == 0 { return false }
        guard let dst = output.baseAddress else { return false }
        let produced = LZ4_decompress_safe(
            src.assumingMemoryBound(to: CChar.self),
            dst.assumingMemoryBound(to: CChar.self),
            Int32(input.count),
            Int32(output.count)
        )
        return Int(produced) == output.count
    }
}
#elseif canImport(Compression)
import Compression

/// LZ4 block compression over Apple's Compression framework (`COMPRESSION_LZ4_RAW` is the raw
/// LZ4 block format that liblz4 reads and writes): what iOS has, and what a Mac app may ship.
/// Its encoder may choose other matches than liblz4's, so the compressed bytes can differ from
/// those liblz4 writes for the same input; both decode each other's blocks to the same bytes.
enum LZ4Codec {
    /// LZ4_MAX_INPUT_SIZE.
    static var maxInputSize: Int { 0x7E00_0000 }

    /// As the liblz4 version: `nil` when compression does not pay within `limit` bytes.
    static func compress(_ input: UnsafeRawBufferPointer, limit: Int, acceleration: Int = 1, reserving: Int = 0) -> [UInt8]? {
        guard input.count > 0, input.count <= maxInputSize, limit > 0, let source = input.baseAddress else { return nil }
        // LZ4_COMPRESSBOUND.
        let capacity = min(input.count + input.count / 255 + 16, limit)
        var written = 0
        let output = [UInt8](unsafeUninitializedCapacity: reserving + capacity) { buffer, count in
            guard let base = buffer.baseAddress else { count = 0; return }
            base.initialize(repeating: 0, count: reserving)
            written = compression_encode_buffer(base + reserving, capacity, source.assumingMemoryBound(to: UInt8.self), input.count,
                                                nil, COMPRESSION_LZ4_RAW)
            count = reserving + written
        }
        // 0 means "did not fit in `capacity`", which is exactly "compression does not pay".
        guard written > 0, written < limit else { return nil }
        return output
    }

    /// As the liblz4 version: `false` unless `input` is a valid block of exactly `output.count`
    /// bytes. The framework stops at a full buffer without saying whether more would follow, so
    /// it decodes into one byte more to tell.
    static func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard input.count > 0, output.count > 0, let source = input.baseAddress, let destination = output.baseAddress else {
            return output.count == 0 && input.count == 0
        }
        var scratch = [UInt8](repeating: 0, count: output.count + 1)
        let produced = scratch.withUnsafeMutableBufferPointer { buffer -> Int in
            guard let base = buffer.baseAddress else { return -1 }
            return compression_decode_buffer(base, buffer.count, source.assumingMemoryBound(to: UInt8.self), input.count, nil, COMPRESSION_LZ4_RAW)
        }
        guard produced == output.count else { return false }
        scratch.withUnsafeBytes { if let copied = $0.baseAddress { destination.copyMemory(from: copied, byteCount: output.count) } }
        return true
    }
}
#endif
