import Strata
public import StrataCore
public import StrataProtocol

/// An error of the sync engine: the server's code when the server answered (a
/// `StrataProtocol.ErrorCode`, compared and thrown as it is), or one of the client's own
/// conditions (``Code/transport``, ``Code/untrustedServer``, ``Code/zoneDeleted`` …).
///
/// ```swift
/// do {
///     try await engine.sync()
/// } catch let error as SyncError where error.code == .unauthorized {
///     showSignInPrompt()       // a protocol code (ErrorCode.unauthorized)
/// } catch let error as SyncError where error.code == .transport {
///     showOfflineBadge()       // a client condition (SyncError.Code.transport)
/// }
/// ```
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The code of a ``SyncError``, by name: a protocol code's name (``protocolCode`` gives it
    /// back as the `StrataProtocol.ErrorCode` the server answered), a name a newer server
    /// answered that this client does not know (kept as it is), or one of the client's own
    /// conditions declared here. A code compares equal to the `ErrorCode` of the same name, so
    /// `error.code == .clockSkew` reads the protocol's list; that list is not repeated here.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The code of the protocol's `code` (`StrataProtocol.ErrorCode` says what each means).
        public init(_ code: ErrorCode) { self.init(code.name) }

        /// The protocol's code of this name; `nil` for the client's own conditions and for
        /// names this client does not know.
        public var protocolCode: ErrorCode? { ErrorCode.all.first { $0.name == name } }

        // The client's own conditions (never a server's answer).
        /// The zone this device synced with was deleted on the server — or deleted and created
        /// again as a new zone (the message says which), into which nothing of this store is
        /// pushed. The zone's owner can bring this store's contents back (into the deleted zone
        /// recreated, continuing it, or into the new one) with ``SyncEngine/recreateZone()``
        /// (`strata sync --recreate-zone`); to drop them, open a new store (a new directory) and
        /// sync that with the zone — the old store keeps its data and can still be read.
        public static let zoneDeleted = Code("zoneDeleted")
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
        /// The server's answer calls for what only a store opened exclusively may do — a fork
        /// (this store is a copy of another that pushed first: a restored backup) or an adopted
        /// snapshot (the zone's history this store needs has expired) — and this store is shared
        /// by processes (`StoreSharing.processes`). Nothing was changed, the sync cursor
        /// included. Close the store in every process, open it exclusively, sync once, and share
        /// it again.
        public static let exclusiveAccessRequired = Code("exclusiveAccessRequired")
        /// A database sync was asked for from inside one of the same engine's rounds (a hook
        /// that runs during a sync, such as `whenRemovingZone`): it would wait for the round it
        /// is part of. Sync once the hook has returned.
        public static let reentrantSync = Code("reentrantSync")
        /// The engine was made with another ``SyncOptions/downloadMask`` than the one its store
        /// downloaded the zone with (as the store recorded it; or the record is damaged, and the
        /// mask unknown): what the store holds would not match the new mask, so nothing is synced. Download the zone again into a new store —
        /// `DatabaseSyncEngine` does it itself, after pushing the zone's unpushed edits.
        public static let downloadMaskChanged = Code("downloadMaskChanged")
        public static let stopped = Code("stopped")

        /// Whether `code` is the protocol's `ErrorCode` of the same name.
        public static func == (code: Code, protocolCode: ErrorCode) -> Bool { code.name == protocolCode.name }
        /// Whether `code` is not the protocol's `ErrorCode` of the same name.
        public static func != (code: Code, protocolCode: ErrorCode) -> Bool { code.name != protocolCode.name }
        /// Matches a protocol code in a `switch` over a ``SyncError/code``.
        public static func ~= (protocolCode: ErrorCode, code: Code) -> Bool { code.name == protocolCode.name }
    }

    public var code: Code
    public var message: String
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// For `sequenceGap`: the sequence the server expects next.
    public var expectedSequence: UInt64?
    /// For `rateLimited` and `serverBusy`: seconds to wait (the server's Retry-After).
    public var retryAfter: Double?
    /// For `replicaForked`: the first sequence whose transaction differs from the zone's; for
    /// `clockSkew` and `unheldAdd`: the first sequence of the refused transaction.
    public var sequence: UInt64?
    /// For `clockSkew`: the server's time (milliseconds since 1970) and the largest lead it
    /// accepts (milliseconds).
    public var serverTime: UInt64?
    public var maxOffset: UInt64?
    /// For `assetMissing`: the assets the zone does not hold (the server names them; what a
    /// newer or broken server sends that is not a SHA-256 in lower-case hex is left out).
    public var assets: [AssetHash]?
    /// For `schemaTooOld`: the zone's oldest supported app schema version (update the app to it
    /// or later; its edits stay on the device meanwhile).
    public var minSchemaVersion: Int?

    /// An error with one of the client's own codes, or a code by name.
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

    /// An error with the protocol's code, as a server answers it (transports, and transports
    /// of tests, make these).
    public init(_ code: ErrorCode, _ message: String, status: Int? = nil, expectedSequence: UInt64? = nil, retryAfter: Double? = nil,
                sequence: UInt64? = nil, serverTime: UInt64? = nil, maxOffset: UInt64? = nil) {
        self.init(Code(code), message, status: status, expectedSequence: expectedSequence, retryAfter: retryAfter,
                  sequence: sequence, serverTime: serverTime, maxOffset: maxOffset)
    }

    /// Whether trying again later may succeed (network trouble, overload, server errors).
    public var isTransient: Bool {
        code == .transport || code == .rateLimited || (status.map { $0 >= 500 } ?? false)
    }

    public var description: String {
        "\(code)" + (status.map { " (HTTP \($0))" } ?? "") + ": \(message)"
    }
}

/// Whether `code` is set and is the protocol's `ErrorCode` of the same name (as in
/// `status.lastError?.code == .unauthorized`).
public func == (code: SyncError.Code?, protocolCode: ErrorCode) -> Bool { code?.name == protocolCode.name }

/// Whether `code` is unset or not the protocol's `ErrorCode` of the same name.
public func != (code: SyncError.Code?, protocolCode: ErrorCode) -> Bool { code?.name != protocolCode.name }
