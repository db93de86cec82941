import Foundation
import HTTPTypes
public import Hummingbird
public import Logging
import ServiceLifecycle
import StrataProtocol

/// The log server's HTTP application: the endpoints of the sync protocol (<doc:SyncProtocol>)
/// over a ``ZoneStorage``, with bearer-token authentication, per-zone access rules, a per-user
/// rate limit and long polls.
///
/// ```swift
/// let storage = try EmbeddedZoneStorage(directory: "/var/lib/strata")
/// let users = try UserDirectory.load(from: "/etc/strata/users.json")
/// let server = StrataServerApp(storage: storage, users: users,
///                              configuration: ServerConfiguration(host: "0.0.0.0", port: 8080))
/// try await server.buildApplication().runService()
/// ```
///
/// Every answer to a bad request is an error (``ServerError``) decided before the zone is touched:
/// a bad request never changes a zone. An unexpected error is answered `500` and logged; it never
/// stops the server.
public struct StrataServerApp: Sendable {
    public let storage: any ZoneStorage
    /// The users requests authenticate against, reloadable while serving (SIGHUP).
    public let userRegistry: UserRegistry
    /// The users as of now.
    public var users: UserDirectory { userRegistry.current }
    /// The issuers whose bearer JWTs sign users in (see <doc:JWTSignIn>), if any.
    public let jwt: JWTVerifier?
    public let configuration: ServerConfiguration
    public let logger: Logger
    /// Wakes long polls when a push lands.
    public let notifier: ChangeNotifier
    /// The counters `GET /metrics` answers (see ``ServerMetrics``).
    public let metrics: ServerMetrics
    /// Tells the configured webhook which zones changed (``ServerConfiguration/webhook``).
    public let webhooks: WebhookNotifier?
    let rateLimiter: RateLimiter
    /// State uploads per user (``ServerConfiguration/Limits/stateUploadLimit``).
    let stateUploadLimiter: RateLimiter
    /// The upload memory budget and the failed-authentication limit (see ``ServerConfiguration/Limits``).
    let bounds: ServerBounds
    /// The server's time: its limits refill by it, pushed timestamps are checked against it.
    let clock: ServerClock
    /// The zones' history digests, for devices comparing themselves with a zone.
    let digestCache: ZoneDigestCache
    /// The zones' states at the positions devices report (the device registry).
    let stateDigests: ZoneStateDigests
    /// A count of divergent devices for `/metrics` under way (see `refreshDivergentDevices()`).
    let divergentCount = CountInFlight()
    /// The errors answered lately and the zones' growth, for the operator's dashboard.
    let recentErrors = RecentErrors()
    let zoneActivity = ZoneActivity()
    /// When the server was made, by ``clock``'s monotonic time (the dashboard's uptime).
    let startedAt: Duration

    /// - Parameters:
    ///   - storage: where the zones live.
    ///   - users: the users and their token digests.
    ///   - configuration: host, port, limits, quotas.
    ///   - logger: where the server logs.
    ///   - clock: the server's time (``ServerClock/system`` by default): the monotonic time the
    ///     rate limit and the failed-authentication limit refill by, and the wall clock of the
    ///     clock-skew check of pushes.
    ///   - metrics: where the server counts (a registry of its own by default).
    ///   - jwt: the issuers whose bearer JWTs are accepted beside the users' static tokens.
    public init(storage: any ZoneStorage, users: UserDirectory, configuration: ServerConfiguration = ServerConfiguration(),
                logger: Logger = Logger(label: "strata.server"), clock: ServerClock = .system, metrics: ServerMetrics = ServerMetrics(),
                jwt: JWTVerifier? = nil) {
        self.init(storage: storage, users: UserRegistry(users), configuration: configuration, logger: logger, clock: clock, metrics: metrics,
                  jwt: jwt)
    }

