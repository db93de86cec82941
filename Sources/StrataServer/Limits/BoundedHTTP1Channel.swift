import StrataProtocol
public import HummingbirdCore
public import Logging
public import NIOCore

/// Hummingbird's HTTP/1 channel with the server's connection bounds: the caps of
/// ``ServerConfiguration/Limits/maxConnections`` (lowered to what the open-files limit leaves
/// room for) and ``ServerConfiguration/Limits/maxConnectionsPerAddress`` (a connection over either
/// is answered `503 serverBusy` and closed — at the total cap only when no idle connection can be
/// closed for it instead) and the idle, header and body timeouts.
///
/// ```swift
/// let app = Application(router: router, server: BoundedHTTP1Channel.builder(limits: limits, logger: logger))
/// // Over TLS, wrap the bounded channel: its timeouts then count decrypted bytes.
/// HTTPServerBuilder { responder in try TLSChannel(BoundedHTTP1Channel(responder: responder, limits: limits, logger: logger),
///                                                 tlsConfiguration: tls) }
/// ```
public struct BoundedHTTP1Channel: ServerChildChannel {
    public typealias Value = HTTP1Channel.Value

    private let base: HTTP1Channel
    private let admission: ConnectionAdmission
    private let metrics: ServerMetrics?
    private let logger: Logger

    /// - Parameters:
    ///   - responder: the HTTP responder (Hummingbird passes it to an `HTTPServerBuilder`'s closure).
    ///   - limits: the caps and timeouts; every other field is ignored here.
    ///   - metrics: where refused connections are counted (`strata_server_busy_total`).
    ///   - logger: where refusals are logged.
    public init(responder: @escaping HTTPChannelHandler.Responder, limits: ServerConfiguration.Limits,
                metrics: ServerMetrics? = nil, logger: Logger) {
        self.init(responder: responder, limits: limits, admission: ConnectionAdmission(limits: limits, metrics: metrics), metrics: metrics, logger: logger)
    }

    init(responder: @escaping HTTPChannelHandler.Responder, limits: ServerConfiguration.Limits,
         admission: ConnectionAdmission, metrics: ServerMetrics?, logger: Logger) {
        let timeouts = ConnectionTimeouts(limits)
        // Hummingbird's own idle timeout stays off: RequestTimeoutHandler tells a head, a body and
        // an idle connection apart, and never times out a request being answered (a long poll).
        base = HTTP1Channel(responder: responder, configuration: .init(
            additionalChannelHandlers: [RequestTimeoutHandler(timeouts: timeouts, admission: admission, metrics: metrics, logger: logger)],
            idleTimeout: nil
        ))
        self.admission = admission
        self.metrics = metrics
        self.logger = logger
    }

    /// The builder for `Application(router:server:…)`.
    public static func builder(limits: ServerConfiguration.Limits, metrics: ServerMetrics? = nil, logger: Logger) -> HTTPServerBuilder {
        let admission = ConnectionAdmission(limits: limits, metrics: metrics)
        admission.logCapacity(logger)
        return HTTPServerBuilder { responder in
            BoundedHTTP1Channel(responder: responder, limits: limits, admission: admission, metrics: metrics, logger: logger)
        }
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let address = channel.remoteAddress?.ipAddress
        let admitted = admission.admit(address, channel: channel)
        let refusal = admitted.refusal
        let admission = self.admission
        if let shed = admitted.shed {
            // At the cap: the connection idle the longest makes room (it serves nobody). It is
            // closed on its own event loop, and only if it is still idle there (a request may
            // have begun on it meanwhile).
            shed.pipeline.fireUserInboundEventTriggered(ShedIfIdle())
        }
        let result = channel.eventLoop.makeCompletedFuture {
            if let refusal {
                let message = switch refusal {
                case .total(let limit): "the server holds its most connections (\(limit)); try again shortly"
                case .perAddress(let limit): "\(address ?? "this address") holds its most connections (\(limit)); close some or try again shortly"
                }
                self.metrics?.serverBusy.increment()
                self.logger.notice("connection refused: over the connection cap", metadata: [
                    "remote": "\(address ?? "-")", "cap": "\(refusal)",
                ])
                try channel.pipeline.syncOperations.addHandler(RefusedConnectionHandler(ServerError(.serverBusy, message, retryAfter: 1)))
            } else {
                channel.closeFuture.whenComplete { _ in admission.release(address, channel: channel) }
                try channel.pipeline.syncOperations.addHandler(InboundBytesMarker())
            }
        }
        return result.flatMap { base.setup(channel: channel, logger: logger) }.flatMapErrorThrowing { error in
            // A channel that failed to set up is closed by nobody else (NIO leaves it open).
            channel.close(promise: nil)
            throw error
        }
    }

    public func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
