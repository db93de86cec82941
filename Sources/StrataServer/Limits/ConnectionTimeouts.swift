import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

/// The three connection timeouts of ``ServerConfiguration/Limits``, as the channel handlers use them.
struct ConnectionTimeouts: Sendable, Hashable {
    /// No request on the connection (none being read, none being answered).
    var idle: TimeAmount
    /// The first byte of a request head arrived, the whole head has not.
    var header: TimeAmount
    /// A request body is being read and no byte arrived.
    var body: TimeAmount
    /// An answer is being written and none of it drained to the client.
    var write: TimeAmount

    init(_ limits: ServerConfiguration.Limits) {
        idle = Self.amount(limits.idleTimeout)
        header = Self.amount(limits.headerTimeout)
        body = Self.amount(limits.bodyTimeout)
        write = Self.amount(limits.writeTimeout)
    }

    /// A duration as NIO's time amount, at least a millisecond (a zero timeout would close every
    /// connection before its first byte).
    static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !nanoseconds.overflow else { return .nanoseconds(Int64.max / 2) }
        return .nanoseconds(max(1_000_000, nanoseconds.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue))
    }
}

/// Sent through an idle connection's pipeline by ``ConnectionAdmission``'s caller to close it for a
/// new connection at the cap: ``RequestTimeoutHandler`` closes it if it is still idle on its own
/// event loop (no request begun, nothing in flight, every byte of the last answer sent).
struct ShedIfIdle: Sendable {}

/// Sent down the pipeline by ``InboundBytesMarker`` before the bytes it marks, so that
/// ``RequestTimeoutHandler`` — which sees only decoded request parts — knows when a request head
/// has begun to arrive.
struct InboundBytesArrived: Sendable {}

/// The first handler of a connection's pipeline: raw bytes pass through untouched, each read
/// preceded by an ``InboundBytesArrived`` event. The HTTP decoder forwards the event before the
/// parts it decodes from those bytes.
final class InboundBytesMarker: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireUserInboundEventTriggered(InboundBytesArrived())
        context.fireChannelRead(data)
    }
}