    /// A server whose users can be replaced while it serves (see ``UserRegistry``). With `jwt`,
    /// a reload of the users file that names a user in an issuer's namespace is refused.
    public init(storage: any ZoneStorage, users: UserRegistry, configuration: ServerConfiguration = ServerConfiguration(),
                logger: Logger = Logger(label: "strata.server"), clock: ServerClock = .system, metrics: ServerMetrics = ServerMetrics(),
                jwt: JWTVerifier? = nil) {
        self.storage = storage
        self.userRegistry = users
        self.jwt = jwt
        if let jwt { users.requiring { (directory: UserDirectory) throws(UserDirectoryError) in try jwt.checkNoClash(with: directory) } }
        self.configuration = configuration
        self.logger = logger
        let notifier = ChangeNotifier()
        self.notifier = notifier
        // A user removed or a token replaced by a reload ends that user's waiting long polls.
        users.whenReplaced { notifier.notifyAll() }
        self.metrics = metrics
        self.webhooks = configuration.webhook.map(WebhookNotifier.init(configuration:))
        // Shared by every instance on the storage when it keeps them (PostgreSQL), else in memory.
        let buckets = storage.limitBuckets
        self.rateLimiter = RateLimiter(limit: configuration.limits.rateLimit, buckets: buckets, clock: clock)
        self.stateUploadLimiter = RateLimiter(limit: configuration.limits.stateUploadLimit, buckets: buckets, clock: clock, bucket: LimitBucketName.stateUploads)
        self.bounds = ServerBounds(limits: configuration.limits, buckets: buckets, clock: clock, logger: logger)
        self.clock = clock
        self.digestCache = ZoneDigestCache(storage: storage)
        self.stateDigests = ZoneStateDigests(storage: storage)
        self.startedAt = clock.elapsed()
    }

    /// The router with every endpoint of the protocol behind the authentication middleware, and
    /// the unauthenticated operations endpoints `/health`, `/ready` and `/metrics`.
    public func buildRouter() -> Router<StrataRequestContext> {
        let router = Router(context: StrataRequestContext.self)
        // Outermost: every answer gets a request ID, is counted and timed (see ObservabilityMiddleware).
        router.add(middleware: ObservabilityMiddleware(metrics: metrics, logger: logger))
        router.add(middleware: RequestBoundsMiddleware(bounds: bounds, metrics: metrics, logger: logger))
        router.add(middleware: GatekeeperMiddleware(users: userRegistry, jwt: jwt, rateLimiter: rateLimiter, logger: logger,
                                                    recentErrors: recentErrors, clock: clock))
        router.get(RouterPath(Self.healthPath)) { _, _ in try self.json(OperationsStatus(status: "ok")) }
        router.get(RouterPath(Self.readyPath)) { _, _ in try await self.ready() }
        router.get(RouterPath(Self.metricsPath)) { _, _ in self.metricsAnswer() }
        router.get(RouterPath(StrataEndpoint.zones)) { request, context in try await self.listZones(request, context) }
        router.get(RouterPath(StrataEndpoint.databaseChanges)) { request, context in try await self.databaseChanges(request, context) }
        router.get(RouterPath(StrataEndpoint.databaseStream)) { request, context in try await self.databaseStream(request, context) }
        addDashboard(to: router)
        // Every zone endpoint: the caller, the zone named and its lookup, resolved once.
        let zone = router.group(RouterPath(StrataEndpoint.zonePattern)).add(middleware: ZoneResolution(server: self))
        zone.put { request, context in try await self.putZone(request, context) }
        zone.get { request, context in try await self.getZone(request, context) }
        zone.delete { request, context in try await self.deleteZone(request, context) }
        zone.post(RouterPath(StrataEndpoint.push)) { request, context in try await self.push(request, context) }
        zone.get(RouterPath(StrataEndpoint.changes)) { request, context in try await self.changes(request, context) }
        zone.get(RouterPath(StrataEndpoint.snapshot)) { request, context in try await self.snapshot(request, context) }
        zone.post(RouterPath(StrataEndpoint.state)) { request, context in try await self.uploadState(request, context) }
        zone.get(RouterPath(StrataEndpoint.replicas)) { request, context in try await self.replicas(request, context) }
        zone.get(RouterPath(StrataEndpoint.digests)) { request, context in try await self.digestRanges(request, context) }
        zone.post(RouterPath(StrataEndpoint.digests)) { request, context in try await self.digestAnswers(request, context) }
        zone.post(RouterPath(StrataEndpoint.stateDigests)) { request, context in try await self.stateDigestAnswers(request, context) }
        zone.post(RouterPath(StrataEndpoint.devices)) { request, context in try await self.reportDevice(request, context) }
        zone.get(RouterPath(StrataEndpoint.devices)) { request, context in try await self.listDevices(request, context) }
        zone.post(RouterPath(StrataEndpoint.accept)) { request, context in try await self.acceptShare(request, context) }
        zone.post(RouterPath(StrataEndpoint.leave)) { request, context in try await self.leaveShare(request, context) }
        zone.put(RouterPath(StrataEndpoint.assetPattern)) { request, context in try await self.beginAssetUpload(request, context) }
        zone.get(RouterPath(StrataEndpoint.assetPattern)) { request, context in try await self.assetManifest(request, context) }
        zone.put(RouterPath(StrataEndpoint.assetChunkPattern)) { request, context in try await self.putAssetChunk(request, context) }
        zone.get(RouterPath(StrataEndpoint.assetChunkPattern)) { request, context in try await self.assetChunk(request, context) }
        return router
    }

