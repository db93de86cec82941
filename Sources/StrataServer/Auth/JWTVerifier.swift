import Foundation
import JWTKit
public import Logging
public import StrataProtocol

/// Verifies bearer JWTs against the configured issuers (see <doc:JWTSignIn>) and names the user
/// each signs in as.
///
/// A token is refused, with a typed `AuthRefusalReason`, unless all of these hold, checked in
/// this order: it is three base64url parts with a JSON header and payload (`malformed`); its `iss`
/// is a configured issuer's (`wrongIssuer`); its `alg` is one that issuer is configured with —
/// never `none` or `HS*` (`algorithmNotAllowed`); its `kid` names one of the issuer's keys, if
/// need be after reading the issuer's JWKS again (`unknownKey`); the signature is that key's
/// (`badSignature`); it has an `exp` and it is not past, nor its `nbf` or `iat` ahead, by more
/// than the issuer's leeway (`expired`, `notYetValid`); its `aud` names the issuer's audiences
/// and nothing else (`wrongAudience`); and its user claim is a usable name (`missingUserClaim`).
///
/// ```swift
/// let verifier = try await JWTVerifier.load([apple], logger: logger)
/// let server = StrataServerApp(storage: storage, users: users, jwt: verifier)
/// ```
public final class JWTVerifier: Sendable {
    /// The issuers, as configured.
    public let issuers: [JWTIssuer]
    private let keys: [String: JWTIssuerKeys]
    private let clock: ServerClock

    /// A token verified: who it signs in as, and until when (``ServerClock/wallMilliseconds``)
    /// it stays valid, its leeway included.
    public struct Verified: Sendable, Hashable {
        /// The user the token signs in as: `<userPrefix>:<claim>`.
        public var user: String
        /// The token's `exp` plus its issuer's leeway, in milliseconds since 1970.
        public var validUntilMilliseconds: UInt64
    }

    /// Now, on the clock tokens' times are checked against (milliseconds since 1970).
    var wallMilliseconds: UInt64 { clock.wallMilliseconds() }

    private init(issuers: [JWTIssuer], keys: [String: JWTIssuerKeys], clock: ServerClock) {
        self.issuers = issuers
        self.keys = keys
        self.clock = clock
    }

    /// A verifier of `issuers`, with each issuer's keys read now.
    ///
    /// - Parameters:
    ///   - issuers: the issuers; none may share an `iss` or a ``JWTIssuer/userPrefix``.
    ///   - clock: the wall clock tokens' times are checked against, and the monotonic time
    ///     between two reads of a JWKS after unknown `kid`s.
    ///   - refreshInterval: the shortest time between two such reads of one issuer's JWKS.
    ///   - maxKeyAge: how old an issuer's keys may be before a token using them has them read
    ///     again, in the background (so that a key the issuer removed stops being accepted).
    ///   - logger: where reads of the keys are logged.
    /// - Throws: ``JWTConfigurationError`` for an issuer that is not valid, two that clash, or
    ///   keys that cannot be read (a clear reason to stop a server from starting).
    public static func load(_ issuers: [JWTIssuer], clock: ServerClock = .system, refreshInterval: Duration = .seconds(30),
                            maxKeyAge: Duration = .seconds(3600),
                            logger: Logger = Logger(label: "strata.server")) async throws(JWTConfigurationError) -> JWTVerifier {
        var byIssuer: [String: JWTIssuerKeys] = [:]
        var prefixes: [String: String] = [:]
        for issuer in issuers {
            try issuer.validate()
            guard byIssuer[issuer.issuer] == nil else {
                throw JWTConfigurationError("issuer \(issuer.issuer) is configured twice: a token's iss must name one configuration")
            }
            if let other = prefixes[issuer.userPrefix] {
                throw JWTConfigurationError("issuers \(other) and \(issuer.issuer) have the same userPrefix \(issuer.userPrefix): their users could be the same user; give each its own")
            }
            prefixes[issuer.userPrefix] = issuer.issuer
            byIssuer[issuer.issuer] = try await JWTIssuerKeys.load(issuer, refreshInterval: refreshInterval, maxKeyAge: maxKeyAge,
                                                                   clock: clock, logger: logger)
        }
        return JWTVerifier(issuers: issuers, keys: byIssuer, clock: clock)
    }

    /// The issuer in whose namespace `name` lies (the part before its first colon is the
    /// issuer's ``JWTIssuer/userPrefix``), if any.
    public func issuer(owningName name: String) -> JWTIssuer? {
        guard let colon = name.firstIndex(of: ":") else { return nil }
        let prefix = name[..<colon]
        return issuers.first { $0.userPrefix == prefix }
    }

