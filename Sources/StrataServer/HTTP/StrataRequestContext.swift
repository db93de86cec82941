public import Hummingbird
import StrataProtocol
import NIOCore

/// The request context of the server's router: Hummingbird's core context and the user the
/// request authenticated as (set by the server's authentication middleware).
public struct StrataRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The authenticated user; `nil` only before authentication.
    public var user: String?
    /// Until when (the server's wall clock, milliseconds) the request's JWT is valid; `nil` for
    /// a static token. A long poll waits no longer than this, then checks its caller again.
    var signedInUntil: UInt64?
    /// The IP address of the connection's peer (`nil` when it has none): what failed
    /// authentications are counted against (see ``ServerConfiguration/Limits/failedAuthLimit``).
    public var clientAddress: String?
    /// For a request under `/v1/zones/{zone}`: the zone it names (in the caller's namespace unless
    /// `owner` names another user's), resolved once by ``ZoneResolution`` before the handler runs.
    var zoneID: ZoneID?
    /// That zone, when it exists (looked up with it).
    var zone: ZoneInfo?

    /// The channel the request came on, held for as long as the request is: its identity is
    /// what a long poll watches for its client going away (`ConnectionWatch`), and an identity
    /// is unique only while its object lives. (Holding just the `ObjectIdentifier` let a
    /// channel the server no longer held — the testing framework's, freed once the context was
    /// made — share its address with a later connection, whose client closing then cut this
    /// request's long poll short.)
    private let channel: any Channel

    /// The connection the request came on (its channel's identity).
    var connection: ObjectIdentifier { ObjectIdentifier(channel) }

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.user = nil
        self.clientAddress = source.channel.remoteAddress?.ipAddress
        self.channel = source.channel
    }

    /// The authenticated user.
    ///
    /// - Throws: ``ServerError`` `unauthorized` when the request did not authenticate.
    func requireUser() throws(ServerError) -> String {
        guard let user else { throw ServerError(.unauthorized, "missing or unknown bearer token") }
        return user
    }
}
