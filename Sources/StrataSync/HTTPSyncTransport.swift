public import Foundation
import Strata
import StrataLog
public import StrataCore
public import StrataProtocol

/// The protocol over HTTP: every endpoint's request and how its answer is read, over an HTTP
/// stack that sends them — `URLSession` by default (``URLSessionExchange``: on Apple platforms the
/// system's proxies and trust settings, on Linux FoundationNetworking), AsyncHTTPClient with the
/// `StrataSyncAsyncHTTPClient` library, or any ``HTTPExchange``.
public struct HTTPSyncTransport: SyncTransport {
    public let server: URL
    let tokens: TokenProvider
    let exchange: any HTTPExchange
    /// The longest a single request may take (a long poll adds its wait).
    public var timeout: Duration = .seconds(30)
    /// The user every request says it is for (``expecting(user:)``).
    var expectedUser: @Sendable () -> String? = { nil }
    /// The app schema version every request says it runs (``reporting(schemaVersion:)``).
    var schemaVersion: @Sendable () -> Int? = { nil }

    /// The protocol over `URLSession` (``URLSessionExchange/shared``): the default transport,
    /// with no dependency (on Linux, FoundationNetworking's `URLSession`).
    ///
    /// - Parameters:
    ///   - server: the server's base URL (`http://host:port`).
    ///   - bearer: the user's token.
    public init(server: URL, bearer: String) {
        self.init(server: server, tokens: .fixed(bearer))
    }

    /// The protocol over `URLSession` (``URLSessionExchange/shared``).
    ///
    /// - Parameters:
    ///   - server: the server's base URL (`https://host:port`).
    ///   - tokens: where the bearer token comes from; asked for a fresh one after a `401`, and
    ///     the request is sent once more with it.
    public init(server: URL, tokens: TokenProvider) {
        self.init(server: server, tokens: tokens, exchange: URLSessionExchange.shared)
    }

    /// - Parameters:
    ///   - server: the server's base URL.
    ///   - tokens: where the bearer token comes from (see ``TokenProvider``).
    ///   - exchange: the HTTP stack that sends the requests.
    public init(server: URL, tokens: TokenProvider, exchange: any HTTPExchange) {
        self.server = server
        self.tokens = tokens
        self.exchange = exchange
    }

    /// The URL of a zone's endpoint (`suffix` after `v1/zones/{name}`), naming the owner when the
    /// zone is another user's.
    func url(_ zone: ZoneReference, _ suffix: String = "", query: [(String, String)] = []) -> String {
        var query = query
        if let owner = zone.owner { query.append((StrataQuery.owner, owner)) }
        // The endpoint paths are StrataProtocol's (the server routes the same), relative to the
        // server's URL, which may carry a path prefix of its own.
        return url(String(StrataEndpoint.zone(zone.name).dropFirst()) + suffix, query: query)
    }

    func url(_ path: String, query: [(String, String)] = []) -> String {
        var components = URLComponents(url: server.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return components?.string ?? server.absoluteString + "/" + path
    }

    /// Sends with the current token; a `401` gets a fresh token from the provider and one more try
    /// (request bodies are bytes in memory, so they can be sent again).
    func send(_ request: HTTPExchangeRequest, extra: Duration = .zero) async throws -> HTTPExchangeResponse {
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

    private func send(_ request: HTTPExchangeRequest, token: String, extra: Duration) async throws -> HTTPExchangeResponse {
        var request = request
        request.headers.append(("Authorization", "Bearer \(token)"))
        if let user = expectedUser() { request.headers.append((StrataHeader.user, user)) }
        if let version = schemaVersion() { request.headers.append((StrataHeader.schemaVersion, String(version))) }
        request.timeout = timeout + extra
        let response = try await exchange.send(request)
        guard (200..<300).contains(response.status) else { throw Self.error(from: response) }
        return response
    }

    /// The server's JSON error, or a transport error when the body is not one.
    static func error(from response: HTTPExchangeResponse) -> SyncError {
        let status = response.status
        let body = response.body
        let retryAfter = response.header("Retry-After").flatMap(Double.init)
        guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(body)) else {
            return SyncError(.transport, "unexpected answer \(status): \(String(decoding: body.prefix(200), as: UTF8.self))", status: status, retryAfter: retryAfter)
        }
        var error = SyncError(SyncError.Code(envelope.error.code), envelope.error.message, status: status,
                              expectedSequence: envelope.error.expected, retryAfter: retryAfter, sequence: envelope.error.sequence,
                              serverTime: envelope.error.serverTime, maxOffset: envelope.error.maxOffset)
        // Bounded: a list longer than any push could name is not believed past its start.
        error.assets = envelope.error.assets.map { $0.prefix(4096).compactMap(AssetHash.init(hex:)) }
        error.minSchemaVersion = envelope.error.minSchemaVersion
        return error
    }

    public func expecting(user: @escaping @Sendable () -> String?) -> any SyncTransport {
        var copy = self
        copy.expectedUser = user
        return copy
    }

    public func reporting(schemaVersion: @escaping @Sendable () -> Int?) -> any SyncTransport {
        var copy = self
        copy.schemaVersion = schemaVersion
        return copy
    }

    public func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        try await ensureZone(zone, create: create, continuing: nil)
    }

