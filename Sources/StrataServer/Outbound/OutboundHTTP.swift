import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/1.1 request from the server over SwiftNIO (its own event loops; FoundationNetworking
/// is kept out of the server): the fetch of a JWT issuer's JWKS, a webhook's delivery. The whole
/// exchange is bounded by a time and the answer's body by a size; a redirect is never followed.
enum OutboundHTTP {
    /// Why a request failed, for the message of the caller's error.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// An answer: its status and (at most `limit` bytes of) its body.
    struct Answer: Sendable {
        var status: Int
        var body: [UInt8]
    }

    /// Sends one request and reads its answer, all within `timeout`. A body of more than `limit`
    /// bytes fails the request; with `keepingBody` false the body is read and dropped, whatever
    /// its size (the status is all the caller wants).
    static func send(_ method: HTTPMethod, _ url: URL, headers: [(String, String)] = [], body: [UInt8]? = nil,
                     limit: Int, timeout: Duration, keepingBody: Bool = true) async throws -> Answer {
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty else {
            throw Failure(description: "not an http(s) URL")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        var target = url.path.isEmpty ? "/" : url.path
        if let query = url.query { target += "?" + query }
        let tls = scheme == "https" ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        // An address is not a name to check a certificate against (nor to send as SNI).
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        // At most a day: a larger timeout would only overflow the conversions below.
        let timeout = min(max(timeout, .milliseconds(1)), .seconds(86_400))
        let seconds = Int64(timeout.components.seconds)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(max(1, seconds)))
            .connect(host: host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : host))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        // The whole exchange within the timeout: closing the channel ends a stalled read. Scheduled
        // on the channel's event loop, not as a task: a busy cooperative pool (a server under load)
        // must not postpone the deadline.
        let timedOut = TimeoutFlag()
        let nanoseconds = Int64(min(Double(Int64.max), max(0, timeout / .nanoseconds(1))))
        let deadline = channel.channel.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            timedOut.state.withLock { $0 = true }
            channel.channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        let late = Failure(description: "no complete answer within \(seconds) s")
        let outcome: Result<Answer, Failure>
        do {
            let request = Request(method: method, host: url.port.map { "\(host):\($0)" } ?? host, target: target, headers: headers, body: body)
            outcome = try await exchange(channel, request, limit: keepingBody ? limit : nil)
        } catch {
            throw timedOut.state.withLock { $0 } ? late : error
        }
        if case .failure = outcome, timedOut.state.withLock({ $0 }) { throw late }
        return try outcome.get()
    }

    private struct Request: Sendable {
        var method: HTTPMethod
        var host: String
        var target: String
        var headers: [(String, String)]
        var body: [UInt8]?
    }

    /// Whether the deadline closed the channel.
    private final class TimeoutFlag: Sendable {
        let state = Mutex(false)
    }

    /// `limit` `nil`: the body is dropped as it comes.
    private static func exchange(_ channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, _ request: Request,
                                 limit: Int?) async throws -> Result<Answer, Failure> {
        try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.target)
            head.headers.add(name: "Host", value: request.host)
            for (name, value) in request.headers { head.headers.add(name: name, value: value) }
            head.headers.add(name: "Connection", value: "close")
            if let body = request.body { head.headers.add(name: "Content-Length", value: "\(body.count)") }
            try await outbound.write(.head(head))
            if let body = request.body { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            try await outbound.write(.end(nil))
            var status = 0
            var body: [UInt8] = []
            for try await part in inbound {
                switch part {
                case .head(let response):
                    status = Int(response.status.code)
                    if let limit, let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
                        return .failure(Failure(description: "the answer has \(length) bytes, more than \(limit)"))
                    }
                case .body(let buffer):
                    guard let limit else { continue }
                    guard body.count + buffer.readableBytes <= limit else {
                        return .failure(Failure(description: "the answer exceeds \(limit) bytes"))
                    }
                    body.append(contentsOf: buffer.readableBytesView)
                case .end:
                    return .success(Answer(status: status, body: body))
                }
            }
            return .failure(Failure(description: "the connection closed before the answer ended"))
        }
    }
}

/// One `GET` of a JWT issuer's JWKS: the body of a `200` answer, refused past a size, a time, or
/// for any other status — a redirect included, which is never followed.
enum JWKSFetch {
    typealias Failure = OutboundHTTP.Failure

    static func get(_ url: URL, limit: Int, timeout: Duration) async throws -> [UInt8] {
        let answer = try await OutboundHTTP.send(.GET, url, headers: [("Accept", "application/json")], limit: limit, timeout: timeout)
        guard answer.status == 200 else {
            let redirect = (300...399).contains(answer.status) ? " (redirects are not followed)" : ""
            throw Failure(description: "answered HTTP \(answer.status)\(redirect)")
        }
        return answer.body
    }
}
