import Synchronization

/// How many requests a user may make: a token bucket per user.
///
/// ```swift
/// var limit = RateLimit(requestsPerSecond: 50, burst: 100)
/// ```
public struct RateLimit: Sendable, Hashable {
    /// Requests per second a user may sustain.
    public var requestsPerSecond: Double
    /// Requests a user may make at once after being idle (the bucket's size).
    public var burst: Double

    /// A limit of `requestsPerSecond` sustained, `burst` at once (by default twice the rate).
    public init(requestsPerSecond: Double = 1000, burst: Double? = nil) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst ?? max(1, requestsPerSecond * 2)
    }

    /// No limit at all.
    public static let unlimited = RateLimit(requestsPerSecond: .infinity, burst: .infinity)
}

/// The per-user rate limit: each request takes a token from its user's bucket; tokens come back
/// at the limit's rate up to its burst. The buckets are the storage's shared ones when it has
/// them (``ZoneStorage/limitBuckets``: several instances on one database count together), else
/// this process's own.
public final class RateLimiter: Sendable {
    public let limit: RateLimit
    private let buckets: any LimitBuckets
    /// Used when the shared buckets cannot be reached, so that a database failing does not lift
    /// the limit (it then holds per instance, as it did before the buckets were shared).
    private let fallback: InProcessLimitBuckets
    private let bucket: @Sendable (String) -> LimitBucketName

    /// - Parameters:
    ///   - limit: the rate and burst allowed per key.
    ///   - buckets: where the buckets live (by default this process's memory).
    ///   - clock: the time the in-process buckets refill by (``ServerClock/elapsed``).
    ///   - bucket: the bucket of a user (by default the request rate's).
    public init(limit: RateLimit, buckets: (any LimitBuckets)? = nil, clock: ServerClock = .system,
                bucket: @escaping @Sendable (String) -> LimitBucketName = LimitBucketName.requests) {
        self.limit = limit
        fallback = InProcessLimitBuckets(clock: clock)
        self.buckets = buckets ?? fallback
        self.bucket = bucket
    }

    /// Takes a token for `user`: `nil` when the request may go ahead, else how long until a token
    /// is available again.
    public func acquire(_ user: String) async -> Duration? {
        guard limit.requestsPerSecond.isFinite else { return nil }
        let take: LimitBucketTake
        do {
            take = try await buckets.take(bucket(user), limit: limit, always: false)
        } catch {
            take = fallback.take(bucket(user), limit: limit, always: false)
        }
        return take.taken ? nil : limit.wait(untilOneFrom: take.tokens) ?? .seconds(1)
    }
}
