/// How the server listens and what it accepts.
///
/// ```swift
/// var configuration = ServerConfiguration(host: "0.0.0.0", port: 8080)
/// configuration.limits.maxBodyBytes = 4 << 20
/// ```
public struct ServerConfiguration: Sendable, Hashable {
    /// Limits on requests.
    public struct Limits: Sendable, Hashable {
        /// The largest request body accepted; larger ones are answered `413 tooLarge`. Twice a
        /// store's largest transaction (a log entry is at most 16 MiB), so that every transaction
        /// a store accepts can be pushed, framed, on its own.
        public var maxBodyBytes: Int = 32 << 20
        /// The largest state a client may upload to heal a zone (`POST …/state`): a device's whole
        /// projection, so larger than a push.
        public var maxStateBytes: Int = 512 << 20
        /// Transactions per pull when the request names no limit.
        public var defaultPullLimit: Int = 1000
        /// The most transactions one pull returns (a larger `limit` is lowered to this).
        public var maxPullLimit: Int = 10_000
        /// The most bytes of transactions one pull returns (at least one transaction, however
        /// large): a page of big transactions ends early, with `Strata-More-Coming: true`.
        public var maxPullBytes: Int = 32 << 20
        /// The longest a pull may wait for changes (a longer `wait` is lowered to this).
        public var maxWait: Duration = .seconds(60)
        /// The longest one stream of database changes (`GET /v1/database/stream`) stays open; the
        /// client then opens another from the last event's token. An hour by default.
        public var maxStreamDuration: Duration = .seconds(3600)
        /// How often a stream with nothing to say sends a comment, so that proxies keep it open
        /// and a client gone is noticed. 15 seconds by default.
        public var streamHeartbeat: Duration = .seconds(15)
        /// Requests per user.
        public var rateLimit = RateLimit()
        /// How far ahead of the server's clock an event's timestamp may be. A push holding an
        /// event stamped later than the server's time plus this is refused with
        /// `422 clockSkew`: such a timestamp would win every later edit of its fields. Ten minutes
        /// by default — far more than honest clocks drift (NTP keeps them within a second), far
        /// less than a clock set to the wrong day or year.
        public var maxClockOffset: Duration = .seconds(600)

        // Resource bounds: what one client, or many, may hold of the server (see
        // <doc:SyncProtocol#Limits>). Each refusal says what was refused and when to come back.

        /// How long a connection may stay open with no request on it (none being read, none
        /// being answered) before the server closes it. A long poll is a request being answered,
        /// so it never counts as idle however long it waits.
        public var idleTimeout: Duration = .seconds(60)
        /// How long a request's head (request line and headers) may take to arrive once its first
        /// byte has; a slower one (a "slowloris" client) has its connection closed.
        public var headerTimeout: Duration = .seconds(10)
        /// How long a request body may stall — no byte arriving while the server waits for
        /// one — before the connection is closed.
        public var bodyTimeout: Duration = .seconds(30)
        /// How long an answer may stall — the client not reading it, so that not one byte of
        /// what the server buffered for it drains — before the connection is closed. A client
        /// that reads slowly but steadily is never cut; a long poll sends nothing while it waits,
        /// so it never stalls.
        public var writeTimeout: Duration = .seconds(30)
        /// The most connections open at once. Each holds a file descriptor: the cap is lowered to
        /// what the process's open-files limit (`ulimit -n`) leaves after the descriptors held at
        /// start (the storage's) and a reserve (256, or a quarter of a smaller limit, at least
        /// 32), and the server says so at start. At the cap, the connection idle the longest — for
        /// at least ``ServerConfiguration/Limits/shedIdleAfter`` — is closed to admit a new one; when none is, the new one is
        /// answered `503 serverBusy` (with `Retry-After`) and closed.
        public var maxConnections: Int = 10_000
        /// How long a connection must have been idle (no request begun, none in flight) before
        /// it may be closed to admit a new connection at the cap (``ServerConfiguration/Limits/maxConnections``): a client
        /// sends its request at once, so only connections that hold a descriptor and do nothing
        /// make room. A client whose keep-alive connection is closed so retries on a new one.
        public var shedIdleAfter: Duration = .seconds(1)
        /// The most connections open at once from one client address; one more is answered
        /// `503 serverBusy` and closed.
        public var maxConnectionsPerAddress: Int = 256
        /// The bytes of request bodies (pushes, state uploads, zone settings) held in memory at
        /// once, across all requests: a body's bytes are reserved before it is read (its
        /// `Content-Length`, or as it arrives when it has none) and given back when its request is
        /// answered. A single body larger than the whole budget waits for all of it. The process's
        /// memory for uploads peaks at about three times the budget (a push's bytes, its decoded
        /// transactions and their encoding for the log are alive together; a state upload's bytes
        /// and the merged snapshot written from them, object by object): size it at a third of
        /// the memory uploads may take.
        public var uploadMemoryBudget: Int = 256 << 20
        /// How long a body waits for room in ``uploadMemoryBudget`` before the request is answered
        /// `503 serverBusy` with `Retry-After`.
        public var uploadBudgetWait: Duration = .seconds(5)
        /// Failed authentications (a missing or unknown bearer token) allowed per client address:
        /// a token bucket of `burst` failures refilled at `requestsPerSecond`. Once it is empty,
        /// every request from that address — even with a valid token — is answered
        /// `429 rateLimited` with `Retry-After` until a failure's worth has refilled. 20 per
        /// minute by default.
        public var failedAuthLimit = RateLimit(requestsPerSecond: 20.0 / 60.0, burst: 20)
        /// State uploads (`POST …/state`) a user may make: a token bucket of `burst` refilled at
        /// `requestsPerSecond`, past which an upload is answered `429 rateLimited` with
        /// `Retry-After` before its body is read. A device uploads its state only to heal a zone
        /// that lost history, so a few suffice; each upload that changes a zone expires every
        /// device's token. One every 10 seconds, 30 at once, by default.
        public var stateUploadLimit = RateLimit(requestsPerSecond: 0.1, burst: 30)
        /// Addresses of reverse proxies whose `X-Forwarded-For` header is believed: for a
        /// connection from one of them, the client address (for ``failedAuthLimit``) is the last
        /// address in that header that is not itself a trusted proxy, and its connections count
        /// only towards ``maxConnections`` (not ``maxConnectionsPerAddress``). Empty by default:
        /// the header is ignored and the connection's peer is the client.
        public var trustedProxies: [String] = []

