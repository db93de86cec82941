public import Foundation
import Synchronization
import CSystemRandom
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A 128-bit identifier, written as a lower-case UUID string.
public protocol Identifier128: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    var rawValue: UInt128 { get }
    init(rawValue: UInt128)
}

extension Identifier128 {
    /// A fresh random identifier: 128 bits from the operating system's cryptographically secure
    /// generator (drawn in blocks, see `SecureRandomPool`).
    public static func random() -> Self {
        let (high, low) = SecureRandomPool.next128()
        return Self(rawValue: UInt128(high) << 64 | UInt128(low))
    }

    public init(uuid: UUID) {
        let b = uuid.uuid
        let bytes = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7, b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15]
        self.init(bytes: bytes)
    }

    /// From 16 big-endian bytes (the order of a UUID's text).
    public init(bytes: some Collection<UInt8>) {
        var value: UInt128 = 0
        for byte in bytes.prefix(16) { value = value << 8 | UInt128(byte) }
        self.init(rawValue: value)
    }

    /// From 16 big-endian bytes in place (what the decoders read): two loads rather than a loop
    /// over a generic collection. The same value as the generic initializer for any input.
    public init(bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 16 else {
            self.init(bytes: bytes.lazy.map { $0 })
            return
        }
        let high = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let low = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        self.init(rawValue: UInt128(high) << 64 | UInt128(low))
    }

    public var bytes: [UInt8] { (0..<16).map { UInt8(truncatingIfNeeded: rawValue >> (8 * (15 - $0))) } }

    public var uuid: UUID {
        let b = bytes
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    /// From a UUID string (any case); `nil` when it is not one.
    public init?(_ description: String) {
        guard let uuid = UUID(uuidString: description) else { return nil }
        self.init(uuid: uuid)
    }

    public var description: String { uuid.uuidString.lowercased() }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a UUID: \(text)"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// The identity of an object, chosen by the client that inserts it.
public struct ObjectID: Identifier128 {
    // Two words rather than a UInt128: 8-byte alignment keeps every value that holds an ID small.
    package let high: UInt64
    package let low: UInt64
    public var rawValue: UInt128 { UInt128(high) << 64 | UInt128(low) }
    public init(rawValue: UInt128) {
        high = UInt64(truncatingIfNeeded: rawValue >> 64)
        low = UInt64(truncatingIfNeeded: rawValue)
    }
    /// A fresh random object ID.
    public init() { self = .random() }
}

/// The identity of a store (a replica): every event it authors carries it.
public struct ReplicaID: Identifier128 {
    // Two words rather than a UInt128: 8-byte alignment keeps every value that holds an ID small.
    package let high: UInt64
    package let low: UInt64
    public var rawValue: UInt128 { UInt128(high) << 64 | UInt128(low) }
    public init(rawValue: UInt128) {
        high = UInt64(truncatingIfNeeded: rawValue >> 64)
        low = UInt64(truncatingIfNeeded: rawValue)
    }
}

/// The identity of an event: its replica and that replica's sequence number (from 1, strictly
/// increasing).
public struct EventID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var replica: ReplicaID
    public var sequence: UInt64

    public init(replica: ReplicaID, sequence: UInt64) {
        self.replica = replica
        self.sequence = sequence
    }

    public static func < (a: EventID, b: EventID) -> Bool {
        (a.replica, a.sequence) < (b.replica, b.sequence)
    }

    public var description: String { "\(replica)#\(sequence)" }
}

/// Random words for identifiers, taken from the operating system's CSPRNG 4 KiB at a time (one
/// `getrandom`, or `arc4random_buf`, per 256 identifiers instead of one or two system calls each).
/// The words are the kernel's output as it is, each handed out once, so identifiers stay as
/// unpredictable as before. Thread-safe; a forked child discards what its parent had buffered.
package enum SecureRandomPool {
    private static let words = 512  // 4 KiB
    private struct Pool {
        var buffer: [UInt64] = []
        var next = 0
        var forks: UInt64 = 0
    }
    private static let pool = Mutex(Pool())
    /// Bumped in a forked child (`pthread_atfork`), so that it never reuses the parent's words.
    fileprivate static let forks = Atomic<UInt64>(0)
    private static let registered: Bool = {
        #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
        pthread_atfork(nil, nil, { SecureRandomPool.forks.add(1, ordering: .relaxed) })
        #endif
        return true
    }()

    package static func next128() -> (UInt64, UInt64) {
        _ = registered
        let forks = forks.load(ordering: .relaxed)
        return pool.withLock { p in
            if p.next + 2 > p.buffer.count || p.forks != forks {
                refill(&p.buffer)
                p.next = 0
                p.forks = forks
            }
            defer { p.next += 2 }
            return (p.buffer[p.next], p.buffer[p.next + 1])
        }
    }

    private static func refill(_ buffer: inout [UInt64]) {
        if buffer.count != words { buffer = [UInt64](repeating: 0, count: words) }
        buffer.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            var filled = 0
            while filled < raw.count {
                // Above 256 bytes a signal may interrupt getrandom part way: take what came and go on.
                let n = strata_system_random(base + filled, raw.count - filled)
                if n > 0 {
                    filled += n
                } else if n < 0 && errno != EINTR && errno != EAGAIN {
                    // No such call (an ancient kernel, another system): the standard library's generator.
                    var g = SystemRandomNumberGenerator()
                    for i in stride(from: filled & ~7, to: raw.count, by: 8) {
                        raw.storeBytes(of: g.next() as UInt64, toByteOffset: i, as: UInt64.self)
                    }
                    filled = raw.count
                }
            }
        }
    }
}

