import Synchronization

/// Where a transport gets the bearer token it sends: asked before the first request, and asked
/// for a fresh one when the server answers `401 unauthorized` (the token expired, or was
/// revoked and reissued). Apps that sign in against their own identity service return the
/// current access token here and refresh it on demand.
///
/// ```swift
/// let tokens = TokenProvider { refresh in
///     refresh ? try await auth.refreshAccessToken() : try await auth.currentAccessToken()
/// }
/// let engine = try SyncEngine(store: store, server: url, zone: "notes", tokens: tokens)
/// ```
///
/// The provider keeps the token it returned until the server refuses it: on sign-out, call
/// ``reset()`` (or make a new provider for the next user).
public final class TokenProvider: Sendable {
    /// `refresh` is `true` when the server refused the token this provider returned last.
    public typealias Fetch = @Sendable (_ refresh: Bool) async throws -> String

    private let fetch: Fetch
    /// The token in use, so that concurrent requests share one, and a `401` answered to several
    /// of them refreshes it once.
    private let current = Mutex<(token: String?, generation: UInt64)>((nil, 0))

    public init(_ fetch: @escaping Fetch) {
        self.fetch = fetch
    }

    /// A token that never changes (a token made with `strata users add`).
    public static func fixed(_ token: String) -> TokenProvider {
        TokenProvider { _ in token }
    }

    /// Forgets the token in use, so the next request asks `fetch` again (with `refresh` false).
    /// Call it when the user signs out: the provider keeps the token it was last given, and
    /// without a reset the next user's requests would go out signed as the previous user (a
    /// database engine bound to its user refuses them with `anotherUser`, but a new database
    /// would be bound to the wrong user).
    public func reset() {
        // A fetch begun before the reset (for the previous user) keeps its token to itself.
        current.withLock { $0 = (nil, $0.generation + 1) }
    }

    /// The token to send.
    func token() async throws -> String {
        let (kept, generation) = current.withLock { ($0.token, $0.generation) }
        if let kept { return kept }
        let token = try await fetch(false)
        return current.withLock { state in
            guard state.generation == generation else { return token }
            state.token = state.token ?? token
            return state.token ?? token
        }
    }

    /// A fresh token after the server refused `refused`; a request that lost the race to another
    /// one that already refreshed gets the newer token without asking again.
    func token(replacing refused: String) async throws -> String {
        let (kept, generation) = current.withLock { ($0.token, $0.generation) }
        if let kept, kept != refused { return kept }
        let token = try await fetch(true)
        current.withLock { state in
            if state.generation == generation { state.token = token }
        }
        return token
    }
}
