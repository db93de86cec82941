public import HummingbirdCore
public import HummingbirdTLS
public import Logging
import NIOSSL

extension BoundedHTTP1Channel {
    /// The builder for HTTPS: TLS around the bounded HTTP/1 channel, so that the connection caps
    /// and timeouts hold over TLS too (the timeouts count decrypted bytes; a handshake that never
    /// finishes sends none, so the idle timeout closes it).
    ///
    /// - Throws: when `tls` cannot make a TLS context (NIOSSL's error).
    public static func builder(limits: ServerConfiguration.Limits, tls: TLSConfiguration, metrics: ServerMetrics? = nil,
                               logger: Logger) throws -> HTTPServerBuilder {
        // Checked here, so that a bad configuration fails when the server is built.
        _ = try NIOSSLContext(configuration: tls)
        let admission = ConnectionAdmission(limits: limits, metrics: metrics)
        admission.logCapacity(logger)
        return HTTPServerBuilder { responder in
            try TLSChannel(BoundedHTTP1Channel(responder: responder, limits: limits, admission: admission, metrics: metrics, logger: logger),
                           tlsConfiguration: tls)
        }
    }
}