    /// The application listening on the configuration's host and port.
    ///
    /// - Parameter onRunning: called with the port listened on once the server accepts
    ///   connections (the free port picked when the configuration says port 0).
    public func buildApplication(onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) -> Application<RouterResponder<StrataRequestContext>> {
        FileDescriptorLimit.ensure(room: configuration.limits.maxConnections, logger: logger)
        return Application(
            router: buildRouter(),
            // The connection caps and timeouts (see BoundedHTTP1Channel).
            server: BoundedHTTP1Channel.builder(limits: configuration.limits, metrics: metrics, logger: logger),
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port), serverName: "strata"),
            services: backgroundServices,
            onServerRunning: { channel in await onRunning?(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }

    /// What runs beside the HTTP server, and stops with it: the webhook's deliveries.
    var backgroundServices: [any Service] {
        webhooks.map { [WebhookService(notifier: $0, server: self)] } ?? []
    }

    /// Serves until the calling task is cancelled — for a server embedded in another process (the
    /// demo, tests); it installs no signal handlers.
    public func run(onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) async throws {
        try await buildApplication(onRunning: onRunning).runService(gracefulShutdownSignals: [])
    }

    // MARK: Shutdown and operations endpoints

    /// Liveness: `GET /health` answers `200 {"status": "ok"}` while the process serves.
    static let healthPath = StrataEndpoint.health
    /// Readiness: `GET /ready` answers `200 {"status": "ready"}` while the storage is open and the
    /// server is not shutting down, `503` otherwise.
    static let readyPath = StrataEndpoint.ready

    /// Wakes the long polls of the zones another process sharing the storage changed, as the
    /// storage announces them (``ZoneStorage/changesByOthers()``), until it stops announcing or
    /// the task is cancelled. `strata serve` runs it as a service.
    public func followChangesByOthers() async {
        for await zone in storage.changesByOthers() {
            if Task.isCancelled { return }
            // Who the zone's users are is not in the announcement, and looking it up would
            // delay every wake behind a storage call: every database long poll here wakes and
            // looks (one clock read each when nothing of its user changed). Always right; a cost
            // in database polls per change made elsewhere.
            notifier.notify(zone: zone.description)
        }
    }

    /// Begins the server's shutdown: every long poll is answered at once (an empty page with the
    /// same token, `Strata-More-Coming: false`, so that clients simply poll again), later pulls no
    /// longer wait, and `/ready` answers `503 {"status": "shuttingDown"}`. Pushes are still
    /// served until the HTTP server stops. Idempotent.
    public func beginShutdown() {
        if !notifier.isShutDown { logger.info("shutting down: long polls end now") }
        notifier.shutDown()
    }

    /// Whether ``beginShutdown()`` was called.
    public var isShuttingDown: Bool { notifier.isShutDown }

    func ready() async throws -> Response {
        if isShuttingDown {
            return try json(OperationsStatus(status: "shuttingDown"), status: .serviceUnavailable)
        }
        // Any call checks that the storage is open; a zone nobody can name is the cheapest.
        do {
            _ = try await storage.zone(ZoneID(owner: "", name: ""))
        } catch {
            return try json(OperationsStatus(status: "storageUnavailable"), status: .serviceUnavailable)
        }
        return try json(OperationsStatus(status: "ready"))
    }

    // MARK: Shared steps

    /// The zone a request names: the name in the path, in the namespace of the `owner` query
    /// parameter — the caller's own when it is absent. A client never lands in another user's
    /// zone without naming that user.
    func zoneID(_ request: Request, _ context: StrataRequestContext, user: String) throws(ServerError) -> ZoneID {
        guard let name = context.parameters.get(StrataEndpoint.zoneParameter), ZoneInfo.isValidName(name) else {
            throw ServerError(.badRequest, "invalid zone name \"\(context.parameters.get(StrataEndpoint.zoneParameter) ?? "")\": 1–64 of [A-Za-z0-9._-]")
        }
        let owner = request.uri.queryParameters.get(StrataQuery.owner) ?? user
        guard !owner.isEmpty, owner.utf8.count <= 256 else {
            throw ServerError(.badRequest, "invalid owner \"\(owner.prefix(64))\"")
        }
        return ZoneID(owner: owner, name: name)
    }

    /// Runs a storage call, answering its errors as the protocol says.
    func storageCall<T>(_ body: () async throws(ZoneStorageError) -> T) async throws(ServerError) -> T {
        do {
            return try await body()
        } catch {
            throw answer(error)
        }
    }

    /// A storage error as the protocol answers it (logged when the storage itself failed).
    func answer(_ error: ZoneStorageError) -> ServerError {
        if error.code == .storageFailure || error.code == .storageFull || error.code == .storageUnavailable || ServerError(error).code == .internalError {
            logger.error("storage failed", metadata: ["error": "\(error)"])
        }
        if error.code == .storageFull { metrics.storageFull.increment() }
        if error.code == .quotaExceeded { metrics.quotaRefusals.increment() }
        return ServerError(error)
    }

    /// The request's body, refused with `413 tooLarge` past the configured limit (before reading
    /// when `Content-Length` already says so).
    ///
    /// The bytes are admitted under the upload memory budget
    /// (``ServerConfiguration/Limits/uploadMemoryBudget``) before they are read: the declared
    /// `Content-Length` at once, or step by step as a body without one arrives. With no room
    /// within ``ServerConfiguration/Limits/uploadBudgetWait`` the request is answered
    /// `503 serverBusy` with `Retry-After`. The reservation belongs to the request
    /// (``UploadReservation/current``, scoped by ``RequestBoundsMiddleware``) and is given back
    /// when it is answered, so that the bytes stay counted while the handler decodes and stores
    /// them; outside such a scope it is given back when this returns.
    func readBody(_ request: Request, limit: Int? = nil) async throws -> [UInt8] {
        let limit = limit ?? configuration.limits.maxBodyBytes
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > limit {
            throw ServerError(.tooLarge, "the body has \(declared) bytes; this server accepts at most \(limit)")
        }
        let scoped = UploadReservation.current
        let reservation = scoped ?? UploadReservation(budget: bounds.uploadBudget)
        defer { if scoped == nil { reservation.release() } }
        var reserved = 0
        if let declared {
            try await reservation.reserve(declared)
            reserved = declared
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(declared ?? 0)
        do {
            for try await buffer in request.body {
                guard bytes.count + buffer.readableBytes <= limit else {
                    throw ServerError(.tooLarge, "the body exceeds \(limit) bytes, the most this server accepts")
                }
                let needed = bytes.count + buffer.readableBytes
                if needed > reserved {
                    // No (or a wrong) length: reserve ahead in steps, not for every chunk.
                    let step = min(limit, max(needed, reserved + Self.uploadReservationStep)) - reserved
                    try await reservation.reserve(step)
                    reserved += step
                }
                bytes.append(contentsOf: buffer.readableBytesView)
            }
        } catch let error as ServerError {
            throw error
        } catch {
            // The connection ended mid-body (the client went away, or stalled past the body
            // timeout): nothing the server did wrong, and nobody left to answer.
            throw ServerError(.badRequest, "the body ended after \(bytes.count) bytes, before its end: \(error)")
        }
        return bytes
    }

    /// How far ahead a body without `Content-Length` reserves upload budget.
    static let uploadReservationStep = 1 << 20

    /// A JSON answer.
    func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The zone as answered to `user`, with the token of its log's end and whether they may push.
    func description(of zone: ZoneInfo, for user: String) async throws(ServerError) -> ZoneDescription {
        let end = try await storageCall { () async throws(ZoneStorageError) in try await storage.endPosition(zone: zone.id) }
        return ZoneDescription(zone, token: try await PullStart.token(zone, at: end, storage: storage), canPush: zone.canPush(user),
                               limits: ServerLimits(configuration.limits))
    }
}

/// Authenticates every request (bearer token → user), applies the per-user rate limit, and turns
/// every error into the protocol's JSON answer, so that nothing reaches the client as a bare 500
/// and no error stops the server.
///
/// A bearer that looks like a JWT (``JWTVerifier/looksLikeJWT(_:)``) is verified against the
/// issuers when there are any; anything else is looked up in the users file. A refused JWT is
/// answered `401 unauthorized` with its reason (`AuthRefusalReason`), and counts as a failed
/// authentication like an unknown static token.
struct GatekeeperMiddleware: RouterMiddleware {
    typealias Context = StrataRequestContext
    static let userHeader = HTTPField.Name(StrataHeader.user)!

    let users: UserRegistry
    let jwt: JWTVerifier?
    let rateLimiter: RateLimiter
    let logger: Logger
    let recentErrors: RecentErrors
    let clock: ServerClock

    // Every request's task holds this function's frame for as long as the request runs — a long
    // poll for up to a minute, on each of thousands of connections — and the task keeps the
    // memory of its deepest frames until the connection closes. So only what crosses an `await`
    // is here; building answers, errors and log lines happens in the synchronous helpers below,
    // on the thread's stack. (Written out inline, this frame was 8 KiB.)
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The operations endpoints answer without a token and outside the rate limit.
        if Self.isOperations(request) {
            do {
                return try await next(request, context)
            } catch {
                return unexpected(error, request, context)
            }
        }
        var context = context
        do {
            try await admit(request, &context)
            let response = try await next(request, context)
            logAnswered(request, context, status: response.status)
            return response
        } catch {
            return answer(error, request, context)
        }
    }

    private static func isOperations(_ request: Request) -> Bool {
        request.method == .get && StrataServerApp.operationsPaths.contains(request.uri.path)
    }

    /// Signs the caller in (into `context`) and applies their rate limit.
    @inline(never)  // its frame is gone before `next` runs (inlined, it stayed in `handle`'s)
    private func admit(_ request: Request, _ context: inout Context) async throws(ServerError) {
        let (user, validUntil) = try await authenticate(request)
        context.user = user
        context.signedInUntil = validUntil
        if let wait = await rateLimiter.acquire(user) { throw Self.overRate(user, wait: wait, limit: rateLimiter.limit) }
        // The user the client expects (its database's): another one signed in on the device
        // gets nothing done. Not a failed authentication (the token is good), but within the
        // caller's rate like any request.
        if let expected = request.headers[Self.userHeader], expected != user { throw Self.anotherUser(expected, signedIn: user) }
    }

    private static func overRate(_ user: String, wait: Duration, limit: RateLimit) -> ServerError {
        let seconds = max(1, Int((Double(wait / .nanoseconds(1)) / 1e9).rounded(.up)))
        return ServerError(.rateLimited, "user \(user) is over the rate of \(limit.requestsPerSecond) requests per second; retry in \(seconds) s",
                           retryAfter: seconds)
    }

    private static func anotherUser(_ expected: String, signedIn user: String) -> ServerError {
        ServerError(.anotherUser, "this request is for user \(expected.prefix(200)), but its token signs in \(user): nothing was done (another user signed in on a device that holds \(expected.prefix(200))'s data)")
    }

    /// The protocol's JSON answer to an error a request ended with (logged).
    @inline(never)  // kept out of `handle`'s async frame (see there)
    private func answer(_ error: any Error, _ request: Request, _ context: Context) -> Response {
        switch error {
        case let error as ServerError:
            log(error, request, context)
            return dashboardAware(error.response, error.code.name, request, context)
        case let error as HTTPError:
            let code: ErrorCode = switch error.status {
            case .notFound: .notFound
            case .contentTooLarge: .tooLarge
            case let status where status.code >= 500: .internalError
            default: ErrorCode(ErrorCode.badRequest.name, status: error.status.code)
            }
            let answer = ServerError(code, error.body ?? "\(request.method) \(request.uri.path): \(error.status.reasonPhrase)")
            log(answer, request, context)
            return dashboardAware(answer.response, answer.code.name, request, context)
        default:
            logger.error("unexpected error", metadata: metadata(request, context, status: .internalServerError).merging(["error": "\(error)"]) { $1 })
            return ServerError(.internalError, "the server failed to answer \(request.method) \(request.uri.path); try again later").response
        }
    }

    /// `response` to a failed request, recorded among the recent errors; for the dashboard, a
    /// `401` asks the browser for the operator's name and token (HTTP Basic).
    private func dashboardAware(_ response: Response, _ code: String, _ request: Request, _ context: Context) -> Response {
        recentErrors.record(RecentErrors.Entry(at: clock.wallMilliseconds(), code: code, status: response.status.code, method: "\(request.method)",
                                               path: String(request.uri.path.prefix(200)), user: context.user))
        guard response.status == .unauthorized, StrataServerApp.isDashboard(request.uri.path) else { return response }
        var response = response
        response.headers[.wwwAuthenticate] = "Basic realm=\"Strata operators\", charset=\"UTF-8\""
        return response
    }

    @inline(never)  // kept out of `handle`'s async frame (see there)
    private func logAnswered(_ request: Request, _ context: Context, status: HTTPResponse.Status) {
        logger.debug("request", metadata: metadata(request, context, status: status))
    }

    /// An operations endpoint's unexpected failure.
    @inline(never)  // kept out of `handle`'s async frame (see there)
    private func unexpected(_ error: any Error, _ request: Request, _ context: Context) -> Response {
        logger.error("unexpected error", metadata: metadata(request, context, status: .internalServerError).merging(["error": "\(error)"]) { $1 })
        return ServerError(.internalError, "the server failed to answer \(request.method) \(request.uri.path)").response
    }

    /// The caller, and until when (wall-clock milliseconds) their JWT is valid; static tokens
    /// have no end.
    private func authenticate(_ request: Request) async throws(ServerError) -> (user: String, validUntil: UInt64?) {
        // A browser on the dashboard signs in with HTTP Basic: a user's name and static token.
        if StrataServerApp.isDashboard(request.uri.path), let basic = StrataServerApp.basicCredentials(of: request) {
            guard let user = users.current.authenticate(bearer: basic.token), user == basic.user, jwt?.issuer(owningName: user) == nil else {
                throw ServerError(.unauthorized, "unknown user name or token")
            }
            return (user, nil)
        }
        guard let bearer = StrataServerApp.bearer(of: request) else {
            throw ServerError(.unauthorized, "missing or unknown bearer token (Authorization: Bearer <token>)")
        }
        if let jwt, JWTVerifier.looksLikeJWT(bearer) {
            switch await jwt.authenticate(bearer) {
            case .success(let verified): return (verified.user, verified.validUntilMilliseconds)
            case .failure(let refusal): throw ServerError(.unauthorized, "bearer JWT refused: \(refusal.message)", reason: refusal.reason)
            }
        }
        // A static user in an issuer's namespace is refused even if a users file names one (a
        // reload refuses such a file; a registry replaced in code is not checked).
        guard let user = users.current.authenticate(bearer: bearer), jwt?.issuer(owningName: user) == nil else {
            throw ServerError(.unauthorized, "missing or unknown bearer token (Authorization: Bearer <token>)")
        }
        return (user, nil)
    }

    private func log(_ error: ServerError, _ request: Request, _ context: Context) {
        var meta = metadata(request, context, status: error.status)
        meta["code"] = "\(error.code.name)"
        meta["message"] = "\(error.message)"
        if let reason = error.reason { meta["reason"] = "\(reason.name)" }
        if error.status.code >= 500 {
            logger.error("request failed", metadata: meta)
        } else {
            logger.debug("request refused", metadata: meta)
        }
    }

    private func metadata(_ request: Request, _ context: Context, status: HTTPResponse.Status) -> Logger.Metadata {
        ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(status.code)", "user": "\(context.user ?? "-")"]
    }
}

/// The body of `/health` and `/ready`.
struct OperationsStatus: Codable, Sendable, Hashable {
    var status: String
}
