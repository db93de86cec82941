/// LZ4 for bytes that travel (an asset's chunks): compressed only when that saves at least an
/// eighth, decompressed only to a length the receiver already knows, so a hostile body cannot
/// make it allocate more than that.
package enum ChunkCompression {
    /// The LZ4 block of `bytes`, or `nil` when it would not be at least 1/8 smaller (photos and
    /// videos are compressed already: they travel as they are).
    package static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count >= 64 else { return nil }
        return bytes.withUnsafeBytes { LZ4Codec.compress($0, limit: bytes.count - bytes.count / 8) }
    }

    /// The `length` bytes an LZ4 block decompresses to; `nil` when it is not a valid block of
    /// exactly that length.
    package static func decompress(_ block: [UInt8], length: Int) -> [UInt8]? {
        guard length > 0, length <= 1 << 26 else { return nil }
        var output = [UInt8](repeating: 0, count: length)
        let ok = block.withUnsafeBytes { input in output.withUnsafeMutableBytes { LZ4Codec.decompress(input, into: $0) } }
        return ok ? output : nil
    }
}
