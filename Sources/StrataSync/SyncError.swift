import Strata
public import StrataProtocol

/// An error of the sync engine, with the server's stable code when the server answered.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The code of the protocol's `code` (`StrataProtocol.ErrorCode` says what each means).
        public init(_ code: ErrorCode) { self.init(code.name) }

        // The server's codes.
        public static let badRequest = Code(ErrorCode.badRequest)
        public static let unauthorized = Code(ErrorCode.unauthorized)
        public static let forbidden = Code(ErrorCode.forbidden)
        public static let zoneNotFound = Code(ErrorCode.zoneNotFound)
        public static let notFound = Code(ErrorCode.notFound)
        public static let sequenceGap = Code(ErrorCode.sequenceGap)
        /// The pushed replica belongs to another user (the engine takes a new replica ID).
        public static let replicaNotYours = Code(ErrorCode.replicaNotYours)
        /// A pushed transaction differs from the one the zone holds under the same replica and
        /// sequences: this store was copied or restored (the engine forks it).
        public static let replicaForked = Code(ErrorCode.replicaForked)
        /// The device's clock is further ahead of the server's than the server accepts: local
        /// edits wait (nothing is dropped) until the clock is right.
        public static let clockSkew = Code(ErrorCode.clockSkew)
        public static let tokenExpired = Code(ErrorCode.tokenExpired)
        public static let zoneReset = Code(ErrorCode.zoneReset)
        /// The server holds less of the zone than this device has seen (restored from a backup,
        /// a lost disk): the engine pulls from the start and pushes what the server lacks.
        public static let zoneRewound = Code(ErrorCode.zoneRewound)
        public static let tooLarge = Code(ErrorCode.tooLarge)
        public static let rateLimited = Code(ErrorCode.rateLimited)
        public static let quotaExceeded = Code(ErrorCode.quotaExceeded)
        public static let serverBusy = Code(ErrorCode.serverBusy)
        public static let storageFull = Code(ErrorCode.storageFull)
        public static let internalError = Code(ErrorCode.internalError)
        /// The zone this device synced with was deleted on the server. It is recreated only when
        /// the app asks (``SyncEngine/recreateZone()``, `strata sync --recreate-zone`).
        public static let zoneDeleted = Code("zoneDeleted")
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
