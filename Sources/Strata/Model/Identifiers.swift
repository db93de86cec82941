public import Foundation

/// A 128-bit identifier, written as a lower-case UUID string.
public protocol Identifier128: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    var rawValue: UInt128 { get }
    init(rawValue: UInt128)
}

extension Identifier128 {
    /// A fresh random identifier.
    public static func random() -> Self {
        var g = SystemRandomNumberGenerator()
        return Self(rawValue: UInt128(g.next() as UInt64) << 64 | UInt128(g.next() as UInt64))
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
    let high: UInt64
    let low: UInt64
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
    let high: UInt64
    let low: UInt64
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
