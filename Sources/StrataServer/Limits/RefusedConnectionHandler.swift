import HTTPTypes
import NIOCore

/// The whole pipeline's say on a connection over a cap: it answers `503 serverBusy` (with
/// `Retry-After`) as soon as the connection is active, without reading a byte of the client's,
/// and closes it. Placed first, it swallows whatever the client sends, so that no request on the
/// connection is ever handled.
final class RefusedConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let answer: ServerError
    private var answered = false

    init(_ answer: ServerError) {
        self.answer = answer
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Dropped: the connection is being refused.
    }

    private func refuse(_ context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let body = answer.jsonBody
        var head = "HTTP/1.1 \(answer.status.code) \(answer.status.reasonPhrase)\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
        if let retryAfter = answer.retryAfter { head += "Retry-After: \(retryAfter)\r\n" }
        head += "\r\n"
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + body.count)
        buffer.writeString(head)
        buffer.writeBytes(body)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
        // Over TLS the answer waits for the client's handshake; a client that never makes one
        // must not keep an uncounted connection open.
        let channel = context.channel
        context.eventLoop.scheduleTask(in: Self.handshakeAllowance) {
            channel.close(promise: nil)
        }
    }

    /// How long a refused connection stays open for its answer to get through (a TLS handshake).
    static let handshakeAllowance: TimeAmount = .seconds(2)
}
