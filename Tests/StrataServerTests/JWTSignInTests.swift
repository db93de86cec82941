import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import JWTKit
import Logging
import StrataCore
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing

/// Sign-in with bearer JWTs: a test issuer signs tokens with keys the test generates (ES256 on
/// P-256, RS256 on a 2048-bit RSA key), and a live server on a real port verifies them against
/// the issuer's JWKS — a file, or a URL served by a small HTTP server in the test.
@Suite("Sign-in with JWTs")
struct JWTSignInTests {
    static let iss = "https://issuer.example"
    static let audience = "com.example.notes"
    /// The wall clock of most tests: fixed, so that times in tokens are exact.
    static let now: UInt64 = 1_800_000_000

    // MARK: Helpers

    /// A live server accepting the static token of alice and the JWTs of `issuers`, whose
    /// verifier reads the time from `clock`; failed authentications are not limited unless
    /// `failedAuthLimit` says so.
    func withServer(_ issuers: [JWTIssuer], clock: TestClock = TestClock(), failedAuthLimit: RateLimit = .unlimited, maxWait: Duration? = nil,
                    _ body: @Sendable (Int, JWTVerifier, StrataServerApp) async throws -> Void) async throws {
        try await withStorage(.embedded) { storage in
            let verifier = try await JWTVerifier.load(issuers, clock: clock.serverClock)
            var configuration = ServerConfiguration(port: 0)
            configuration.limits.failedAuthLimit = failedAuthLimit
            if let maxWait { configuration.limits.maxWait = maxWait }
            let app = StrataServerApp(storage: storage, users: try UserDirectory(tokens: ["alice": Token.alice, "dotted": "a.b.c"]),
                                      configuration: configuration, jwt: verifier)
            try await withLiveServer(app: app) { port in try await body(port, verifier, app) }
        }
    }

    func call(_ port: Int, _ method: String, _ path: String, token: String, body: [UInt8] = []) async throws -> RawConnection.Answer {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        return try #require(await connection.exchange(method, path, token: token, body: body), "no answer to \(method) \(path)")
    }

    func error(_ answer: RawConnection.Answer) -> (code: String?, reason: String?) {
        let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
        let detail = object?["error"] as? [String: Any]
        return (detail?["code"] as? String, detail?["reason"] as? String)
    }

    func text(_ answer: RawConnection.Answer) -> String { "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))" }

    /// Creates zone `notes` as the token's user and pushes one transaction to it.
    func createAndPush(_ port: Int, token: String) async throws {
        let created = try await call(port, "PUT", "/v1/zones/notes", token: token)
        #expect(created.status == 201, "\(text(created))")
        let pushed = try await call(port, "POST", "/v1/zones/notes/push", token: token,
                                    body: TransactionFrames.encode([transaction(ReplicaID.random(), 1...1).encoded()]))
        #expect(pushed.status == 200, "\(text(pushed))")
    }

    /// The transactions of `owner`'s zone `notes` as `token` pulls them, or the refusal's status.
    func pull(_ port: Int, owner: String, token: String) async throws -> (status: Int, count: Int) {
        let answer = try await call(port, "GET", "/v1/zones/notes/changes?owner=\(owner)", token: token)
        guard answer.status == 200 else { return (answer.status, 0) }
        return (200, try TransactionFrames.decode(answer.body).count)
    }

    func issuer(_ jwks: String, algorithms: [String] = ["ES256", "RS256"], prefix: String = "idp", iss: String = iss,
                leeway: Int = 60, url: Bool = false) -> JWTIssuer {
        JWTIssuer(issuer: iss, audiences: [Self.audience], jwksFile: url ? nil : jwks, jwksURL: url ? jwks : nil,
                  algorithms: algorithms, userPrefix: prefix, leewaySeconds: leeway)
    }

    /// Claims valid at ``now`` for `sub`.
    static func claims(_ sub: String = "001234.abcdef.0042", iss: String = iss) -> [String: any Sendable] {
        ["iss": iss, "aud": audience, "sub": sub, "iat": now - 10, "exp": now + 600]
    }