    public func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        do {
            let body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone))).body
            guard let described = try? JSONDecoder().decode(ZoneDescription.self, from: Data(body)) else {
                throw SyncError(.malformedResponse, "the zone's description is not {name, owner, …}: \(String(decoding: body.prefix(200), as: UTF8.self))")
            }
            if let owner = zone.owner, described.owner != owner {
                throw SyncError(.malformedResponse, "asked for \(owner)'s zone \(zone.name), the server answered with \(described.owner)'s")
            }
            // A server of the first protocol revision does not say: try, and learn from a 403.
            return ZoneAccessInfo(canPush: described.canPush ?? true, maxPushBytes: described.limits?.maxBodyBytes,
                                  maxStateBytes: described.limits?.maxStateBytes, lineage: described.continues ?? [],
                                  // A server that does not say what the zone continues (older
                                  // than zone lives) cannot tell a new zone from a continued one.
                                  epoch: described.continues == nil ? nil : described.epoch, maxAssetBytes: described.limits?.maxAssetBytes)
        } catch let error as SyncError where error.code == .zoneNotFound && zone.owner == nil && create {
            // No rules named: a new zone is private, and a deleted one the engine recreates
            // (`SyncEngine.recreateZone()`) gets back the access and grants it had, so that its
            // grantees are not cut off; one that continues a deleted life says which.
            _ = try await send(HTTPExchangeRequest(method: "PUT", url: url(zone), headers: [("Content-Type", "application/json")],
                                                   body: Array(try JSONEncoder().encode(ZoneSettings(continues: continuing)))))
            // Asked again for the limits the creation's answer does not carry.
            return try await ensureZone(zone, create: false)
        }
    }

    public func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        try await push(zone: zone, transactions: transactions, epoch: nil)
    }

    public func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer {
        let query = epoch.map { [(StrataQuery.epoch, String($0))] } ?? []
        let body = try await send(HTTPExchangeRequest(method: "POST", url: url(zone, StrataEndpoint.push, query: query), headers: [("Content-Type", StrataMediaType.transactions)],
                                                      body: TransactionFrames.encode(transactions))).body
        guard let answer = try? JSONDecoder().decode(PushAnswer.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "push answer is not {token, acknowledged}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer
    }

    public func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        try await pull(zone: zone, after: token, limit: limit, wait: wait, omitting: .none, replica: nil)
    }

    public func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?, omitting mask: DownloadMask, replica: ReplicaID?) async throws -> PullResult {
        var query = [(StrataQuery.limit, String(limit))]
        if !mask.isEmpty {
            query.append((StrataQuery.omit, mask.description))
            if let replica { query.append((StrataQuery.replica, replica.description)) }
        }
        if let token, !token.isEmpty { query.append((StrataQuery.after, token)) }
        if let wait { query.append((StrataQuery.wait, String(wait.components.seconds))) }
        let response = try await send(HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.changes, query: query)), extra: wait ?? .zero)
        let body = response.body
        guard let next = response.header(StrataHeader.nextToken) else {
            throw SyncError(.malformedResponse, "pull answer without \(StrataHeader.nextToken)")
        }
        let more = response.header(StrataHeader.moreComing) == "true"
        try Self.checkMasked(response, mask, what: "pull")
        let frames: [[UInt8]]
        do {
            frames = try TransactionFrames.decode(body)
        } catch {
            throw SyncError(.malformedResponse, "pull answer: \(error)")
        }
        return PullResult(transactions: frames, nextToken: next, moreComing: more)
    }

    public func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? {
        try await snapshot(zone: zone, omitting: .none)
    }

    public func snapshot(zone: ZoneReference, omitting mask: DownloadMask) async throws -> ZoneSnapshotPayload? {
        do {
            let query = mask.isEmpty ? [] : [(StrataQuery.omit, mask.description)]
            let response = try await send(HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.snapshot, query: query)))
            guard let token = response.header(StrataHeader.snapshotToken) else {
                throw SyncError(.malformedResponse, "snapshot answer without \(StrataHeader.snapshotToken)")
            }
            try Self.checkMasked(response, mask, what: "snapshot")
            return ZoneSnapshotPayload(payload: response.body, token: token)
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    /// Refuses an answer to a masked request that does not say it applied the mask: an older
    /// server ignores `omit` and sends everything, which the device must not store.
    static func checkMasked(_ response: HTTPExchangeResponse, _ mask: DownloadMask, what: String) throws {
        guard !mask.isEmpty else { return }
        let applied = response.header(StrataHeader.omitted)
        guard applied == mask.description else {
            throw SyncError(.malformedResponse, "the server's \(what) answer \(applied.map { "applied the download mask \"\($0)\"" } ?? "does not say it applied a download mask (\(StrataHeader.omitted)): an older server, which ignores them"), not \"\(mask.description)\"; nothing of it was stored")
        }
    }

    public func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] {
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.replicas))).body
        guard let answer = try? JSONDecoder().decode(ReplicaList.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "replicas answer is not {replicas: [{replica, user, acknowledged}]}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer.replicas
    }

    public func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        var query: [(String, String)] = []
        if let token, !token.isEmpty { query.append((StrataQuery.after, token)) }
        if let replica {
            query.append((StrataQuery.replica, replica.description))
            query.append((StrataQuery.through, String(claim)))
        }
        let request = HTTPExchangeRequest(method: "POST", url: url(zone, StrataEndpoint.state, query: query), headers: [("Content-Type", StrataMediaType.snapshot)], body: state)
        // A large state takes a while to send and to merge.
        let body = try await send(request, extra: .seconds(Int64(state.count >> 20))).body
        guard let answer = try? JSONDecoder().decode(StateAnswer.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "state answer is not {token, upToDate, acknowledged}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer
    }

    public func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        let body = Array(try JSONEncoder().encode(AssetManifestBody(manifest)))
        let answer = try await send(HTTPExchangeRequest(method: "PUT", url: url(zone, StrataEndpoint.asset(manifest.sha256.hex)),
                                                        headers: [("Content-Type", "application/json")], body: body)).body
        return try Self.uploadAnswer(answer)
    }

    public func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        // Bytes that compress travel compressed (photos and videos rarely do: they go as they are).
        var headers = [("Content-Type", StrataMediaType.assetChunk)]
        var body = bytes
        if let compressed = ChunkCompression.compress(bytes) {
            headers.append((StrataHeader.chunkEncoding, "lz4"))
            headers.append((StrataHeader.chunkLength, String(bytes.count)))
            body = compressed
        }
        let answer = try await send(HTTPExchangeRequest(method: "PUT", url: url(zone, StrataEndpoint.assetChunk(asset.hex, index)), headers: headers, body: body)).body
        return try Self.uploadAnswer(answer)
    }

    public func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? {
        let body: [UInt8]
        do {
            body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.asset(asset.hex)))).body
        } catch let error as SyncError where error.code == .assetNotFound {
            return nil
        }
        guard let decoded = try? JSONDecoder().decode(AssetManifestBody.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "asset manifest answer is not {sha256, size, chunkSize, chunks}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        switch decoded.manifest() {
        case .success(let manifest):
            guard manifest.sha256 == asset else {
                throw SyncError(.malformedResponse, "asked for the manifest of asset \(asset), the server answered asset \(manifest.sha256)'s")
            }
            return manifest
        case .failure(let problem):
            throw SyncError(.malformedResponse, "asset manifest answer: \(problem.message)")
        }
    }

    public func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        // Read no more than a chunk can be (as an LZ4 block, a little more): a hostile or broken
        // server cannot make a device buffer the general answer limit (256 MiB) per chunk.
        let request = HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.assetChunk(asset.hex, index)), answerLimit: Self.chunkAnswerLimit)
        let response = try await send(request)
        // Again, for an exchange of the app's own that does not keep to the request's limit.
        guard response.body.count <= Self.chunkAnswerLimit else {
            throw SyncError(.malformedResponse, "chunk \(index) of asset \(asset): an answer of \(response.body.count) bytes, more than a chunk can be (\(Self.chunkAnswerLimit))")
        }
        guard let encoding = response.header(StrataHeader.chunkEncoding) else {
            guard response.body.count <= AssetManifest.chunkSize else {
                throw SyncError(.malformedResponse, "chunk \(index) of asset \(asset): \(response.body.count) bytes, more than a chunk (\(AssetManifest.chunkSize))")
            }
            return response.body
        }
        guard encoding == "lz4", let text = response.header(StrataHeader.chunkLength), let length = Int(text), length > 0, length <= AssetManifest.chunkSize,
              let bytes = ChunkCompression.decompress(response.body, length: length) else {
            throw SyncError(.malformedResponse, "chunk \(index) of asset \(asset): a \(StrataHeader.chunkEncoding) of \"\(encoding.prefix(32))\" that does not decode")
        }
        return bytes
    }

    /// The largest asset chunk answer read: a chunk as an LZ4 block at worst (a block of `n`
    /// bytes is at most `n + n/255 + 16`), as the server bounds a chunk `PUT`'s body.
    static let chunkAnswerLimit = AssetManifest.chunkSize + AssetManifest.chunkSize / 200 + 64

    static func uploadAnswer(_ body: [UInt8]) throws -> AssetUploadAnswer {
        guard let answer = try? JSONDecoder().decode(AssetUploadAnswer.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "asset upload answer is not {missing, complete}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return answer
    }
}
