import Foundation
public import HTTPTypes
public import Hummingbird

/// An error answered to a client: an HTTP status and the JSON body of the sync protocol,
/// `{"error": {"code": "<code>", "message": "<what and where>"}}` with extra fields where useful
/// (`expected` for ``Code/sequenceGap``). ``Code/rateLimited`` and ``Code/serverBusy`` also set
/// `Retry-After`.
///
/// ```swift
/// throw ServerError(.zoneNotFound, "no zone named notes")
/// ```
public struct ServerError: Error, Sendable, Hashable, CustomStringConvertible, HTTPResponseError {
    /// The stable, machine-readable code of an error, and its status.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public let status: HTTPResponse.Status

        public init(_ name: String, status: HTTPResponse.Status) {
            self.name = name
            self.status = status
        }

        public var description: String { name }

        /// 400: a malformed body, token, parameter or zone name.
        public static let badRequest = Code("badRequest", status: .badRequest)
        /// 401: a missing or unknown bearer token.
        public static let unauthorized = Code("unauthorized", status: .unauthorized)
        /// 403: the zone exists but the caller may not do this.
        public static let forbidden = Code("forbidden", status: .forbidden)
        /// 404: no such zone.
        public static let zoneNotFound = Code("zoneNotFound", status: .notFound)
        /// 404: no such endpoint.
        public static let notFound = Code("notFound", status: .notFound)
        /// 403: a push of a replica that belongs to another user.
        public static let replicaNotYours = Code("replicaNotYours", status: .forbidden)
        /// 409: a push skips sequence numbers.
        public static let sequenceGap = Code("sequenceGap", status: .conflict)
        /// 409: a pushed transaction differs from the one the zone holds under the same replica
        /// and sequences (a copied or restored store): the client must fork (take a new replica
        /// ID) and re-author its transactions from `sequence` on.
        public static let replicaForked = Code("replicaForked", status: .conflict)
        /// 422: an event is stamped further ahead of the server's clock than it allows
        /// (`serverTime` and `maxOffset` say by how much).
        public static let clockSkew = Code("clockSkew", status: .unprocessableContent)
        /// 410: the token points before the history the server still holds.
        public static let tokenExpired = Code("tokenExpired", status: .gone)
        /// 410: the token points past the zone's end: the server holds less than the client has
        /// seen (restored from a backup, a lost disk). The client pulls from the start and
        /// pushes what the server lacks.
        public static let zoneRewound = Code("zoneRewound", status: .gone)
        /// 410: the token's epoch is not the zone's (deleted and recreated).
        public static let zoneReset = Code("zoneReset", status: .gone)
        /// 413: the body exceeds the server's limit.
        public static let tooLarge = Code("tooLarge", status: .contentTooLarge)
        /// 429: over the per-user rate, or too many failed authentications from the client's
        /// address (`Retry-After` says when to come back).
        public static let rateLimited = Code("rateLimited", status: .tooManyRequests)
        /// 503: the server is at a resource limit — its upload memory budget or its connection
        /// cap — and did not take the request; nothing changed. `Retry-After` says when to try again.
        public static let serverBusy = Code("serverBusy", status: .serviceUnavailable)
        /// 403: the request would take the user over a quota (zones per user, grants per zone,
        /// stored bytes per user); nothing was changed. The message names the quota, its limit and
        /// the current use.
        public static let quotaExceeded = Code("quotaExceeded", status: .forbidden)
        /// 507: the server's disk is full; nothing of the request was kept. Retry later: the
        /// server recovers by itself once space returns.
        public static let storageFull = Code("storageFull", status: HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"))
        /// 500: the server failed; nothing the client did.
        public static let internalError = Code("internalError", status: .internalServerError)
    }

    public var code: Code
    public var message: String
    /// For ``Code/sequenceGap``: the sequence the server expects next.
    public var expected: UInt64?
    /// For ``Code/rateLimited`` and ``Code/serverBusy``: whole seconds until the client may come back.
    public var retryAfter: Int?
    /// For ``Code/replicaForked``: the first sequence whose transaction differs.
    public var sequence: UInt64?
    /// For ``Code/clockSkew``: the server's time (milliseconds since 1970) and the largest lead
    /// it accepts (milliseconds).
    public var serverTime: UInt64?
    public var maxOffset: UInt64?

    public init(_ code: Code, _ message: String, expected: UInt64? = nil, retryAfter: Int? = nil,
                sequence: UInt64? = nil, serverTime: UInt64? = nil, maxOffset: UInt64? = nil) {
        self.code = code
        self.message = message
        self.expected = expected
        self.retryAfter = retryAfter
        self.sequence = sequence
        self.serverTime = serverTime
        self.maxOffset = maxOffset
    }

    public var status: HTTPResponse.Status { code.status }

    public var description: String { "\(code.name) (\(code.status.code)): \(message)" }

    private struct Body: Encodable {
        struct Detail: Encodable {
            var code: String
            var message: String
            var expected: UInt64?
            var retryAfter: Int?
            var sequence: UInt64?
            var serverTime: UInt64?
            var maxOffset: UInt64?
        }
        var error: Detail
    }

    /// The error's JSON body.
    public var jsonBody: [UInt8] {
        let body = Body(error: .init(code: code.name, message: message, expected: expected, retryAfter: retryAfter,
                                     sequence: sequence, serverTime: serverTime, maxOffset: maxOffset))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(body))) ?? Array(#"{"error":{"code":"internalError","message":"unencodable error"}}"#.utf8)
    }

    /// The HTTP response of the error.
    public var response: Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: jsonBody)))
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response
    }
}

extension ServerError {
    /// The answer to a storage error.
    public init(_ error: ZoneStorageError) {
        switch error.code {
        case .zoneNotFound: self.init(.zoneNotFound, error.message)
        case .zoneExists: self.init(.badRequest, error.message)
        case .zoneReset: self.init(.zoneReset, error.message)
        case .sequenceGap: self.init(.sequenceGap, error.message, expected: error.expected)
        case .replicaNotYours: self.init(.replicaNotYours, error.message)
        case .replicaForked: self.init(.replicaForked, error.message, sequence: error.sequence)
        case .positionRetired: self.init(.tokenExpired, error.message)
        case .positionBeyondEnd: self.init(.zoneRewound, error.message)
        case .tooLarge: self.init(.tooLarge, error.message)
        case .invalidArgument: self.init(.badRequest, error.message)
        case .quotaExceeded: self.init(.quotaExceeded, error.message)
        case .storageFull: self.init(.storageFull, "the server's storage is full; nothing of this request was kept; try again later")
        default: self.init(.internalError, "the server's storage failed; try again later")
        }
    }

    /// The answer to a change token that was refused.
    public init(_ error: ChangeTokenError) {
        switch error.code {
        case .zoneReset: self.init(.zoneReset, error.message)
        case .expired: self.init(.tokenExpired, error.message)
        case .beyondEnd: self.init(.zoneRewound, error.message + ": the server holds less than this client has seen (restored from a backup?); pull from the start and push what it lacks")
        default: self.init(.badRequest, error.message)
        }
    }
}