    // MARK: Accepted

    @Test("a valid ES256 token and a valid RS256 token are accepted and sign in as the issuer's namespaced user, who pushes to and reads their zone; the static-token user cannot read it")
    func validTokensOfEachAlgorithm() async throws {
        let directory = TemporaryDirectory()
        let ec = TestKey.es256("ec-1"), rsa = try await TestKey.rs256("rsa-1")
        let jwks = try directory.write("jwks.json", TestKey.jwks([ec, rsa]))
        try await withServer([issuer(jwks)]) { port, _, _ in
            let es = try ec.token(Self.claims())
            let rs = try rsa.token(Self.claims())
            try await createAndPush(port, token: es)
            // The same user by the other algorithm: the zone is theirs, under their namespaced name.
            #expect(try await pull(port, owner: "idp:001234.abcdef.0042", token: rs) == (200, 1))
            let described = try await call(port, "GET", "/v1/zones/notes", token: rs)
            #expect(described.status == 200, "\(text(described))")
            let zone = try JSONDecoder().decode(ZoneDescription.self, from: Data(described.body))
            #expect(zone.owner == "idp:001234.abcdef.0042")
            // Alice (a static token) does not see it.
            #expect(try await pull(port, owner: "idp:001234.abcdef.0042", token: Token.alice).status != 200)
        }
    }

    // MARK: Refused

    enum Refusal: String, CaseIterable, Sendable {
        case expired, notYetValid, wrongAudience, wrongIssuer, algNone, hs256WithPublicKey, unsupportedAlgorithm, tamperedPayload,
             tamperedSignature, unknownKid, missingSub, missingExp, unreadablePayload
    }

    @Test("each bad token is refused with 401 unauthorized and its typed reason", arguments: Refusal.allCases)
    func refusals(_ refusal: Refusal) async throws {
        let directory = TemporaryDirectory()
        let ec = TestKey.es256("ec-1"), rsa = try await TestKey.rs256("rsa-1")
        let jwks = try directory.write("jwks.json", TestKey.jwks([ec, rsa]))
        // RS256 only: an ES256 token of a key the issuer holds is refused for its algorithm.
        try await withServer([issuer(jwks, algorithms: ["RS256"])]) { port, _, _ in
            let token: String
            let reason: AuthRefusalReason
            var claims = Self.claims()
            switch refusal {
            case .expired:
                claims["exp"] = Self.now - 61
                (token, reason) = (try rsa.token(claims), .expired)
            case .notYetValid:
                claims["nbf"] = Self.now + 61
                (token, reason) = (try rsa.token(claims), .notYetValid)
            case .wrongAudience:
                claims["aud"] = ["com.example.other"]
                (token, reason) = (try rsa.token(claims), .wrongAudience)
            case .wrongIssuer:
                claims["iss"] = "https://elsewhere.example"
                (token, reason) = (try rsa.token(claims), .wrongIssuer)
            case .algNone:
                (token, reason) = (try TestKey.unsigned(header: ["alg": "none", "kid": "rsa-1"], claims: claims) + "", .algorithmNotAllowed)
            case .hs256WithPublicKey:
                // The classic confusion: HMAC keyed with the issuer's public key, which anyone has.
                let publicKey = Array(try rsa.publicKeyPEM().utf8)
                (token, reason) = (try TestKey.signed(header: ["alg": "HS256", "kid": "rsa-1", "typ": "JWT"], claims: claims) { input in
                    Array(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: publicKey)))
                }, .algorithmNotAllowed)
            case .unsupportedAlgorithm:
                (token, reason) = (try ec.token(claims), .algorithmNotAllowed)
            case .tamperedPayload:
                let parts = try rsa.token(claims).split(separator: ".").map(String.init)
                let forged = try TestKey.base64URL(JSONSerialization.data(withJSONObject: Self.claims("someone-else"), options: [.sortedKeys]))
                (token, reason) = ([parts[0], forged, parts[2]].joined(separator: "."), .badSignature)
            case .tamperedSignature:
                var parts = try rsa.token(claims).split(separator: ".").map(String.init)
                var signature = try #require(JWTVerifier.base64URLDecoded(Substring(parts[2])))
                signature[signature.count / 2] ^= 0x01
                parts[2] = TestKey.base64URL(Data(signature))
                (token, reason) = (parts.joined(separator: "."), .badSignature)
            case .unknownKid:
                (token, reason) = (try await TestKey.rs256("rsa-unknown").token(claims), .unknownKey)
            case .missingSub:
                claims["sub"] = nil
                (token, reason) = (try rsa.token(claims), .missingUserClaim)
            case .missingExp:
                claims["exp"] = nil
                (token, reason) = (try rsa.token(claims), .malformed)
            case .unreadablePayload:
                let header = TestKey.base64URL(Data(#"{"alg":"RS256","kid":"rsa-1"}"#.utf8))
                (token, reason) = ("\(header).bm90IGpzb24.c2ln", .malformed)
            }
            let answer = try await call(port, "GET", "/v1/zones", token: token)
            #expect(answer.status == 401, "\(refusal): \(text(answer))")
            #expect(error(answer).code == "unauthorized", "\(refusal)")
            #expect(error(answer).reason == reason.name, "\(refusal): \(text(answer))")
        }
    }