    /// Throws if a static-token user's name lies in an issuer's namespace: such a user could be
    /// the same as a JWT user.
    ///
    /// - Throws: ``UserDirectoryError`` naming the user and the issuer.
    public func checkNoClash(with users: UserDirectory) throws(UserDirectoryError) {
        for name in users.names {
            if let issuer = issuer(owningName: name) {
                throw UserDirectoryError("user \(name) is in the namespace of JWT issuer \(issuer.issuer) (userPrefix \(issuer.userPrefix)): static-token users' names must not start with \"\(issuer.userPrefix):\"")
            }
        }
    }

    /// How many times `issuer`'s JWKS was read (for tests and operators), or `nil` for an issuer
    /// not configured.
    public func keyReads(issuer: String) -> Int? { keys[issuer]?.reads }

    /// Whether a bearer token is a JWT for this verifier to judge: three base64url parts whose
    /// first is a JSON object. Anything else is a static token (whose text may hold dots).
    public static func looksLikeJWT(_ bearer: String) -> Bool {
        let parts = bearer.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts.allSatisfy({ $0.utf8.allSatisfy(isBase64URL) }) else { return false }
        return json(parts[0]) != nil
    }

    /// Verifies `token`, reading its issuer's JWTKS again when it names a `kid` not held (at most
    /// once per refresh interval).
    public func authenticate(_ token: String) async -> Result<Verified, JWTRefusal> {
        let first = verify(token)
        if case .success = first, let iss = Self.issuerClaim(token), let issuerKeys = keys[iss] { issuerKeys.refreshIfOld() }
        guard case .failure(let refusal) = first, refusal.reason == .unknownKey, let issuer = refusal.issuer,
              let issuerKeys = keys[issuer] else { return first }
        guard await issuerKeys.refreshAfterUnknownKey() else { return first }
        return verify(token)
    }