        // Per-user quotas (see <doc:SyncProtocol#Quotas>): past one, a request is answered
        // `403 quotaExceeded` naming the quota, its limit and the current use, and changes nothing.
        // 0 means unlimited.

        /// The most zones one user may own (creating one more is refused). 1,000 by default.
        public var maxZonesPerUser: Int = 1000
        /// The most grants one zone may have (a `PUT` asking for more is refused). 1,000 by default.
        public var maxGrantsPerZone: Int = 1000
        /// The most bytes one user's zones may occupy on disk — their logs and snapshots, whoever
        /// pushed to them. A push that would go past it (counting its transactions uncompressed)
        /// is refused whole. 10 GiB by default.
        public var maxStoredBytesPerUser: Int64 = 10 << 30
        /// The largest asset accepted (an upload's manifest naming more is refused with
        /// `413 tooLarge`). Assets count toward ``maxStoredBytesPerUser``. 8 GiB by default.
        public var maxAssetBytes: UInt64 = 8 << 30
        /// The most asset uploads one user may have begun and not finished (neither complete nor
        /// dropped as abandoned by the sweep), across every zone: beginning one more is refused
        /// with `403 quotaExceeded` (resuming one already begun is not). The received chunks of
        /// unfinished uploads count toward the zone owner's ``maxStoredBytesPerUser`` as they
        /// arrive. A device's sync engine has a few uploads under way at once. 64 by default.
        public var maxUnfinishedUploadsPerUser: Int = 64
        /// The most asset uploads begun and not finished into one zone by users other than its
        /// owner (so that a zone's grantees together cannot hold more, nor lock its owner out:
        /// the owner is bounded by ``maxUnfinishedUploadsPerUser`` only). 256 by default.
        public var maxUnfinishedUploadsPerZone: Int = 256

        public init() {}
    }

    /// The address to listen on.
    public var host: String
    /// The port to listen on (0 picks a free one).
    public var port: Int
    public var limits: Limits
    /// The users (of the users file, signed in with their static token) who may open the
    /// operator's dashboard (`/dashboard`): every zone, its devices, recent errors. Nobody by
    /// default; the dashboard then answers `403` to everyone.
    public var operators: Set<String> = []
    /// Where to tell an app's backend that zones changed, so that it wakes devices (`nil`: no
    /// webhook). See ``WebhookNotifier``.
    public var webhook: WebhookConfiguration?

    public init(host: String = "127.0.0.1", port: Int = 8080, limits: Limits = Limits()) {
        self.host = host
        self.port = port
        self.limits = limits
    }
}
