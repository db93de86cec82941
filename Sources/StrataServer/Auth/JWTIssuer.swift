import Foundation

/// One issuer of bearer JWTs the server accepts (Sign in with Apple, an OpenID Connect provider):
/// its `iss`, the audiences it may sign for, where its public keys are, the algorithms it signs
/// with, the clock leeway, and how a token's user becomes a Strata user name.
///
/// A token of this issuer signs in as `<userPrefix>:<the user claim>` — `apple:001234.a1b2…` —
/// so that two issuers never produce the same user, and no static-token user (whose names cannot
/// hold a colon) is ever one of them (see <doc:JWTSignIn>).
///
/// `strata serve --jwt-issuer FILE` reads one from a JSON file:
///
/// ```json
/// {"issuer": "https://appleid.apple.com", "audiences": ["com.example.notes"],
///  "jwksURL": "https://appleid.apple.com/auth/keys", "algorithms": ["RS256"], "userPrefix": "apple"}
/// ```
public struct JWTIssuer: Sendable, Hashable, Codable {
    /// The `iss` claim of the issuer's tokens, compared exactly.
    public var issuer: String
    /// The `aud` values accepted: a token must name at least one, and nothing else (OpenID
    /// Connect's rule: a token naming an audience the server does not trust is refused).
    public var audiences: [String]
    /// A JWKS (JSON Web Key Set) file holding the issuer's public keys (or ``jwksURL``).
    public var jwksFile: String?
    /// An `https` URL of the issuer's JWKS (`http` only to a loopback address, for tests).
    public var jwksURL: String?
    /// The algorithms the issuer's tokens may use: `ES256`, `RS256` or both. Any other `alg` —
    /// `none`, `HS256`, anything not listed — is refused.
    public var algorithms: [String]
    /// The namespace of the issuer's users: 1–32 of `[A-Za-z0-9._-]`, starting with a letter or
    /// digit; a user signs in as `<userPrefix>:<claim>`.
    public var userPrefix: String
    /// The claim naming the user (`sub` by default).
    public var userClaim: String
    /// How far `exp`, `nbf` and `iat` may be off the server's clock, in seconds: 0…300, 60 by
    /// default.
    public var leewaySeconds: Int

    /// The algorithms an issuer may be configured with.
    public static let supportedAlgorithms: Set<String> = ["ES256", "RS256"]
    /// The longest clock leeway an issuer may be given (5 minutes).
    public static let maxLeewaySeconds = 300

    public init(issuer: String, audiences: [String], jwksFile: String? = nil, jwksURL: String? = nil,
                algorithms: [String], userPrefix: String, userClaim: String = "sub", leewaySeconds: Int = 60) {
        self.issuer = issuer
        self.audiences = audiences
        self.jwksFile = jwksFile
        self.jwksURL = jwksURL
        self.algorithms = algorithms
        self.userPrefix = userPrefix
        self.userClaim = userClaim
        self.leewaySeconds = leewaySeconds
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case issuer, audiences, jwksFile, jwksURL, algorithms, userPrefix, userClaim, leewaySeconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try container.decode(String.self, forKey: .issuer)
        audiences = try container.decode([String].self, forKey: .audiences)
        jwksFile = try container.decodeIfPresent(String.self, forKey: .jwksFile)
        jwksURL = try container.decodeIfPresent(String.self, forKey: .jwksURL)
        algorithms = try container.decode([String].self, forKey: .algorithms)
        userPrefix = try container.decode(String.self, forKey: .userPrefix)
        userClaim = try container.decodeIfPresent(String.self, forKey: .userClaim) ?? "sub"
        leewaySeconds = try container.decodeIfPresent(Int.self, forKey: .leewaySeconds) ?? 60
    }

    /// The user name a token of this issuer with `claim` as its user claim signs in as.
    public func userName(claim: String) -> String { userPrefix + ":" + claim }

