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

/// Per-user token buckets: each request takes a token; tokens come back at the limit's rate up to
/// its burst. Time comes from an injected monotonic clock so that tests are deterministic.
public final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Duration
    }

    public let limit: RateLimit
    private let now: @Sendable () -> Duration
    private let buckets = Mutex<[String: Bucket]>([:])

    /// - Parameters:
    ///   - limit: the rate and burst allowed per key.
    ///   - now: monotonic time since any fixed origin (by default the continuous clock's).
    public init(limit: RateLimit, now: (@Sendable () -> Duration)? = nil) {
        self.limit = limit
        self.now = now ?? elapsedOnContinuousClock()
    }

    /// Takes a token for `user`: `nil` when the request may go ahead, else how long until a token
    /// is available again.
    public func acquire(_ user: String) -> Duration? {
        guard limit.requestsPerSecond.isFinite else { return nil }
        let now = now()
        return buckets.withLock { buckets -> Duration? in
            var bucket = buckets[user] ?? Bucket(tokens: limit.burst, updated: now)
            let elapsed = Double((now - bucket.updated) / .nanoseconds(1)) / 1e9
            bucket.tokens = min(limit.burst, bucket.tokens + max(0, elapsed) * limit.requestsPerSecond)
            bucket.updated = now
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                buckets[user] = bucket
                return nil
            }
            buckets[user] = bucket
            guard limit.requestsPerSecond > 0 else { return .seconds(3600) }
            let seconds = min(3600, (1 - bucket.tokens) / limit.requestsPerSecond)
            return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
        }
    }
}

/// Monotonic time since this was called, on the continuous clock: the limiters' default clock
/// (tests inject their own).
func elapsedOnContinuousClock() -> @Sendable () -> Duration {
    let clock = ContinuousClock()
    let origin = clock.now
    return { clock.now - origin }
}
