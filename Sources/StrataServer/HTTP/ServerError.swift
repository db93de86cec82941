import Foundation
public import HTTPTypes
public import Hummingbird
public import StrataProtocol

/// An error answered to a client: an HTTP status and the JSON body of the sync protocol,
/// `{"error": {"code": "<code>", "message": "<what and where>"}}` with extra fields where useful
/// (`expected` for `ErrorCode.sequenceGap`). `ErrorCode.rateLimited` and `ErrorCode.serverBusy`
/// also set `Retry-After`.
///
/// ```swift
/// throw ServerError(.zoneNotFound, "no zone named notes")
/// ```
public struct ServerError: Error, Sendable, Hashable, CustomStringConvertible, HTTPResponseError {
    /// The stable, machine-readable code and its status: the protocol's own (`ErrorCode`), so
    /// that server and client share one list.
    public var code: ErrorCode
    public var message: String
    /// For `ErrorCode.sequenceGap`: the sequence the server expects next.
    public var expected: UInt64?
    /// For `ErrorCode.rateLimited` and `ErrorCode.serverBusy`: whole seconds until the client may come back.
    public var retryAfter: Int?
    /// For `ErrorCode.replicaForked`: the first sequence whose transaction differs.
    public var sequence: UInt64?
    /// For `ErrorCode.clockSkew`: the server's time (milliseconds since 1970) and the largest lead
    /// it accepts (milliseconds).
    public var serverTime: UInt64?
    public var maxOffset: UInt64?
    /// For `ErrorCode.assetMissing`: the assets (SHA-256 hex) the zone does not hold.
    public var assets: [String]?
    /// For `ErrorCode.unauthorized`: why a bearer JWT was refused (`AuthRefusalReason`).
    public var reason: AuthRefusalReason?
    /// For `ErrorCode.schemaTooOld`: the zone's oldest supported schema version.
    public var minSchemaVersion: Int?

    public init(_ code: ErrorCode, _ message: String, expected: UInt64? = nil, retryAfter: Int? = nil,
                sequence: UInt64? = nil, serverTime: UInt64? = nil, maxOffset: UInt64? = nil, assets: [String]? = nil,
                reason: AuthRefusalReason? = nil) {
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

    /// The HTTP status of ``code``.
    public var status: HTTPResponse.Status {
        // HTTPTypes knows no reason phrase for 507.
        code.status == 507 ? HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage") : HTTPResponse.Status(code: code.status)
    }

    public var description: String { "\(code.name) (\(code.status)): \(message)" }

    /// The error's JSON body.
    public var jsonBody: [UInt8] {
        let body = ErrorEnvelope(error: .init(code: code.name, message: message, expected: expected, retryAfter: retryAfter,
                                              sequence: sequence, serverTime: serverTime, maxOffset: maxOffset, assets: assets,
                                              reason: reason?.name, minSchemaVersion: minSchemaVersion))
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
        case .forbidden: self.init(.forbidden, error.message)
        case .replicaForked: self.init(.replicaForked, error.message, sequence: error.sequence)
        case .unheldAdd: self.init(.unheldAdd, error.message, sequence: error.sequence)
        case .positionRetired: self.init(.tokenExpired, error.message)
        case .positionBeyondEnd: self.init(.zoneRewound, error.message)
        case .tooLarge: self.init(.tooLarge, error.message)
        case .invalidArgument: self.init(.badRequest, error.message)
        case .quotaExceeded: self.init(.quotaExceeded, error.message)
        case .assetMismatch: self.init(.assetMismatch, error.message)
        case .storageFull: self.init(.storageFull, "the server's storage is full; nothing of this request was kept; try again later")
        case .storageUnavailable:
            self.init(.serverBusy, "the server's storage cannot be reached for now; nothing of this request was done; try again shortly", retryAfter: 1)
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
