import CLZ4

/// LZ4 block compression over the system liblz4.
///
/// This is the only file that imports `CLZ4`, so no C type leaks into the rest of the module.
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