/// Closes a connection that holds the server without using it: idle with no request in flight
/// for ``ConnectionTimeouts/idle``, a request head still incomplete ``ConnectionTimeouts/header``
/// after its first byte, or a request body with no byte for ``ConnectionTimeouts/body`` while the
/// server waits for one. A request whose head and body have arrived and that is being answered — a
/// long poll — is never timed out here.
///
/// Sits after the HTTP decoder (it sees request and response parts) and needs
/// ``InboundBytesMarker`` at the front of the pipeline to see a head begin.
final class RequestTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Which timeout closed a connection.
    enum Reason: String {
        case idle, header, body, write
    }

    private let timeouts: ConnectionTimeouts
    private let metrics: ServerMetrics?
    private let logger: Logger
    /// Requests whose head arrived and whose answer has not been written to its end.
    private var inFlight = 0
    /// When the first byte of a head not yet decoded arrived.
    private var headStarted: NIODeadline?
    /// While a body is being read: when its last byte arrived or the server last asked for more.
    private var bodyProgress: NIODeadline?
    /// Whether the server has asked for bytes that have not come yet. A body stalls only then:
    /// while the server does not read (its handler is busy, or waits for upload budget), the
    /// client cannot send, and that is not the client's doing.
    private var readPending = false
    /// When the connection last had nothing in flight.
    private var idleSince: NIODeadline = .now()
    /// While the channel is not writable (more of the answer buffered than the client takes):
    /// since when no byte of it drained, and how many bytes were buffered then.
    private var writeStalled: (since: NIODeadline, buffered: Int)?
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// Where the connection is known idle (closable to make room for another), and its number there.
    private let admission: ConnectionAdmission?
    private let connection: UInt64

    init(timeouts: ConnectionTimeouts, admission: ConnectionAdmission? = nil, metrics: ServerMetrics? = nil, logger: Logger) {
        self.timeouts = timeouts
        self.admission = admission
        self.connection = admission?.connectionNumber() ?? 0
        self.metrics = metrics
        self.logger = logger
    }

    /// Tells the admission whether the connection is idle now: nothing in flight, no head begun.
    private func noteIdleness(_ context: ChannelHandlerContext) {
        guard let admission else { return }
        if inFlight == 0, headStarted == nil, bodyProgress == nil, context.channel.isActive {
            admission.idle(connection, context.channel)
        } else {
            admission.busy(connection)
        }
    }

    /// The time the connection is closed at unless something happens first, and why.
    private var deadline: (at: NIODeadline, reason: Reason)? {
        let reading = readingDeadline
        guard let writeStalled else { return reading }
        let writing = (at: writeStalled.since + timeouts.write, reason: Reason.write)
        guard let reading else { return writing }
        return writing.at < reading.at ? writing : reading
    }

    /// The deadline of the request side: an incomplete head, a stalled body, or idleness.
    private var readingDeadline: (at: NIODeadline, reason: Reason)? {
        if let headStarted { return (headStarted + timeouts.header, .header) }
        if let bodyProgress { return readPending ? (bodyProgress + timeouts.body, .body) : nil }
        if inFlight > 0 { return nil }
        return (idleSince + timeouts.idle, .idle)
    }

    /// The bytes of answers the channel holds that the socket has not taken yet.
    private func buffered(_ context: ChannelHandlerContext) -> Int {
        (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    func handlerAdded(context: ChannelHandlerContext) {
        idleSince = .now()
        arm(context)
        noteIdleness(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        admission?.busy(connection)
        // Always reached when the channel goes (its pipeline is torn down), even where
        // channelInactive did not pass this handler: the watch forgets the channel before its
        // identity can be reused.
        ConnectionWatch.shared.ended(ObjectIdentifier(context.channel))
    }

    func channelActive(context: ChannelHandlerContext) {
        idleSince = .now()
        arm(context)
        noteIdleness(context)
        context.fireChannelActive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            writeStalled = nil
        } else if writeStalled == nil {
            writeStalled = (.now(), buffered(context))
        }
        arm(context)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        admission?.busy(connection)
        ConnectionWatch.shared.ended(ObjectIdentifier(context.channel))
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side (remote half-closure is allowed): a long poll it was
        // waiting for has nobody to answer, and ends now rather than when its wait would.
        if let event = event as? ChannelEvent, event == .inputClosed {
            ConnectionWatch.shared.clientClosed(ObjectIdentifier(context.channel))
        }
        if event is ShedIfIdle {
            guard inFlight == 0, headStarted == nil, bodyProgress == nil, buffered(context) == 0 else {
                // Not closed (a request began, or the last answer is still draining): listed
                // again if it is idle, so that it can make room later.
                noteIdleness(context)
                return
            }
            metrics?.recordShedConnection()
            logger.debug("idle connection closed to make room for a new one", metadata: [
                "remote": "\(context.channel.remoteAddress?.description ?? "-")",
            ])
            context.close(promise: nil)
            return
        }
        if event is InboundBytesArrived {
            readPending = false
            if bodyProgress != nil {
                bodyProgress = .now()
                arm(context)
            } else if headStarted == nil {
                // Bytes outside a body begin a head (a pipelined request's, too).
                headStarted = .now()
                arm(context)
                admission?.busy(connection)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            headStarted = nil
            bodyProgress = .now()
            inFlight += 1
        case .body:
            bodyProgress = .now()
        case .end:
            bodyProgress = nil
        }
        arm(context)
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        // The server asks for more: a body's stall counts from now, so that time the server spent
        // not reading (waiting for upload budget, say) is never blamed on the client.
        readPending = true
        if bodyProgress != nil {
            bodyProgress = .now()
            arm(context)
        }
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            inFlight = max(0, inFlight - 1)
            if inFlight == 0 { idleSince = .now() }
            arm(context)
            noteIdleness(context)
        }
        context.write(data, promise: promise)
    }

    /// Schedules the timer for the current deadline when none is set or the deadline moved
    /// earlier; a later deadline is picked up when the earlier timer fires.
    private func arm(_ context: ChannelHandlerContext) {
        guard let (at, _) = deadline else {
            cancelTimer()
            return
        }
        if let timerDeadline, timerDeadline <= at { return }
        cancelTimer()
        timerDeadline = at
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: at) {
            let (handler, context) = loopBound.value
            handler.timerFired(context)
        }
    }

    private func timerFired(_ context: ChannelHandlerContext) {
        timer = nil
        timerDeadline = nil
        guard let (at, reason) = deadline else { return }
        if at <= .now(), reason == .write, let stalled = writeStalled, buffered(context) < stalled.buffered {
            // Some of the answer drained since: a slow reader, not a stalled one. Count again.
            writeStalled = (.now(), buffered(context))
            arm(context)
        } else if at <= .now() {
            logger.debug("connection closed: \(reason.rawValue) timeout", metadata: [
                "remote": "\(context.channel.remoteAddress?.description ?? "-")", "timeout": "\(reason.rawValue)",
            ])
            metrics?.recordConnectionTimeout(reason.rawValue)
            context.close(promise: nil)
        } else {
            arm(context)
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }
}
