/// A 128-bit fingerprint of one item (an event's content, an object's state): the first 16
/// bytes of the SHA-256 of its canonical encoding.
public struct Fingerprint: Hashable, Sendable, Codable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The fingerprint of `bytes`.
    package init(of bytes: [UInt8]) {
        let (high, low) = bytes.withUnsafeBytes { SHA256Hasher.prefix128(of: $0) }
        self.init(high: high, low: low)
    }

    public var description: String { Hex.encode(bigEndianBytes(high) + bigEndianBytes(low)) }
}

/// The digest of a set of items: how many there are and the sum of their fingerprints modulo
/// 2^128.
///
/// Why a sum and not a hash chain: a sum does not depend on the order the items were seen in
/// (two devices apply the same events in different orders), it is updated as items are added,
/// and the digest of any range of a sorted list is a difference of two prefix sums, so one side
/// answers "the digest of these 16 ranges" without walking them. The price: a sum of 128-bit
/// fingerprints finds accidental divergence (a lost event, a forked replica, a bit flipped before
/// the checksum), not a forger's — who could make items whose fingerprints add up to the same
/// sum. A device can lie about its digests anyway; they are a debugging aid, never an
/// authorization.
public struct DigestSum: Hashable, Sendable, Codable, CustomStringConvertible {
    public var count: UInt64
    public var high: UInt64
    public var low: UInt64

    public init(count: UInt64 = 0, high: UInt64 = 0, low: UInt64 = 0) {
        self.count = count
        self.high = high
        self.low = low
    }

    public static let zero = DigestSum()

    public mutating func add(_ fingerprint: Fingerprint) {
        let (low, carry) = self.low.addingReportingOverflow(fingerprint.low)
        self.low = low
        high = high &+ fingerprint.high &+ (carry ? 1 : 0)
        count &+= 1
    }

    public static func + (a: DigestSum, b: DigestSum) -> DigestSum {
        let (low, carry) = a.low.addingReportingOverflow(b.low)
        return DigestSum(count: a.count &+ b.count, high: a.high &+ b.high &+ (carry ? 1 : 0), low: low)
    }

    public static func - (a: DigestSum, b: DigestSum) -> DigestSum {
        let (low, borrow) = a.low.subtractingReportingOverflow(b.low)
        return DigestSum(count: a.count &- b.count, high: a.high &- b.high &- (borrow ? 1 : 0), low: low)
    }

    public var description: String { "\(count):" + Hex.encode(bigEndianBytes(high) + bigEndianBytes(low)) }
}

private func bigEndianBytes(_ value: UInt64) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}