    /// Throws unless every field is usable (see each field).
    ///
    /// - Throws: ``JWTConfigurationError`` naming the issuer and the field.
    public func validate() throws(JWTConfigurationError) {
        func fail(_ message: String) -> JWTConfigurationError { JWTConfigurationError("issuer \(issuer.isEmpty ? "(no iss)" : issuer): \(message)") }
        guard !issuer.isEmpty else { throw fail("issuer (the iss value) is empty") }
        guard !audiences.isEmpty, audiences.allSatisfy({ !$0.isEmpty }) else {
            throw fail("audiences must list at least one non-empty aud value (for Sign in with Apple, the app's bundle ID)")
        }
        switch (jwksFile, jwksURL) {
        case (nil, nil): throw fail("give the keys as jwksFile or jwksURL")
        case (.some, .some): throw fail("give jwksFile or jwksURL, not both")
        case (let file?, nil): guard !file.isEmpty else { throw fail("jwksFile is empty") }
        case (nil, let text?): _ = try Self.jwksURL(text, issuer: issuer)
        }
        guard !algorithms.isEmpty else { throw fail("algorithms must list ES256, RS256 or both") }
        for algorithm in algorithms where !Self.supportedAlgorithms.contains(algorithm) {
            throw fail("algorithm \"\(algorithm.prefix(20))\" is not accepted: only ES256 and RS256 are (never none or HS256)")
        }
        guard Self.isValidPrefix(userPrefix) else {
            throw fail("userPrefix \"\(userPrefix.prefix(40))\" must be 1–32 of [A-Za-z0-9._-], starting with a letter or digit")
        }
        guard !userClaim.isEmpty else { throw fail("userClaim is empty") }
        guard (0...Self.maxLeewaySeconds).contains(leewaySeconds) else {
            throw fail("leewaySeconds must be 0…\(Self.maxLeewaySeconds), got \(leewaySeconds)")
        }
    }

    /// Whether `prefix` may be a ``userPrefix``: 1–32 of `[A-Za-z0-9._-]`, starting with a letter
    /// or digit. It holds no colon, so that a name's namespace is what comes before its first
    /// colon, and two issuers with different prefixes can never produce the same name.
    public static func isValidPrefix(_ prefix: String) -> Bool {
        let bytes = Array(prefix.utf8)
        guard (1...32).contains(bytes.count) else { return false }
        func alphanumeric(_ c: UInt8) -> Bool {
            (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
        }
        guard alphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { alphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// The JWKS URL `text`, refused unless it is `https`, or `http` to a loopback address.
    static func jwksURL(_ text: String, issuer: String) throws(JWTConfigurationError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw JWTConfigurationError("issuer \(issuer): jwksURL \"\(text.prefix(200))\" is not a URL")
        }
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw JWTConfigurationError("issuer \(issuer): jwksURL \(text.prefix(200)) must be https (http only to a loopback address, for tests): keys fetched in the clear could be anyone's")
        }
        return url
    }

    /// Reads an issuer's JSON file (see the type's discussion), refusing unknown and duplicate
    /// keys (a misspelt field would otherwise silently keep its default), and validates it.
    ///
    /// - Throws: ``JWTConfigurationError`` naming the file.
    public static func load(from path: String) throws(JWTConfigurationError) -> JWTIssuer {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw JWTConfigurationError("cannot read the JWT issuer file \(path): \(error.localizedDescription)")
        }
        if let problem = DuplicateJSONKeys.first(in: Array(data)) {
            throw JWTConfigurationError("the JWT issuer file \(path) \(problem)")
        }
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        if let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
           let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw JWTConfigurationError("the JWT issuer file \(path): unknown key \"\(unknown)\" (the keys are \(known.sorted().joined(separator: ", ")))")
        }
        let issuer: JWTIssuer
        do {
            issuer = try JSONDecoder().decode(JWTIssuer.self, from: data)
        } catch {
            throw JWTConfigurationError("the JWT issuer file \(path) is not {\"issuer\", \"audiences\", \"jwksFile\" or \"jwksURL\", \"algorithms\", \"userPrefix\", \"userClaim\"?, \"leewaySeconds\"?}: \(error)")
        }
        do {
            try issuer.validate()
        } catch {
            throw JWTConfigurationError("the JWT issuer file \(path): \(error.message)")
        }
        return issuer
    }
}

/// A JWT issuer configuration that cannot be used, or keys that cannot be loaded: the message
/// says which issuer, which file or URL, and why.
public struct JWTConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
