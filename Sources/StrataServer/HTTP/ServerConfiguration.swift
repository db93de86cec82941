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
        /// Requests per user.
        public var rateLimit = RateLimit()
        /// How far ahead of the server's clock an event's timestamp may be. A push holding an
        /// event stamped later than the server's time plus this is refused with
        /// `422 clockSkew`: such a timestamp would win every later edit of its fields. Ten minutes
        /// by default — far more than honest clocks drift (NTP keeps them within a second), far
        /// less than a clock set to the wrong day or year.
        public var maxClockOffset: Duration = .seconds(600)

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

        public init() {}
    }

    /// The address to listen on.
    public var host: String
    /// The port to listen on (0 picks a free one).
    public var port: Int
    public var limits: Limits

    public init(host: String = "127.0.0.1", port: Int = 8080, limits: Limits = Limits()) {
        self.host = host
        self.port = port
        self.limits = limits
    }
}
