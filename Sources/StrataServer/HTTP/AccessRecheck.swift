import Foundation
import Hummingbird
import StrataCore
import StrataProtocol

/// Access checked again where it matters, not only when a request begins. A request may last: a
/// push or a state upload whose body trickles in for minutes, a long poll that waits up to
/// `maxWait`. The owner may revoke a grant, make the zone private or delete it meanwhile, and the
/// operator may remove the user from the users file (SIGHUP). The storage checks the zone's
/// access under the append's lock itself (the append plan, the state merge); these checks add the
/// users file, and the long poll, which appends nothing and would otherwise reveal what was
/// written after the revocation.
extension StrataServerApp {
    /// The bearer token of a request's `Authorization` header, if it has one.
    /// The name and token of an `Authorization: Basic` header (the dashboard's sign-in), or `nil`.
    static func basicCredentials(of request: Request) -> (user: String, token: String)? {
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic", parts[1].utf8.count <= 1024,
              let decoded = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)).map(Array.init),
              let text = String(validating: decoded, as: UTF8.self), let colon = text.firstIndex(of: ":") else { return nil }
        let token = String(text[text.index(after: colon)...])
        return token.isEmpty ? nil : (String(text[..<colon]), token)
    }

    static func bearer(of request: Request) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// How long a long poll may wait from now: `remaining`, but no longer than the caller's JWT
    /// is valid (a little past its end, so that the check after the wait sees it expired and
    /// answers `401`, as a revoked static token is answered when the users are reloaded).
    func signedInWait(_ remaining: Duration, _ context: StrataRequestContext) -> Duration {
        guard let until = context.signedInUntil, let jwt else { return remaining }
        let now = jwt.wallMilliseconds
        let left = until > now ? Duration.milliseconds(Int64(min(until - now, UInt64(Int64.max / 4)))) : .zero
        return min(remaining, left + .milliseconds(20))
    }

    /// Throws `401 unauthorized` unless the request's token still names `user` in the users as
    /// they are now: a reload that removed the user or replaced the token ends requests already in
    /// flight at their next decisive step (before an append, a merge, or a long poll's answer).
    /// A JWT is verified again against its issuer's keys as held now: one that expired meanwhile
    /// (or whose key the issuer removed) ends the request alike, with its reason.
    func requireStillSignedIn(_ request: Request, as user: String) throws(ServerError) {
        guard let bearer = Self.bearer(of: request) else {
            throw ServerError(.unauthorized, "the request of user \(user) lost its bearer token")
        }
        if let jwt, JWTVerifier.looksLikeJWT(bearer) {
            switch jwt.verify(bearer) {
            case .success(let verified) where verified.user == user:
                return
            case .success:
                throw ServerError(.unauthorized, "the token no longer names user \(user)")
            case .failure(let refusal):
                throw ServerError(.unauthorized, "the token of user \(user) is no longer valid: \(refusal.message)", reason: refusal.reason)
            }
        }
        guard users.authenticate(bearer: bearer) == user, jwt?.issuer(owningName: user) == nil else {
            throw ServerError(.unauthorized, "the token of user \(user) was revoked while the request was in flight")
        }
    }

    /// Throws unless `user` may still read zone `id` in the life (`epoch`) the request began in:
    /// `403 forbidden` when the grant was revoked or the zone made private, `404 zoneNotFound`
    /// when it was deleted, `410 zoneReset` when it was deleted and created again (and the caller
    /// may read the new zone).
    func requireStillReadable(_ id: ZoneID, by user: String, epoch: UInt64) async throws(ServerError) {
        let now = try await storageCall { () async throws(ZoneStorageError) in try await storage.zone(id) }
        guard let now else { throw ServerError(.zoneNotFound, "zone \(id) was deleted while the request was in flight") }
        // Access first: a caller without access to the recreated zone learns nothing of it.
        guard now.canRead(user) else { throw ServerError(.forbidden, "user \(user) may no longer read zone \(id): access was revoked while the request was in flight") }
        guard now.epoch == epoch else { throw ServerError(.zoneReset, "zone \(id) was deleted and created again while the request was in flight") }
    }
}
