/// An error code of the sync protocol: the name a server answers in
/// `{"error": {"code": "<name>", "message": …}}` and the HTTP status it answers it with. The one
/// list both sides use: the server's `ServerError` codes and the client's `SyncError` codes are
/// made from these.
public struct ErrorCode: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    /// The HTTP status code.
    public let status: Int

    public init(_ name: String, status: Int) {
        self.name = name
        self.status = status
    }

    public var description: String { name }

    /// A malformed body, token, parameter or zone name.
    public static let badRequest = ErrorCode("badRequest", status: 400)
    /// A missing or unknown bearer token.
    public static let unauthorized = ErrorCode("unauthorized", status: 401)
    /// The zone exists but the caller may not do this.
    public static let forbidden = ErrorCode("forbidden", status: 403)
    /// A push of a replica that belongs to another user.
    public static let replicaNotYours = ErrorCode("replicaNotYours", status: 403)
    /// The request would take the user over a quota (zones per user, grants per zone, stored
    /// bytes per user); nothing was changed.
    public static let quotaExceeded = ErrorCode("quotaExceeded", status: 403)
    /// No such zone.
    public static let zoneNotFound = ErrorCode("zoneNotFound", status: 404)
    /// No such endpoint (or no snapshot of a zone never compacted).
    public static let notFound = ErrorCode("notFound", status: 404)
    /// A push skips sequence numbers (`expected` says which one comes next).
    public static let sequenceGap = ErrorCode("sequenceGap", status: 409)
    /// A pushed transaction differs from the one the zone holds under the same replica and
    /// sequences (a copied or restored store): the client forks from `sequence` on.
    public static let replicaForked = ErrorCode("replicaForked", status: 409)
    /// The token points before the history the server still holds, or was handed out before a
    /// state was merged: the client adopts the zone's snapshot.
    public static let tokenExpired = ErrorCode("tokenExpired", status: 410)
    /// The token's epoch is not the zone's (deleted and recreated).
    public static let zoneReset = ErrorCode("zoneReset", status: 410)
    /// The server holds less than the client has seen (restored from a backup, a lost disk).
    public static let zoneRewound = ErrorCode("zoneRewound", status: 410)
    /// A pushed remove names an add of another replica that the zone does not hold (one that
    /// does not exist yet, or one a restored zone lost; `sequence` is the refused transaction's
    /// first). The edits stay pending and are pushed again with each sync: they go through once
    /// the zone holds the add (its replica pushes it again); if it never does, they wait for good.
    public static let unheldAdd = ErrorCode("unheldAdd", status: 422)
    /// A push names assets the zone does not hold (`assets` lists them): upload them to the zone
    /// first (``StrataEndpoint/asset(_:)``). Nothing of the push was appended.
    public static let assetMissing = ErrorCode("assetMissing", status: 409)
    /// No asset by that hash in this zone — absent, or held only by zones the caller cannot read:
    /// the same answer, so that a hash tells nobody what exists.
    public static let assetNotFound = ErrorCode("assetNotFound", status: 404)
    /// An uploaded chunk is not what the manifest says (its hash or length), or every chunk is
    /// but together they are not the asset's hash: nothing of it was kept.
    public static let assetMismatch = ErrorCode("assetMismatch", status: 422)
    /// The request names (``StrataHeader/user``) another user than the one its token signs in:
    /// a device's database belongs to one user, and another user signed in on it must not sync
    /// it. Nothing was done.
    public static let anotherUser = ErrorCode("anotherUser", status: 409)
    /// The body exceeds the server's limit.
    public static let tooLarge = ErrorCode("tooLarge", status: 413)
    /// An event stamped further ahead of the server's clock than it accepts (`serverTime`,
    /// `maxOffset`).
    public static let clockSkew = ErrorCode("clockSkew", status: 422)
    /// The client's schema version (`Strata-Schema-Version`, 1 when absent) is older than the
    /// zone's oldest supported one (`minSchemaVersion`): the app must update before it syncs the
    /// zone again. Nothing was done; its edits stay on the device.
    public static let schemaTooOld = ErrorCode("schemaTooOld", status: 426)
    /// Over the per-user rate, or too many failed authentications (`Retry-After`).
    public static let rateLimited = ErrorCode("rateLimited", status: 429)
    /// The server failed; nothing the client did.
    public static let internalError = ErrorCode("internalError", status: 500)
    /// The server is at a resource limit and did not take the request (`Retry-After`).
    public static let serverBusy = ErrorCode("serverBusy", status: 503)
    /// The server's disk is full; nothing of the request was kept.
    public static let storageFull = ErrorCode("storageFull", status: 507)

    /// Every code of the protocol.
    public static let all: [ErrorCode] = [
        .badRequest, .unauthorized, .forbidden, .replicaNotYours, .quotaExceeded, .zoneNotFound, .notFound, .sequenceGap,
        .replicaForked, .tokenExpired, .zoneReset, .zoneRewound, .tooLarge, .clockSkew, .unheldAdd, .rateLimited, .internalError,
        .serverBusy, .storageFull, .assetMissing, .assetNotFound, .assetMismatch, .anotherUser, .schemaTooOld,
    ]
}

