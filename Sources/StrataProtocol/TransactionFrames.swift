/// The body format of push and pull (`application/x-strata-transactions`): frames, each an
/// unsigned LEB128 `varint` byte length followed by that many bytes of one transaction in the
/// encoding of `TransactionRecord.encoded()`.
///
/// ```swift
/// let body = TransactionFrames.encode([tx1.encoded(), tx2.encoded()])
/// let frames = try TransactionFrames.decode(body)   // [tx1 bytes, tx2 bytes]
/// ```
public enum TransactionFrames {
    /// The media type of framed transactions.
    public static let mediaType = "application/x-strata-transactions"

    /// Frames `transactions`.
    public static func encode(_ transactions: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(transactions.reduce(0) { $0 + $1.count + 3 })
        for bytes in transactions { append(bytes, to: &out) }
        return out
    }

    /// Appends one frame to `out`.
    public static func append(_ transaction: [UInt8], to out: inout [UInt8]) {
        var length = UInt64(transaction.count)
        while length >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: length) | 0x80)
            length >>= 7
        }
        out.append(UInt8(length))
        out.append(contentsOf: transaction)
    }

    /// Splits a body into its frames.
    ///
    /// - Throws: ``TransactionFramesError`` naming the frame index and byte offset when a length
    ///   is truncated, too long, or runs past the end of the body.
    public static func decode(_ body: [UInt8]) throws(TransactionFramesError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var offset = 0
        while offset < body.count {
            let frameStart = offset
            var length: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard offset < body.count else {
                    throw TransactionFramesError(frame: frames.count, offset: frameStart, "the length varint is truncated")
                }
                let byte = body[offset]
                offset += 1
                guard shift < 63 || (shift == 63 && byte <= 1) else {
                    throw TransactionFramesError(frame: frames.count, offset: frameStart, "the length varint is longer than 64 bits")
                }
                length |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            guard length <= UInt64(body.count - offset) else {
                throw TransactionFramesError(frame: frames.count, offset: frameStart,
                                             "the frame announces \(length) bytes but only \(body.count - offset) remain")
            }
            let end = offset + Int(length)
            frames.append(Array(body[offset..<end]))
            offset = end
        }
        return frames
    }
}

/// A body that does not split into frames.
public struct TransactionFramesError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The index of the frame that is wrong (0 for the first).
    public var frame: Int
    /// The byte offset in the body where that frame starts.
    public var offset: Int
    public var message: String

    public init(frame: Int, offset: Int, _ message: String) {
        self.frame = frame
        self.offset = offset
        self.message = message
    }

    public var description: String { "frame \(frame) at byte \(offset): \(message)" }
}
