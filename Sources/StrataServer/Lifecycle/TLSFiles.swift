public import Hummingbird
import HummingbirdTLS
public import NIOSSL

/// The certificate chain and private key `strata serve` answers HTTPS with (`--tls-cert`,
/// `--tls-key`), both PEM files. The chain is the server's certificate first, then any
/// intermediates.
public struct TLSFiles: Sendable, Hashable {
    public var certificateChain: String
    public var privateKey: String

    public init(certificateChain: String, privateKey: String) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }

    /// The server's TLS configuration (TLS 1.2 and later), checked now — the files read, the key
    /// matching the certificate — so that a mistake stops the start-up with a message naming the
    /// file rather than failing every handshake.
    public func serverConfiguration() throws(TLSFilesError) -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateChain)
        } catch {
            throw TLSFilesError("cannot read the TLS certificate chain \(certificateChain) (PEM): \(error)")
        }
        guard !chain.isEmpty else { throw TLSFilesError("the TLS certificate file \(certificateChain) holds no PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKey, format: .pem)
        } catch {
            throw TLSFilesError("cannot read the TLS private key \(privateKey) (PEM): \(error)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        do {
            // Builds the context as the server will, which checks that the key matches the certificate.
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFilesError("the TLS key \(privateKey) does not fit the certificate \(certificateChain): \(error)")
        }
        return configuration
    }
}

/// A TLS certificate or key that cannot be used, and why.
public struct TLSFilesError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension StrataServerApp {
    /// The application answering HTTPS with `tls` (plain HTTP when `nil`) on the configuration's
    /// host and port.
    public func buildApplication(tls: TLSConfiguration?,
                                 onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) throws -> Application<RouterResponder<StrataRequestContext>> {
        guard let tls else { return buildApplication(onRunning: onRunning) }
        FileDescriptorLimit.ensure(room: configuration.limits.maxConnections, logger: logger)
        return Application(
            router: buildRouter(),
            // TLS around the bounded HTTP/1 channel: the connection caps and timeouts hold over HTTPS.
            server: try BoundedHTTP1Channel.builder(limits: configuration.limits, tls: tls, metrics: metrics, logger: logger),
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port), serverName: "strata"),
            services: backgroundServices,
            onServerRunning: { channel in await onRunning?(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}
