public import Hummingbird

/// The request context of the server's router: Hummingbird's core context and the user the
/// request authenticated as (set by the server's authentication middleware).
public struct StrataRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The authenticated user; `nil` only before authentication.
    public var user: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.user = nil
    }

    /// The authenticated user.
    ///
    /// - Throws: ``ServerError/Code/unauthorized`` when the request did not authenticate.
    func requireUser() throws(ServerError) -> String {
        guard let user else { throw ServerError(.unauthorized, "missing or unknown bearer token") }
        return user
    }
}
