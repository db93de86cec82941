public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
public import NIOSSL
public import Strata
public import StrataProtocol

/// The protocol over HTTP with AsyncHTTPClient.
public struct HTTPSyncTransport: SyncTransport {
    public let server: URL
    let tokens: TokenProvider
    let client: HTTPClient
    /// The longest a single request may take (a long poll adds its wait).
    public var timeout: Duration = .seconds(30)

    /// - Parameters:
    ///   - server: the server's base URL (`http://host:port`).
    ///   - bearer: the user's token.
    ///   - client: the HTTP client to use (the caller shuts it down); by default
    ///     ``defaultClient``. A client of your own should not retry connection attempts either
    ///     (``configuration(trusting:)``).
    public init(server: URL, bearer: String, client: HTTPClient = HTTPSyncTransport.defaultClient) {
        self.init(server: server, tokens: .fixed(bearer), client: client)
    }

    /// - Parameters:
    ///   - tokens: where the bearer token comes from; asked for a fresh one after a `401`, and
    ///     the request is sent once more with it.
    public init(server: URL, tokens: TokenProvider, client: HTTPClient = HTTPSyncTransport.defaultClient) {
        self.server = server
        self.tokens = tokens
        self.client = client
    }

    /// AsyncHTTPClient's shared configuration, except that a failed connection attempt fails
    /// the request at once instead of being retried inside it until the request times out: the
    /// engine's own backoff decides when to try again, and a failed TLS handshake
    /// (``SyncError/Code/untrustedServer``) is reported at once, not after the timeout. With
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

