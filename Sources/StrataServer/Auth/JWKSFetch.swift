import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/1.1 `GET` of a JWKS over SwiftNIO (the server's own event loops; FoundationNetworking
/// is kept out of the server): the body of a `200` answer, refused past a size, a time, or for any
/// other status — a redirect included, which is never followed.
enum JWKSFetch {
    /// Why a fetch failed, for the message of the caller's error.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func get(_ url: URL, limit: Int, timeout: Duration) async throws -> [UInt8] {
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty else {
            throw Failure(description: "not an http(s) URL")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        var target = url.path.isEmpty ? "/" : url.path
        if let query = url.query { target += "?" + query }
        let tls = scheme == "https" ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        // An address is not a name to check a certificate against (nor to send as SNI).
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        let seconds = Int64(timeout.components.seconds)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(seconds))
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
        let outcome: Result<[UInt8], Failure>
        do {
            outcome = try await exchange(channel, url: url, host: host, target: target, limit: limit)
        } catch {
            throw timedOut.state.withLock { $0 } ? late : error
        }
        if case .failure = outcome, timedOut.state.withLock({ $0 }) { throw late }
        return try outcome.get()
    }

    /// Whether the deadline closed the channel.
    private final class TimeoutFlag: Sendable {
        let state = Mutex(false)
    }

    private static func exchange(_ channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, url: URL, host: String,
                                 target: String, limit: Int) async throws -> Result<[UInt8], Failure> {
        try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target)
            head.headers.add(name: "Host", value: url.port.map { "\(host):\($0)" } ?? host)
            head.headers.add(name: "Accept", value: "application/json")
            head.headers.add(name: "Connection", value: "close")
            try await outbound.write(.head(head))
            try await outbound.write(.end(nil))
            var body: [UInt8] = []
            for try await part in inbound {
                switch part {
                case .head(let response):
                    guard response.status == .ok else {
                        let redirect = (300...399).contains(response.status.code) ? " (redirects are not followed)" : ""
                        return .failure(Failure(description: "answered HTTP \(response.status.code)\(redirect)"))
                    }
                    if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
                        return .failure(Failure(description: "the answer has \(length) bytes, more than \(limit)"))
                    }
                case .body(let buffer):
                    guard body.count + buffer.readableBytes <= limit else {
                        return .failure(Failure(description: "the answer exceeds \(limit) bytes"))
                    }
                    body.append(contentsOf: buffer.readableBytesView)
                case .end:
                    return .success(body)
                }
            }
            return .failure(Failure(description: "the connection closed before the answer ended"))
        }
    }
}
