import Strata

/// An error of the sync engine, with the server's stable code when the server answered.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        // The server's codes (see the protocol article).
        public static let badRequest = Code("badRequest")
        public static let unauthorized = Code("unauthorized")
        public static let forbidden = Code("forbidden")
        public static let zoneNotFound = Code("zoneNotFound")
        public static let sequenceGap = Code("sequenceGap")
        /// The pushed replica belongs to another user (the engine takes a new replica ID).
        public static let replicaNotYours = Code("replicaNotYours")
        /// A pushed transaction differs from the one the zone holds under the same replica and
        /// sequences: this store was copied or restored (the engine forks it).
        public static let replicaForked = Code("replicaForked")
        /// The device's clock is further ahead of the server's than the server accepts: local
        /// edits wait (nothing is dropped) until the clock is right.
        public static let clockSkew = Code("clockSkew")
        public static let tokenExpired = Code("tokenExpired")
        public static let zoneReset = Code("zoneReset")
        /// The zone this device synced with was deleted on the server. It is recreated only when
        /// the app asks (``SyncEngine/recreateZone()``, `strata sync --recreate-zone`).
        public static let zoneDeleted = Code("zoneDeleted")
        /// The server holds less of the zone than this device has seen (restored from a backup,
        /// a lost disk): the engine pulls from the start and pushes what the server lacks.
        public static let zoneRewound = Code("zoneRewound")
        public static let tooLarge = Code("tooLarge")
        public static let rateLimited = Code("rateLimited")
        // The client's own.
        /// The server could not be reached or answered with something unexpected.
        public static let transport = Code("transport")
        /// The TLS handshake failed: the server's certificate is not trusted (self-signed, an
        /// unknown CA), has expired, or names another host. Not transient: retrying cannot fix
        /// it, and the client sends nothing — its token included — to a server it cannot verify.
        public static let untrustedServer = Code("untrustedServer")
        /// The server answered with bytes that do not decode.
        public static let malformedResponse = Code("malformedResponse")
        /// The store refused what the server sent (see the message).
        public static let store = Code("store")
        public static let stopped = Code("stopped")
    }

    public var code: Code
    public var message: String
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// For ``Code/sequenceGap``: the sequence the server expects next.
    public var expectedSequence: UInt64?
    /// For ``Code/rateLimited``: seconds to wait (the server's Retry-After).
    public var retryAfter: Double?
    /// For ``Code/replicaForked``: the first sequence whose transaction differs from the zone's;
    /// for ``Code/clockSkew``: the first sequence of the refused transaction.
    public var sequence: UInt64?
    /// For ``Code/clockSkew``: the server's time (milliseconds since 1970) and the largest lead it
    /// accepts (milliseconds).
    public var serverTime: UInt64?
    public var maxOffset: UInt64?

    public init(_ code: Code, _ message: String, status: Int? = nil, expectedSequence: UInt64? = nil, retryAfter: Double? = nil,
                sequence: UInt64? = nil, serverTime: UInt64? = nil, maxOffset: UInt64? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.expectedSequence = expectedSequence
        self.retryAfter = retryAfter
        self.sequence = sequence
        self.serverTime = serverTime
        self.maxOffset = maxOffset
    }

    /// Whether trying again later may succeed (network trouble, overload, server errors).
    public var isTransient: Bool {
        code == .transport || code == .rateLimited || (status.map { $0 >= 500 } ?? false)
    }

    public var description: String {
        "\(code)" + (status.map { " (HTTP \($0))" } ?? "") + ": \(message)"
    }
}
