import StrataLog

/// The streams a packed log (``PackedLog``) is cut into, each stored as chunks of at most
/// ``maxChunk`` bytes, LZ4-compressed when that saves at least an eighth. Like goes with like so
/// that each stream compresses as well as it can: the repetitive structure apart from the
/// references into tables (bit-packed at the width the table's size gives) and from the
/// literals (IDs and hashes, which do not compress).
enum PackStream: Int, CaseIterable, CustomStringConvertible {
    case structure, objects, values, literals

    static let maxChunk = 4 << 20

    var description: String {
        switch self {
        case .structure: "structure"
        case .objects: "object references"
        case .values: "value references"
        case .literals: "literals"
        }
    }
}

/// Writes bits least significant first into bytes.
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var buffer: UInt64 = 0
    private var count = 0

    /// The low `width` bits of `value` (`width` ≤ 57).
    mutating func write(_ value: UInt64, width: Int) {
        guard width > 0 else { return }
        buffer |= value << UInt64(count)
        count += width
        while count >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: buffer))
            buffer >>= 8
            count -= 8
        }
    }

    /// The bytes, the last one padded with zero bits.
    mutating func finish() -> [UInt8] {
        if count > 0 { bytes.append(UInt8(truncatingIfNeeded: buffer)) }
        buffer = 0
        count = 0
        return bytes
    }
}

/// The number of bits that hold every number in `0...n`: a reference into a table of `n`
/// entries (0: a new entry) is written at this width, which reader and writer both know.
@inline(__always) func referenceWidth(_ n: Int) -> Int { n == 0 ? 0 : UInt64(n).bitWidth - UInt64(n).leadingZeroBitCount }

/// Why a packed log does not read: what and where (the stream and the byte in it).
struct PackError: Error {
    var message: String
}

/// Reads one stream of a packed log chunk by chunk, decompressing a chunk when it is reached: one
/// chunk per stream in memory at a time, and nothing asked of it beyond the bytes it holds.
struct PackStreamReader {
    struct Chunk {
        var range: Range<Int>
        var rawLength: Int
    }

    let stream: PackStream
    private let file: [UInt8]
    private let chunks: [Chunk]
    /// The unpacked bytes of the chunks from each index on (the last is 0).
    private let after: [Int]
    private var next = 0
    private var current: [UInt8] = []
    private var index = 0
    /// Bytes of this stream consumed before `current`.
    private var before = 0
    private var bitBuffer: UInt64 = 0
    private var bitCount = 0

    init(stream: PackStream, file: [UInt8], chunks: [Chunk]) {
        self.stream = stream
        self.file = file
        self.chunks = chunks
        var after = [Int](repeating: 0, count: chunks.count + 1)
        for i in chunks.indices.reversed() { after[i] = after[i + 1] + chunks[i].rawLength }
        self.after = after
    }

    /// The bytes left in the stream.
    var remaining: Int { current.count - index + after[next] }

    /// Where the reader is, for an error message.
    var offset: Int { before + index }

    func fail(_ why: String) -> PackError {
        PackError(message: "the \(stream) stream: \(why) (at its byte \(offset))")
    }

    private mutating func load() throws {
        guard next < chunks.count else { throw fail("ends early") }
        let chunk = chunks[next]
        before += current.count
        next += 1
        index = 0
        if chunk.range.count == chunk.rawLength {
            current = Array(file[chunk.range])
        } else {
            guard let output = ChunkCompression.decompress(Array(file[chunk.range]), length: chunk.rawLength) else {
                throw fail("chunk \(next - 1) is not an LZ4 block of \(chunk.rawLength) bytes")
            }
            current = output
        }
    }

    @inline(__always) mutating func u8() throws -> UInt8 {
        while index == current.count { try load() }
        defer { index += 1 }
        return current[index]
    }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try u8()
            guard shift < 64, shift < 63 || byte <= 1 else { throw fail("a number longer than 64 bits") }
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    mutating func svarint() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// A count or length, refused above `limit`.
    mutating func count(atMost limit: Int, _ what: String) throws -> Int {
        let value = try varint()
        guard value <= UInt64(limit) else { throw fail("\(what) \(value) is more than \(limit)") }
        return Int(value)
    }

    /// A 128-bit identifier's 16 big-endian bytes.
    mutating func id128() throws -> UInt128 {
        var value: UInt128 = 0
        for _ in 0..<16 { value = value << 8 | UInt128(try u8()) }
        return value
    }

    mutating func bytes(_ n: Int, into w: inout ByteWriter) throws {
        guard n <= remaining else { throw fail("\(n) bytes asked, \(remaining) left") }
        var left = n
        while left > 0 {
            while index == current.count { try load() }
            let take = min(left, current.count - index)
            w.bytes.append(contentsOf: current[index..<(index + take)])
            index += take
            left -= take
        }
    }

    mutating func bytes(_ n: Int) throws -> [UInt8] {
        guard n <= remaining else { throw fail("\(n) bytes asked, \(remaining) left") }
        var w = ByteWriter(capacity: n)
        try bytes(n, into: &w)
        return w.bytes
    }

    /// `width` bits (≤ 57), least significant first.
    mutating func bits(_ width: Int) throws -> UInt64 {
        guard width > 0 else { return 0 }
        while bitCount < width {
            bitBuffer |= UInt64(try u8()) << UInt64(bitCount)
            bitCount += 8
        }
        let value = bitBuffer & ((1 << UInt64(width)) - 1)
        bitBuffer >>= UInt64(width)
        bitCount -= width
        return value
    }

    /// Checks that nothing is left: no chunk unread, no byte after the last one read, and only
    /// zero bits padding a bit stream.
    func finish() throws {
        guard index == current.count, next == chunks.count else { throw fail("\(chunks[next...].reduce(current.count - index) { $0 + $1.rawLength }) bytes left over") }
        guard bitBuffer == 0 else { throw fail("padding bits set") }
    }
}

extension PackStream {
    /// The chunk table of `bytes` (raw and stored length of each chunk, as varints) and the
    /// chunks themselves.
    static func encode(_ bytes: [UInt8]) -> (table: [UInt8], data: [UInt8]) {
        var table = ByteWriter()
        var data: [UInt8] = []
        var chunks: [(raw: Int, stored: [UInt8])] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + maxChunk)
            let slice = Array(bytes[start..<end])
            let compressed = ChunkCompression.compress(slice)
            chunks.append((slice.count, compressed ?? slice))
            start = end
        }
        table.varint(UInt64(chunks.count))
        for chunk in chunks {
            table.varint(UInt64(chunk.raw))
            table.varint(UInt64(chunk.stored.count))
            data += chunk.stored
        }
        return (table.bytes, data)
    }
}