    /// Verifies `token` against the keys held now (no JWKS is read).
    public func verify(_ token: String) -> Result<Verified, JWTRefusal> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(JWTRefusal(.malformed, "the token is not three base64url parts")) }
        guard let header = Self.json(parts[0]) else { return .failure(JWTRefusal(.malformed, "the token's header is not base64url JSON")) }
        guard let payload = Self.json(parts[1]) else { return .failure(JWTRefusal(.malformed, "the token's payload is not base64url JSON")) }
        guard let algorithm = header["alg"] as? String else { return .failure(JWTRefusal(.malformed, "the token's header names no alg")) }
        // RFC 7515 §4.1.11: a token whose header makes extensions critical must be refused by
        // a verifier that knows none of them.
        guard header["crit"] == nil else { return .failure(JWTRefusal(.malformed, "the token's header has crit extensions, which this server does not know")) }
        guard let iss = payload["iss"] as? String else { return .failure(JWTRefusal(.wrongIssuer, "the token has no iss claim")) }
        guard let issuerKeys = keys[iss] else {
            return .failure(JWTRefusal(.wrongIssuer, "the token's issuer \(Self.quoted(iss)) is not one this server accepts"))
        }
        let issuer = issuerKeys.issuer
        guard issuer.algorithms.contains(algorithm) else {
            return .failure(JWTRefusal(.algorithmNotAllowed, "the token's alg \(Self.quoted(algorithm)) is not allowed for issuer \(iss) (\(issuer.algorithms.joined(separator: ", ")))", issuer: iss))
        }
        let kid = header["kid"] as? String
        guard let key = issuerKeys.key(kid: kid, algorithm: algorithm) else {
            let named = kid.map { "key \(Self.quoted($0))" } ?? "no key (kid)"
            let detail = kid.map { issuerKeys.holds(kid: $0) } == true ? " for \(algorithm)" : ""
            return .failure(JWTRefusal(.unknownKey, "the token names \(named)\(detail), which issuer \(iss) does not have", issuer: iss))
        }
        guard let signature = Self.base64URLDecoded(parts[2]), !signature.isEmpty else {
            return .failure(JWTRefusal(.badSignature, "the token's signature is missing or not base64url", issuer: iss))
        }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard (try? key.verify(signature, signs: signed)) == true else {
            return .failure(JWTRefusal(.badSignature, "the token's signature is not issuer \(iss)'s", issuer: iss))
        }

        // The claims, now that they are the issuer's.
        let now = Double(clock.wallMilliseconds()) / 1000
        let leeway = Double(issuer.leewaySeconds)
        guard let exp = Self.number(payload["exp"]) else {
            return .failure(JWTRefusal(.malformed, "the token has no numeric exp claim (an expiry is required)", issuer: iss))
        }
        guard now < exp + leeway else {
            return .failure(JWTRefusal(.expired, "the token expired at \(Int64(exp)) (now \(Int64(now)), leeway \(issuer.leewaySeconds) s)", issuer: iss))
        }
        for claim in ["nbf", "iat"] {
            guard let value = payload[claim] else { continue }
            guard let time = Self.number(value) else { return .failure(JWTRefusal(.malformed, "the token's \(claim) is not a number", issuer: iss)) }
            guard time <= now + leeway else {
                return .failure(JWTRefusal(.notYetValid, "the token's \(claim) \(Int64(time)) is ahead of the server's time \(Int64(now)) (leeway \(issuer.leewaySeconds) s)", issuer: iss))
            }
        }
        let audiences: [String]
        switch payload["aud"] {
        case let single as String: audiences = [single]
        case let list as [Any]: audiences = list.compactMap { $0 as? String }.count == list.count ? list.compactMap { $0 as? String } : []
        default: audiences = []
        }
        guard !audiences.isEmpty, audiences.allSatisfy(issuer.audiences.contains) else {
            return .failure(JWTRefusal(.wrongAudience, "the token's aud \(audiences.map(Self.quoted).joined(separator: ", ")) is not what issuer \(iss) may sign for here (\(issuer.audiences.joined(separator: ", ")))", issuer: iss))
        }
        guard let claim = payload[issuer.userClaim] as? String, !claim.isEmpty else {
            return .failure(JWTRefusal(.missingUserClaim, "the token has no \(issuer.userClaim) claim naming its user", issuer: iss))
        }
        guard Self.isUsableClaim(claim) else {
            return .failure(JWTRefusal(.missingUserClaim, "the token's \(issuer.userClaim) claim is not a usable user name: 1–\(Self.maxClaimBytes) of [A-Za-z0-9._@|+=~:-]", issuer: iss))
        }
        let validUntil = (exp + leeway) * 1000
        return .success(Verified(user: issuer.userName(claim: claim),
                                 validUntilMilliseconds: validUntil >= Double(UInt64.max) ? .max : UInt64(max(0, validUntil))))
    }

    // MARK: Pieces

    /// The `iss` of a token (not verified).
    private static func issuerClaim(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return json(parts[1])?["iss"] as? String
    }

    /// The longest user claim accepted, in bytes (the name, with its prefix, stays within the
    /// 256 bytes a zone owner may have).
    static let maxClaimBytes = 200

    /// Whether a claim may name a user: the characters of providers' subject identifiers (Apple's
    /// `001234.abcd….0123`, `auth0|…`, UUIDs, e-mail addresses), none that a path, a query or a
    /// log line would read otherwise.
    static func isUsableClaim(_ claim: String) -> Bool {
        let bytes = Array(claim.utf8)
        guard (1...maxClaimBytes).contains(bytes.count) else { return false }
        return bytes.allSatisfy { c in
            (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || Array("._@|+=~:-".utf8).contains(c)
        }
    }

    private static func isBase64URL(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
    }

    /// Base64url (RFC 4648 §5) without padding, as JWTs carry it; `nil` for anything else.
    static func base64URLDecoded(_ text: Substring) -> [UInt8]? {
        guard text.utf8.allSatisfy(isBase64URL), text.utf8.count % 4 != 1 else { return nil }
        var standard = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }

    private static func json(_ part: Substring) -> [String: Any]? {
        guard let bytes = base64URLDecoded(part) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    /// A JSON number (a boolean reads as 0 or 1: an `exp` of `true` is long past).
    private static func number(_ value: Any?) -> Double? {
        guard let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        return double.isFinite ? double : nil
    }

    /// Text from a token, quoted and cut short for a message.
    private static func quoted(_ text: String) -> String {
        "\"" + String(text.unicodeScalars.prefix(80).filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" }) + "\""
    }
}

/// A bearer JWT refused: why (the `reason` of the `401 unauthorized` answer) and what exactly.
public struct JWTRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: AuthRefusalReason
    public var message: String
    /// The token's issuer, once it is known to be a configured one.
    public var issuer: String?

    public init(_ reason: AuthRefusalReason, _ message: String, issuer: String? = nil) {
        self.reason = reason
        self.message = message
        self.issuer = issuer
    }

    public var description: String { "\(reason): \(message)" }
}
