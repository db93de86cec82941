/// The random 128-bit identifier of one log, written into every segment header, index and snapshot
/// file and mixed into every record checksum, so that bytes from another log (or a recycled file)
/// never validate.
public struct LogID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// A log ID from exactly 16 bytes; `nil` otherwise.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// A fresh random ID.
    public static func random() -> LogID {
        var generator = SystemRandomNumberGenerator()
        return LogID(unchecked: (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// Lower-case hex, 32 characters.
    public var description: String {
        bytes.map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}
