public import AsyncHTTPClient
public import Foundation
public import NIOSSL
public import StrataSync

extension HTTPSyncTransport {
    /// The protocol over AsyncHTTPClient (``AsyncHTTPClientExchange``).
    ///
    /// - Parameters:
    ///   - server: the server's base URL (`http://host:port`).
    ///   - bearer: the user's token.
    ///   - client: the HTTP client to use (the caller shuts it down), such as `defaultClient`.
    ///     A client of your own should not retry connection attempts either
    ///     (`configuration(trusting:)`).
    public init(server: URL, bearer: String, client: HTTPClient) {
        self.init(server: server, tokens: .fixed(bearer), client: client)
    }

    /// The protocol over AsyncHTTPClient (``AsyncHTTPClientExchange``).
    ///
    /// - Parameters:
    ///   - server: the server's base URL (`https://host:port`).
    ///   - tokens: where the bearer token comes from; asked for a fresh one after a `401`, and
    ///     the request is sent once more with it.
    ///   - client: the HTTP client to use (the caller shuts it down), such as `defaultClient`.
    public init(server: URL, tokens: TokenProvider, client: HTTPClient) {
        self.init(server: server, tokens: tokens, exchange: AsyncHTTPClientExchange(client: client))
    }

    /// AsyncHTTPClient's shared configuration, except that a failed connection attempt fails
    /// the request at once instead of being retried inside it until the request times out: the
    /// engine's own backoff decides when to try again, and a failed TLS handshake
    /// (`SyncError.Code.untrustedServer`) is reported at once, not after the timeout. With
    /// `trustRoots`, only those certificates are trusted (a private CA, a self-signed server).
    public static func configuration(trusting trustRoots: NIOSSLTrustRoots? = nil) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        if let trustRoots {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = trustRoots
            configuration.tlsConfiguration = tls
        }
        return configuration
    }

    /// The client transports use unless given one, with `configuration(trusting:)`; never shut
    /// down (it lives as long as the process).
    public static let defaultClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration())

}