    @Test("the clock leeway holds both ways: expired or not yet valid by less than the leeway is accepted, by more refused")
    func leewayBounds() async throws {
        let directory = TemporaryDirectory()
        let ec = TestKey.es256("ec-1")
        let jwks = try directory.write("jwks.json", TestKey.jwks([ec]))
        try await withServer([issuer(jwks, leeway: 60)]) { port, _, _ in
            for (claim, offset, accepted) in [("exp", -59, true), ("exp", -61, false), ("nbf", 59, true), ("nbf", 61, false),
                                              ("iat", 59, true), ("iat", 61, false)] as [(String, Int64, Bool)] {
                var claims = Self.claims()
                claims[claim] = Int64(Self.now) + offset
                let answer = try await call(port, "GET", "/v1/zones", token: try ec.token(claims))
                #expect(answer.status == (accepted ? 200 : 401), "\(claim) now\(offset >= 0 ? "+" : "")\(offset): \(text(answer))")
                if !accepted { #expect(error(answer).reason == (claim == "exp" ? "expired" : "notYetValid")) }
            }
        }
        // A leeway is bounded: more than 5 minutes is refused.
        #expect(throws: JWTConfigurationError.self) { try issuer(jwks, leeway: 301).validate() }
        #expect(throws: Never.self) { try issuer(jwks, leeway: 300).validate() }
    }

    // MARK: Key rotation

    @Test("key rotation with a JWKS file: a new key is picked up without a restart, a removed key is refused, and unknown kids read the file at most once per interval")
    func rotationWithFile() async throws {
        let directory = TemporaryDirectory()
        let old = TestKey.es256("2026-01"), new = try await TestKey.rs256("2026-02")
        let jwks = try directory.write("jwks.json", TestKey.jwks([old]))
        let clock = TestClock()
        try await withServer([issuer(jwks)], clock: clock) { port, verifier, _ in
            #expect(try await call(port, "GET", "/v1/zones", token: try old.token(Self.claims())).status == 200)
            // The issuer rotates: the new key replaces the old one.
            _ = try directory.write("jwks.json", TestKey.jwks([new]))
            let accepted = try await call(port, "GET", "/v1/zones", token: try new.token(Self.claims()))
            #expect(accepted.status == 200, "\(text(accepted))")
            let removed = try await call(port, "GET", "/v1/zones", token: try old.token(Self.claims()))
            #expect(removed.status == 401 && error(removed).reason == "unknownKey", "\(text(removed))")
            #expect(verifier.keyReads(issuer: Self.iss) == 2, "the removed key's token read the file again within the interval")
            // Once the interval has passed, an unknown kid reads the file again.
            clock.advance(by: .seconds(31))
            _ = try await call(port, "GET", "/v1/zones", token: try TestKey.es256("2026-03").token(Self.claims()))
            #expect(verifier.keyReads(issuer: Self.iss) == 3)
        }
    }

    @Test("keys older than an hour are read again when a token uses them, so that a removed key stops being accepted even if no token names a new one")
    func oldKeysAreReadAgain() async throws {
        let directory = TemporaryDirectory()
        let kept = TestKey.es256("kept"), removed = TestKey.es256("removed")
        let jwks = try directory.write("jwks.json", TestKey.jwks([kept, removed]))
        let clock = TestClock()
        try await withServer([issuer(jwks)], clock: clock) { port, verifier, _ in
            _ = try directory.write("jwks.json", TestKey.jwks([kept]))
            // Within the hour, the keys held are used as they are.
            #expect(try await call(port, "GET", "/v1/zones", token: try removed.token(Self.claims())).status == 200)
            #expect(verifier.keyReads(issuer: Self.iss) == 1)
            clock.advance(by: .seconds(3600))
            // The request that finds the keys old is verified with them; the read runs beside it.
            #expect(try await call(port, "GET", "/v1/zones", token: try kept.token(Self.claims())).status == 200)
            for _ in 0..<500 where verifier.keyReads(issuer: Self.iss) != 2 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(verifier.keyReads(issuer: Self.iss) == 2)
            let refused = try await call(port, "GET", "/v1/zones", token: try removed.token(Self.claims()))
            #expect(refused.status == 401 && error(refused).reason == "unknownKey", "\(text(refused))")
        }
    }

    @Test("key rotation with a JWKS URL served over HTTP: a new key is picked up without a restart, a removed key is refused, the URL is fetched at most once per interval; a fetch that fails keeps the keys held")
    func rotationWithURL() async throws {
        let old = try await TestKey.rs256("old"), new = TestKey.es256("new")
        let served = Mutex<(body: String, status: Int, fetches: Int)>((try TestKey.jwks([old]), 200, 0))
        let router = Router()
        router.get("/keys") { _, _ -> Response in
            let (body, status) = served.withLock { state in
                state.fetches += 1
                return (state.body, state.status)
            }
            return Response(status: .init(code: status), headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
        }
        let clock = TestClock()
        try await withRouterServer(router) { url in
            try await withServer([issuer(url.absoluteString + "/keys", url: true)], clock: clock) { port, _, _ in
                #expect(served.withLock { $0.fetches } == 1, "the keys are fetched once at start")
                #expect(try await call(port, "GET", "/v1/zones", token: try old.token(Self.claims())).status == 200)
                try served.withLock { $0.body = try TestKey.jwks([new]) }
                let accepted = try await call(port, "GET", "/v1/zones", token: try new.token(Self.claims()))
                #expect(accepted.status == 200, "\(text(accepted))")
                let removed = try await call(port, "GET", "/v1/zones", token: try old.token(Self.claims()))
                #expect(removed.status == 401 && error(removed).reason == "unknownKey", "\(text(removed))")
                #expect(served.withLock { $0.fetches } == 2)
                // The issuer's endpoint fails: the keys held stay.
                served.withLock { $0.status = 500 }
                clock.advance(by: .seconds(31))
                let unknown = try await call(port, "GET", "/v1/zones", token: try TestKey.es256("other").token(Self.claims()))
                #expect(unknown.status == 401 && error(unknown).reason == "unknownKey")
                #expect(served.withLock { $0.fetches } == 3)
                #expect(try await call(port, "GET", "/v1/zones", token: try new.token(Self.claims())).status == 200)
            }
        }
    }

    @Test("a JWKS that cannot be loaded at start is a clear error naming the issuer and the source")
    func unloadableKeys() async throws {
        let directory = TemporaryDirectory()
        let missing = directory.path + "/absent.json"
        await #expect {
            _ = try await JWTVerifier.load([issuer(missing)])
        } throws: { error in
            "\(error)".contains(Self.iss) && "\(error)".contains(missing)
        }
        let empty = try directory.write("empty.json", #"{"keys": []}"#)
        await #expect(throws: JWTConfigurationError.self) { _ = try await JWTVerifier.load([issuer(empty)]) }
        // Only https, or http to a loopback address, for a JWKS URL.
        #expect(throws: JWTConfigurationError.self) { try issuer("http://keys.example/jwks", url: true).validate() }
        #expect(throws: JWTConfigurationError.self) { try issuer(empty, algorithms: ["HS256"]).validate() }
        #expect(throws: JWTConfigurationError.self) { try issuer(empty, algorithms: ["none"]).validate() }
    }

    @Test("a JWKS fetch is bounded: an answer over 1 MiB, a redirect, a non-200 answer and one that does not come in time are each refused with the reason")
    func fetchBounds() async throws {
        let router = Router()
        router.get("/huge") { _, _ in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(repeating: UInt8(ascii: " "), count: JWTIssuerKeys.maxJWKSBytes + 1)))
        }
        router.get("/moved") { _, _ in Response(status: .found, headers: [.location: "/keys"]) }
        router.get("/keys") { _, _ in Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"keys": []}"#))) }
        router.get("/missing") { _, _ in Response(status: .notFound) }
        router.get("/stalled") { _, _ in
            try await Task.sleep(for: .seconds(300))
            return Response(status: .ok)
        }
        try await withRouterServer(router) { url in
            // An answer that does not come within the fetch's time is given up on: the fetch
            // ends with the timeout's reason, long before the stalled answer would come (not
            // a measure of how soon: a loaded machine may run the deadline late).
            let started = ContinuousClock.now
            do {
                let bytes = try await JWKSFetch.get(try #require(URL(string: url.absoluteString + "/stalled")), limit: 1000, timeout: .seconds(1))
                Issue.record("/stalled was fetched: \(bytes.count) bytes")
            } catch let failure as JWKSFetch.Failure {
                #expect(failure.description == "no complete answer within 1 s", "\(failure)")
            }
            #expect(ContinuousClock.now - started < .seconds(150), "the fetch waited for the stalled answer")
            // The byte bound, with the issuer's limit but a deadline no loaded machine reaches
            // (under a full first round, the issuer's own 10 s ran out once before 1 MiB came).
            do {
                let bytes = try await JWKSFetch.get(try #require(URL(string: url.absoluteString + "/huge")), limit: JWTIssuerKeys.maxJWKSBytes, timeout: .seconds(150))
                Issue.record("/huge was fetched: \(bytes.count) bytes")
            } catch let failure as JWKSFetch.Failure {
                #expect(failure.description.contains("bytes"), "/huge: \(failure)")
            }
            for (path, why) in [("moved", "redirects are not followed"), ("missing", "HTTP 404")] {
                let target = try #require(URL(string: url.absoluteString + "/" + path))
                do {
                    let bytes = try await JWTIssuerKeys.fetch(target, issuer: Self.iss)
                    Issue.record("/\(path) was fetched: \(bytes.count) bytes")
                } catch let error as JWTConfigurationError {
                    #expect(error.message.contains(why), "/\(path): \(error.message)")
                }
            }
        }
    }

    // MARK: Namespaces

    @Test("two issuers with the same sub sign in as two different users, who cannot read each other's zones")
    func twoIssuersSameSubject() async throws {
        let directory = TemporaryDirectory()
        let appleKey = TestKey.es256("a"), acmeKey = TestKey.es256("b")
        let apple = issuer(try directory.write("apple.json", TestKey.jwks([appleKey])), prefix: "apple", iss: "https://appleid.apple.com")
        let acme = issuer(try directory.write("acme.json", TestKey.jwks([acmeKey])), prefix: "acme", iss: "https://login.acme.example")
        try await withServer([apple, acme]) { port, _, _ in
            let asApple = try appleKey.token(Self.claims("same", iss: apple.issuer))
            let asAcme = try acmeKey.token(Self.claims("same", iss: acme.issuer))
            try await createAndPush(port, token: asApple)
            #expect(try await pull(port, owner: "apple:same", token: asApple) == (200, 1))
            #expect(try await pull(port, owner: "apple:same", token: asAcme).status != 200, "acme's user read apple's user's zone")
            #expect(try await pull(port, owner: "acme:same", token: asAcme).status == 404, "acme's user has no zone notes")
            // A JWT user is granted access by name like any other user.
            let granted = try await call(port, "PUT", "/v1/zones/notes", token: asApple,
                                         body: Array(#"{"access": "shared", "grants": {"acme:same": "read"}}"#.utf8))
            #expect(granted.status == 200, "\(text(granted))")
            #expect(try await pull(port, owner: "apple:same", token: asAcme) == (200, 1))
            // A key of one issuer does not sign for the other.
            let crossed = try await call(port, "GET", "/v1/zones", token: try acmeKey.token(Self.claims("same", iss: apple.issuer)))
            #expect(crossed.status == 401 && error(crossed).reason == "unknownKey", "\(text(crossed))")
        }
        // Two issuers with one prefix would share users: refused.
        var clash = acme
        clash.userPrefix = "apple"
        await #expect(throws: JWTConfigurationError.self) { _ = try await JWTVerifier.load([apple, clash]) }
    }

    @Test("static tokens keep working beside JWTs (a dotted one too), and no static user may take a name in an issuer's namespace")
    func staticTokensBeside() async throws {
        let directory = TemporaryDirectory()
        let key = TestKey.es256("k")
        let jwks = try directory.write("jwks.json", TestKey.jwks([key]))
        try await withServer([issuer(jwks)]) { port, verifier, app in
            try await createAndPush(port, token: Token.alice)
            #expect(try await pull(port, owner: "alice", token: Token.alice) == (200, 1))
            #expect(try await call(port, "GET", "/v1/zones", token: "a.b.c").status == 200, "a static token with dots is not a JWT")
            // A users file naming a user in the issuer's namespace is refused (and its token too,
            // should such a directory be served anyway).
            let clashing = try UserDirectory(tokens: ["alice": Token.alice, "idp:001234.abcdef.0042": "sneaky"])
            #expect(throws: UserDirectoryError.self) { try verifier.checkNoClash(with: clashing) }
            app.userRegistry.replace(with: clashing)
            #expect(try await call(port, "GET", "/v1/zones", token: "sneaky").status == 401)
            #expect(try await call(port, "GET", "/v1/zones", token: Token.alice).status == 200)
        }
    }

    @Test("a server with JWT issuers refuses to reload a users file naming a user in an issuer's namespace, and keeps the users it had")
    func reloadRefusesClashingUsersFile() async throws {
        let directory = TemporaryDirectory()
        let jwks = try directory.write("jwks.json", TestKey.jwks([TestKey.es256("k")]))
        let usersFile = directory.sub("users.json")
        func writeUsers(_ names: [String]) throws {
            let users = names.map { #"{"name": "\#($0)", "tokenSHA256": "\#(UserDirectory.digest(of: $0 + "-token"))"}"# }
            _ = try directory.write("users.json", #"{"users": [\#(users.joined(separator: ","))]}"#)
            #expect(chmod(usersFile, 0o600) == 0)
        }
        try writeUsers(["alice"])
        let registry = try UserRegistry(loading: usersFile)
        let verifier = try await JWTVerifier.load([issuer(jwks)])
        try await withStorage(.embedded) { storage in
            _ = StrataServerApp(storage: storage, users: registry, jwt: verifier)
            let logger = Logger(label: "test")
            try writeUsers(["alice", "idp:intruder"])
            #expect(!registry.reload(logger: logger), "a users file with a user in the issuer's namespace was reloaded")
            #expect(registry.current.names == ["alice"])
            try writeUsers(["alice", "bob"])
            #expect(registry.reload(logger: logger))
            #expect(registry.current.names == ["alice", "bob"])
        }
    }

    // MARK: Requests in flight and limits

    @Test("a long poll whose JWT expires while it waits ends with 401 and the reason expired, as a revoked static token's does")
    func longPollOutlivingItsToken() async throws {
        let directory = TemporaryDirectory()
        let key = TestKey.es256("k")
        let jwks = try directory.write("jwks.json", TestKey.jwks([key]))
        let clock = TestClock(wallSeconds: UInt64(Date().timeIntervalSince1970))
        // Polls may wait ten minutes here: answered long before that, the poll was ended by the
        // token's expiry and not by its wait, however slow a loaded machine makes the rest.
        try await withServer([issuer(jwks, leeway: 0)], clock: clock, maxWait: .seconds(600)) { port, _, app in
            var claims = Self.claims()
            claims["iat"] = clock.wallSeconds
            claims["exp"] = clock.wallSeconds + 3600
            let long = try key.token(claims)
            try await createAndPush(port, token: long)
            // A token that expires in five seconds of the server's real time (the zone's token
            // is read with the long one, so only the poll has to start within those seconds).
            let expiry = UInt64(Date().timeIntervalSince1970) + 5
            claims["exp"] = expiry
            let short = try key.token(claims)
            let poll = try RawConnection(port: port, readLimit: 660)
            defer { poll.close() }
            clock.follow()  // from now on the verifier reads the real wall clock
            let owner = "idp:001234.abcdef.0042"
            let zone = try await call(port, "GET", "/v1/zones/notes", token: long)
            let token = try JSONDecoder().decode(ZoneDescription.self, from: Data(zone.body)).token
            #expect(poll.send("GET /v1/zones/notes/changes?after=\(token)&wait=590 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(short)\r\n\r\n"))
            // The poll waits no longer than its token is valid; one that begins waiting only
            // after the token expired (a loaded machine) waits not at all.
            for _ in 0..<100 where app.notifier.waiterCount(zone: "\(owner)/notes") == 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            let answer = try #require(await poll.readAnswer(), "no answer to the poll")
            #expect(answer.status == 401, "\(text(answer))")
            #expect(error(answer).reason == "expired", "\(text(answer))")
            #expect(UInt64(Date().timeIntervalSince1970) < expiry + 300, "the poll waited for its whole wait (590 s), not for the token's expiry")
        }
    }

    @Test("refused JWTs count as failed authentications: past the limit, even a valid token from that address is answered 429")
    func failedAuthLimitCountsJWTs() async throws {
        let directory = TemporaryDirectory()
        let key = TestKey.es256("k")
        let jwks = try directory.write("jwks.json", TestKey.jwks([key]))
        try await withServer([issuer(jwks)], failedAuthLimit: RateLimit(requestsPerSecond: 0.001, burst: 3)) { port, _, _ in
            var expired = Self.claims()
            expired["exp"] = Self.now - 3600
            for _ in 0..<3 {
                #expect(try await call(port, "GET", "/v1/zones", token: try key.token(expired)).status == 401)
            }
            let answer = try await call(port, "GET", "/v1/zones", token: try key.token(Self.claims()))
            #expect(answer.status == 429, "\(text(answer))")
        }
    }
}

// MARK: - Test issuer

/// A key of the test issuer: it signs tokens and appears in the issuer's JWKS.
enum TestKey: Sendable {
    case es256(String, P256.Signing.PrivateKey)
    case rs256(String, _RSA.Signing.PrivateKey)

    static func es256(_ kid: String) -> TestKey { .es256(kid, P256.Signing.PrivateKey()) }
    /// An RSA key per `kid`, made once per test process on a thread of its own: a 2048-bit RSA
    /// key takes seconds of CPU in a debug build, and made on the cooperative pool (two threads
    /// here) it held up every other test's tasks — servers, timers, long polls — until their
    /// clients timed out.
    static func rs256(_ kid: String) async throws -> TestKey {
        if let key = rsaKeys.withLock({ $0[kid] }) { return .rs256(kid, key) }
        let made: Result<_RSA.Signing.PrivateKey, any Error> = await withCheckedContinuation { done in
            let thread = Thread {
                done.resume(returning: Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) })
            }
            thread.start()
        }
        let key = try made.get()
        return .rs256(kid, rsaKeys.withLock { keys in
            if let existing = keys[kid] { return existing }
            keys[kid] = key
            return key
        })
    }

    private static let rsaKeys = Mutex<[String: _RSA.Signing.PrivateKey]>([:])

    var kid: String {
        switch self {
        case .es256(let kid, _), .rs256(let kid, _): kid
        }
    }

    /// The public key as a JWK.
    func jwk() throws -> [String: String] {
        switch self {
        case .es256(let kid, let key):
            let point = Array(key.publicKey.x963Representation.dropFirst())  // 0x04 ‖ x ‖ y
            return ["kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                    "x": Self.base64URL(Data(point.prefix(32))), "y": Self.base64URL(Data(point.suffix(32)))]
        case .rs256(let kid, let key):
            let primitives = try Insecure.RSA.PublicKey(backing: key.publicKey).getKeyPrimitives()
            return ["kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": Self.base64URL(primitives.modulus), "e": Self.base64URL(primitives.publicExponent)]
        }
    }

    func publicKeyPEM() throws -> String {
        switch self {
        case .es256(_, let key): key.publicKey.pemRepresentation
        case .rs256(_, let key): key.publicKey.pemRepresentation
        }
    }

    static func jwks(_ keys: [TestKey]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: ["keys": keys.map { try $0.jwk() }], options: [.sortedKeys]), as: UTF8.self)
    }

    /// A token of `claims` signed with this key, its `alg` and `kid` in the header.
    func token(_ claims: [String: any Sendable]) throws -> String {
        switch self {
        case .es256(let kid, let key):
            try Self.signed(header: ["alg": "ES256", "kid": kid, "typ": "JWT"], claims: claims) { try Array(key.signature(for: $0).rawRepresentation) }
        case .rs256(let kid, let key):
            try Self.signed(header: ["alg": "RS256", "kid": kid, "typ": "JWT"], claims: claims) {
                try Array(key.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation)
            }
        }
    }

    static func signed(header: [String: String], claims: [String: any Sendable], sign: ([UInt8]) throws -> [UInt8]) throws -> String {
        let input = try unsigned(header: header, claims: claims).dropLast()
        return input + "." + base64URL(Data(try sign(Array(input.utf8))))
    }

    /// `header.payload.` — a token with an empty signature.
    static func unsigned(header: [String: String], claims: [String: any Sendable]) throws -> String {
        let head = base64URL(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]))
        let body = base64URL(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        return head + "." + body + "."
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A clock tests move by hand: a fixed wall clock (or the real one, once following) and
/// monotonic time that passes only when advanced.
final class TestClock: Sendable {
    private let state: Mutex<(wall: UInt64, elapsed: Duration, follows: Bool)>

    init(wallSeconds: UInt64 = JWTSignInTests.now) { state = Mutex((wallSeconds, .zero, false)) }

    var wallSeconds: UInt64 { state.withLock { $0.wall } }

    func advance(by duration: Duration) { state.withLock { $0.elapsed += duration } }

    /// Reads the system's wall clock from now on.
    func follow() { state.withLock { $0.follows = true } }

    var serverClock: ServerClock {
        ServerClock(elapsed: { self.state.withLock { $0.elapsed } },
                    wallMilliseconds: { self.state.withLock { $0.follows ? ServerClock.systemWallMilliseconds() : $0.wall * 1000 } })
    }
}

extension TemporaryDirectory {
    /// Writes `text` to `name` in the directory and returns its path.
    func write(_ name: String, _ text: String) throws -> String {
        let path = self.path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        return path
    }
}

/// Serves `router` on a free loopback port for as long as `body` runs, with the server's URL.
private func withRouterServer(_ router: Router<BasicRequestContext>, _ body: (URL) async throws -> Void) async throws {
    let (ports, announce) = AsyncStream.makeStream(of: Int.self)
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in announce.yield(channel.localAddress?.port ?? 0) })
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0, let url = URL(string: "http://127.0.0.1:\(port)") else {
            throw CancellationError()
        }
        defer { group.cancelAll() }
        try await body(url)
    }
}