/// The body of every error answer: `{"error": {"code", "message", "expected"?, "retryAfter"?,
/// "sequence"?, "serverTime"?, "maxOffset"?, "assets"?, "reason"?}}`.
public struct ErrorEnvelope: Sendable, Hashable, Codable {
    public struct Detail: Sendable, Hashable, Codable {
        /// An ``ErrorCode`` name (clients keep unknown names as they are).
        public var code: String
        public var message: String
        /// For `sequenceGap`: the sequence the server expects next.
        public var expected: UInt64?
        /// For `rateLimited` and `serverBusy`: whole seconds until the client may come back
        /// (also in `Retry-After`).
        public var retryAfter: Int?
        /// For `replicaForked`: the first sequence whose transaction differs; for `clockSkew`:
        /// the first sequence of the refused transaction.
        public var sequence: UInt64?
        /// For `clockSkew`: the server's time (ms since 1970) and the largest lead it accepts (ms).
        public var serverTime: UInt64?
        public var maxOffset: UInt64?
        /// For `assetMissing`: the SHA-256 (hex) of each asset the zone does not hold.
        public var assets: [String]?
        /// For `unauthorized`: why a bearer JWT was refused, an ``AuthRefusalReason`` name
        /// (absent for a missing or unknown static token).
        public var reason: String?
        /// For `schemaTooOld`: the zone's oldest supported schema version.
        public var minSchemaVersion: Int?

        public init(code: String, message: String, expected: UInt64? = nil, retryAfter: Int? = nil, sequence: UInt64? = nil,
                    serverTime: UInt64? = nil, maxOffset: UInt64? = nil, assets: [String]? = nil, reason: String? = nil,
                    minSchemaVersion: Int? = nil) {
            self.minSchemaVersion = minSchemaVersion
            self.reason = reason
            self.assets = assets
            self.code = code
            self.message = message
            self.expected = expected
            self.retryAfter = retryAfter
            self.sequence = sequence
            self.serverTime = serverTime
            self.maxOffset = maxOffset
        }
    }

    public var error: Detail

    public init(error: Detail) { self.error = error }
}

/// Why a bearer JWT was refused: the `reason` of an `unauthorized` (401) answer. The code stays
/// `unauthorized`, so that a client refreshes its token on any of them; the reason tells a
/// client (and the server's log) which check failed.
///
/// ```swift
/// if envelope.error.reason == AuthRefusalReason.expired.name { /* sign in again */ }
/// ```
public struct AuthRefusalReason: Hashable, Sendable, CustomStringConvertible {
    public let name: String

    public init(_ name: String) { self.name = name }

    public var description: String { name }

    /// The token's `exp` is past (beyond the issuer's clock leeway).
    public static let expired = AuthRefusalReason("expired")
    /// The token's `nbf` or `iat` is still ahead (beyond the issuer's clock leeway).
    public static let notYetValid = AuthRefusalReason("notYetValid")
    /// No configured issuer has the token's `iss`.
    public static let wrongIssuer = AuthRefusalReason("wrongIssuer")
    /// The token's `aud` names no audience of its issuer, or one the issuer does not accept.
    public static let wrongAudience = AuthRefusalReason("wrongAudience")
    /// The token's `kid` names no key of its issuer, even after the issuer's keys were read again.
    public static let unknownKey = AuthRefusalReason("unknownKey")
    /// The signature is not the key's over the token's header and payload.
    public static let badSignature = AuthRefusalReason("badSignature")
    /// The token's `alg` is not one its issuer is configured with (`none` and `HS*` never are).
    public static let algorithmNotAllowed = AuthRefusalReason("algorithmNotAllowed")
    /// Not a JWT that can be read: bad base64url or JSON, no `alg`, no `exp`, or a time claim
    /// that is not a number.
    public static let malformed = AuthRefusalReason("malformed")
    /// The claim naming the user (by default `sub`) is absent, empty, or not a usable name.
    public static let missingUserClaim = AuthRefusalReason("missingUserClaim")

    /// Every reason.
    public static let all: [AuthRefusalReason] = [
        .expired, .notYetValid, .wrongIssuer, .wrongAudience, .unknownKey, .badSignature, .algorithmNotAllowed, .malformed, .missingUserClaim,
    ]
}
