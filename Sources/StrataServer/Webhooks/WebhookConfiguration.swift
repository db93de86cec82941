public import Foundation

/// Where the server tells an app's backend that zones changed, so that it can wake the users'
/// devices (a silent push through APNs or FCM): see <doc:Operating#Wake-ups>.
///
/// ```swift
/// var configuration = ServerConfiguration(port: 8080)
/// configuration.webhook = try WebhookConfiguration(url: URL(string: "https://backend.example/strata")!,
///                                                  secret: Array(secretData))
/// ```
public struct WebhookConfiguration: Sendable, Hashable {
    /// The receiver's URL (`http` or `https`). Redirects are not followed.
    public var url: URL
    /// The key of the HMAC-SHA256 signature of every notification (`WebhookSignature` in StrataProtocol): at
    /// least 16 bytes, shared with the receiver only.
    public var secret: [UInt8]
    /// How quiet the zones must stay before a notification goes: changes are gathered until
    /// none came for this long, so a burst of pushes makes one notification, naming each zone
    /// once. One second by default.
    public var coalesce: Duration = .seconds(1)
    /// The longest changes are gathered however busy the zones stay: a notification goes at the
    /// latest this long after the first change it names. Ten seconds by default.
    public var maxDelay: Duration = .seconds(10)
    /// How long one delivery may take (connect, send, answer) before it counts as failed.
    public var timeout: Duration = .seconds(10)
    /// Attempts per notification before it is dropped (logged and counted).
    public var maxAttempts = 8
    /// The wait before the second attempt; it doubles with each failure, up to ``maxBackoff``.
    public var initialBackoff: Duration = .seconds(1)
    public var maxBackoff: Duration = .seconds(300)
    /// The most zones waiting to be notified at once (a receiver down for long, a flood of
    /// zones): a change past it is dropped and counted rather than let memory grow.
    public var maxPendingZones = 100_000
    /// The most zones one notification names; more waiting go in the next one.
    public var maxZonesPerNotification = 1_000

    /// The shortest secret accepted.
    public static let minimumSecretBytes = 16

    /// - Throws: ``WebhookConfigurationError`` for a URL that is not `http(s)` with a host, or a
    ///   secret shorter than ``minimumSecretBytes``.
    public init(url: URL, secret: [UInt8]) throws(WebhookConfigurationError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false else {
            throw WebhookConfigurationError(description: "the webhook URL \(url.absoluteString.prefix(200)) is not an http(s) URL with a host")
        }
        guard secret.count >= Self.minimumSecretBytes else {
            throw WebhookConfigurationError(description: "the webhook secret has \(secret.count) bytes; it needs at least \(Self.minimumSecretBytes)")
        }
        self.url = url
        self.secret = secret
    }
}

/// A webhook configuration that cannot be used, and why.
public struct WebhookConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