    /// The client transports use unless given one, with ``configuration(trusting:)``; never shut
    /// down (it lives as long as the process).
    public static let defaultClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration())

    /// The URL of a zone's endpoint (`suffix` after `v1/zones/{name}`), naming the owner when the
    /// zone is another user's.
    func url(_ zone: ZoneReference, _ suffix: String = "", query: [(String, String)] = []) -> String {
        var query = query
        if let owner = zone.owner { query.append(("owner", owner)) }
        return url("v1/zones/\(zone.name)" + suffix, query: query)
    }

    func url(_ path: String, query: [(String, String)] = []) -> String {
        var components = URLComponents(url: server.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return components?.string ?? server.absoluteString + "/" + path
    }

    /// Sends with the current token; a `401` gets a fresh token from the provider and one more try
    /// (request bodies are bytes in memory, so they can be sent again).
    func send(_ request: HTTPClientRequest, extra: Duration = .zero) async throws -> (HTTPClientResponse, [UInt8]) {
        let token: String
        do {
            token = try await tokens.token()
        } catch {
            throw SyncError(.unauthorized, "the token provider failed: \(error)")
        }
        do {
            return try await send(request, token: token, extra: extra)
        } catch let refusal as SyncError where refusal.code == .unauthorized {
            let fresh: String
            do {
                fresh = try await tokens.token(replacing: token)
            } catch {
                throw SyncError(.unauthorized, "\(refusal.message); the token provider could not refresh the token: \(error)", status: refusal.status)
            }
            return try await send(request, token: fresh, extra: extra)
        }
    }

    private func send(_ request: HTTPClientRequest, token: String, extra: Duration) async throws -> (HTTPClientResponse, [UInt8]) {
        var request = request
        request.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(token)")
        do {
            let seconds = (timeout + extra).components.seconds
            let response = try await client.execute(request, timeout: .seconds(max(1, seconds)))
            let body = try await response.body.collect(upTo: 256 << 20)
            let bytes = body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
            guard (200..<300).contains(Int(response.status.code)) else { throw Self.error(from: response, body: bytes) }
            return (response, bytes)
        } catch let error as SyncError {
            throw error
        } catch where Self.isTLSFailure(error) {
            throw SyncError(.untrustedServer, "\(request.method) \(request.url): the TLS handshake failed (\(error)); is the server's certificate trusted by this client, current, and for this host?")
        } catch {
            throw SyncError(.transport, "\(request.method) \(request.url): \(error)")
        }
    }

    /// Whether `error` is a failed TLS handshake or certificate check (which no retry can fix),
    /// rather than the network failing.
    static func isTLSFailure(_ error: any Error) -> Bool {
        error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError
    }

    /// The server's JSON error, or a transport error when the body is not one.
    static func error(from response: HTTPClientResponse, body: [UInt8]) -> SyncError {
        let status = Int(response.status.code)
        let retryAfter = response.headers.first(name: "Retry-After").flatMap(Double.init)
        guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(body)) else {
            return SyncError(.transport, "unexpected answer \(status): \(String(decoding: body.prefix(200), as: UTF8.self))", status: status, retryAfter: retryAfter)
        }
        return SyncError(SyncError.Code(envelope.error.code), envelope.error.message, status: status,
                         expectedSequence: envelope.error.expected, retryAfter: retryAfter, sequence: envelope.error.sequence,
                         serverTime: envelope.error.serverTime, maxOffset: envelope.error.maxOffset)
    }

    public func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        var request = HTTPClientRequest(url: url(zone))
        request.method = .GET
        do {
            let (_, body) = try await send(request)
            guard let described = try? JSONDecoder().decode(ZoneDescription.self, from: Data(body)) else {
                throw SyncError(.malformedResponse, "the zone's description is not {name, owner, …}: \(String(decoding: body.prefix(200), as: UTF8.self))")
            }
            if let owner = zone.owner, described.owner != owner {
                throw SyncError(.malformedResponse, "asked for \(owner)'s zone \(zone.name), the server answered with \(described.owner)'s")
            }
            // A server of the first protocol revision does not say: try, and learn from a 403.
            return ZoneAccessInfo(canPush: described.canPush ?? true, maxPushBytes: described.limits?.maxBodyBytes,
                                  maxStateBytes: described.limits?.maxStateBytes)
        } catch let error as SyncError where error.code == .zoneNotFound && zone.owner == nil && create {
            var create = HTTPClientRequest(url: url(zone))
            create.method = .PUT
            create.headers.add(name: "Content-Type", value: "application/json")
            create.body = .bytes(Array(try JSONEncoder().encode(ZoneSettings(access: .private))))
            _ = try await send(create)
            // Asked again for the limits the creation's answer does not carry.
            return try await ensureZone(zone, create: false)
        }
    }

    public func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushResult {
        var request = HTTPClientRequest(url: url(zone, "/push"))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: StrataMediaType.transactions)
        request.body = .bytes(TransactionFrames.encode(transactions))
        let (_, body) = try await send(request)
        guard let answer = try? JSONDecoder().decode(PushAnswer.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "push answer is not {token, acknowledged}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer
    }

    public func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        var query = [("limit", String(limit))]
        if let token, !token.isEmpty { query.append(("after", token)) }
        if let wait { query.append(("wait", String(wait.components.seconds))) }
        var request = HTTPClientRequest(url: url(zone, "/changes", query: query))
        request.method = .GET
        let (response, body) = try await send(request, extra: wait ?? .zero)
        guard let next = response.headers.first(name: StrataHeader.nextToken) else {
            throw SyncError(.malformedResponse, "pull answer without \(StrataHeader.nextToken)")
        }
        let more = response.headers.first(name: StrataHeader.moreComing) == "true"
        let frames: [[UInt8]]
        do {
            frames = try TransactionFrames.decode(body)
        } catch {
            throw SyncError(.malformedResponse, "pull answer: \(error)")
        }
        return PullResult(transactions: frames, nextToken: next, moreComing: more)
    }

    public func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? {
        var request = HTTPClientRequest(url: url(zone, "/snapshot"))
        request.method = .GET
        do {
            let (response, body) = try await send(request)
            guard let token = response.headers.first(name: StrataHeader.snapshotToken) else {
                throw SyncError(.malformedResponse, "snapshot answer without \(StrataHeader.snapshotToken)")
            }
            return ZoneSnapshotPayload(payload: body, token: token)
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    public func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] {
        var request = HTTPClientRequest(url: url(zone, "/replicas"))
        request.method = .GET
        let (_, body) = try await send(request)
        guard let answer = try? JSONDecoder().decode(ReplicaList.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "replicas answer is not {replicas: [{replica, user, acknowledged}]}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer.replicas
    }

    public func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        var query: [(String, String)] = []
        if let token, !token.isEmpty { query.append(("after", token)) }
        if let replica {
            query.append(("replica", replica.description))
            query.append(("through", String(claim)))
        }
        var request = HTTPClientRequest(url: url(zone, "/state", query: query))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: StrataMediaType.snapshot)
        request.body = .bytes(state)
        // A large state takes a while to send and to merge.
        let (_, body) = try await send(request, extra: .seconds(Int64(state.count >> 20)))
        guard let answer = try? JSONDecoder().decode(StateAnswer.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "state answer is not {token, upToDate, acknowledged}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer
    }
}
