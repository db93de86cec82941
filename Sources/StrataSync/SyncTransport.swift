public import Strata

/// The answer to a push.
public struct PushResult: Sendable, Hashable {
    /// The zone's change token after the append.
    public var token: String
    /// The highest sequence of the pushing replica the server now holds.
    public var acknowledged: UInt64

    public init(token: String, acknowledged: UInt64) {
        self.token = token
        self.acknowledged = acknowledged
    }
}

/// A page of a pull.
public struct PullResult: Sendable, Hashable {
    /// Encoded transactions, in the zone's log order.
    public var transactions: [[UInt8]]
    public var nextToken: String
    public var moreComing: Bool

    public init(transactions: [[UInt8]], nextToken: String, moreComing: Bool) {
        self.transactions = transactions
        self.nextToken = nextToken
        self.moreComing = moreComing
    }
}

/// How the engine talks to a log server: HTTP in production (``HTTPSyncTransport``), anything
/// that keeps the protocol's rules in simulations.
public protocol SyncTransport: Sendable {
    /// Creates the zone when it does not exist (private to the caller).
    func ensureZone(_ zone: String) async throws
    /// Pushes encoded transactions of one replica, contiguous in sequence.
    func push(zone: String, transactions: [[UInt8]]) async throws -> PushResult
    /// The transactions after `token` (`nil`: from the start); `wait` turns it into a long poll.
    func pull(zone: String, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult
    /// The zone's snapshot (a projection snapshot payload) and the token it corresponds to, or
    /// `nil` when the zone has none.
    func snapshot(zone: String) async throws -> ZoneSnapshotPayload?
}

/// A zone's state as the server serves it to clients whose token has expired.
public struct ZoneSnapshotPayload: Sendable, Hashable {
    public var payload: [UInt8]
    public var token: String

    public init(payload: [UInt8], token: String) {
        self.payload = payload
        self.token = token
    }
}

/// Frames of the protocol's bodies: a varint byte length, then the bytes, repeated.
enum Frames {
    static func encode(_ items: [[UInt8]]) -> [UInt8] {
        var w = ByteWriter(capacity: items.reduce(0) { $0 + $1.count + 5 })
        for item in items { w.lengthPrefixed(item) }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [[UInt8]] {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            var items: [[UInt8]] = []
            while r.remaining > 0 {
                guard let item = r.lengthPrefixed() else {
                    throw SyncError(.malformedResponse, "frame \(items.count) is truncated at byte \(r.offset)")
                }
                items.append(Array(item))
            }
            return items
        }
    }
}
