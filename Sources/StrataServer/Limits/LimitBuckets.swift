import Synchronization

/// Where the token buckets of the server's limits live: the per-user rate limit
/// (``ServerConfiguration/Limits/rateLimit``) and the failed authentications per client address
/// (``ServerConfiguration/Limits/failedAuthLimit``).
///
/// A storage shared by several `strata serve` instances offers buckets that every instance sees
/// (``ZoneStorage/limitBuckets``), so that N instances allow what one allows, not N times as
/// much; a storage of one process offers none, and the server keeps its buckets in memory
/// (``InProcessLimitBuckets``).
///
/// A bucket holds up to `limit.burst` tokens and gains `limit.requestsPerSecond` per second; a
/// bucket never used is full. Both operations are atomic per bucket across every caller of the
/// implementation.
public protocol LimitBuckets: Sendable {
    /// Takes one token from `bucket`, refilled to now first.
    ///
    /// - Parameters:
    ///   - bucket: which bucket.
    ///   - limit: its rate and size.
    ///   - always: `false` takes a token only when the bucket holds one (a request admitted or
    ///     not); `true` takes one whatever it holds, the bucket not going below empty (a failure
    ///     counted after the fact).
    /// - Returns: whether a token was taken and the tokens left.
    /// - Throws: ``ZoneStorageError`` when the buckets cannot be reached (the server then falls
    ///   back on its own buckets for the request).
    func take(_ bucket: LimitBucketName, limit: RateLimit, always: Bool) async throws(ZoneStorageError) -> LimitBucketTake

    /// The tokens `bucket` holds now, or `nil` when it was never used or has refilled (it is full).
    func level(_ bucket: LimitBucketName, limit: RateLimit) async throws(ZoneStorageError) -> Double?
}

/// A bucket of ``LimitBuckets``: which limit, and whom it counts.
public struct LimitBucketName: Sendable, Hashable, CustomStringConvertible {
    /// The limit: ``requests(_:)`` or ``failedAuthentications(_:)``.
    public var limit: String
    /// Whom the bucket counts: a user, a client address.
    public var key: String

    public init(limit: String, key: String) {
        self.limit = limit
        self.key = key
    }

    /// A user's bucket of the rate limit.
    public static func requests(_ user: String) -> LimitBucketName { LimitBucketName(limit: "requests", key: user) }
    /// A user's bucket of state uploads (``ServerConfiguration/Limits/stateUploadLimit``).
    public static func stateUploads(_ user: String) -> LimitBucketName { LimitBucketName(limit: "stateUploads", key: user) }
    /// A client address's bucket of failed authentications.
    public static func failedAuthentications(_ address: String) -> LimitBucketName {
        LimitBucketName(limit: "failedAuthentications", key: address)
    }

    public var description: String { "\(limit)/\(key)" }
}

/// What ``LimitBuckets/take(_:limit:always:)`` did.
public struct LimitBucketTake: Sendable, Hashable {
    /// Whether a token was taken (always `true` when taking was forced).
    public var taken: Bool
    /// The tokens left in the bucket.
    public var tokens: Double

    public init(taken: Bool, tokens: Double) {
        self.taken = taken
        self.tokens = tokens
    }
}

extension RateLimit {
    /// How long until a bucket holding `tokens` holds one (at most an hour; an hour for a rate
    /// of zero), or `nil` when it holds one already.
    func wait(untilOneFrom tokens: Double) -> Duration? {
        guard tokens < 1 else { return nil }
        guard requestsPerSecond > 0 else { return .seconds(3600) }
        let seconds = min(3600, (1 - tokens) / requestsPerSecond)
        return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
    }

    /// A bucket holding `tokens` at `updated`, refilled to `now`.
    func refilled(_ tokens: Double, from updated: Duration, to now: Duration) -> Double {
        let elapsed = Double((now - updated) / .nanoseconds(1)) / 1e9
        return min(burst, tokens + max(0, elapsed) * requestsPerSecond)
    }
}

/// The buckets of one process, in memory: the server's own when its storage offers none shared
/// (``ZoneStorage/limitBuckets``). Time comes from an injected clock (``ServerClock/elapsed``)
/// so that tests need not sleep.
public final class InProcessLimitBuckets: LimitBuckets {
    private struct Bucket {
        var tokens: Double
        var updated: Duration
        /// The bucket's limit, to tell when it has refilled (a sweep forgets it then).
        var limit: RateLimit
    }

    private struct State {
        var buckets: [LimitBucketName: Bucket] = [:]
        /// The table's size after the last sweep; the next sweep waits until it has doubled.
        var sweptSize = 0
    }

    private let now: @Sendable () -> Duration
    private let state = Mutex(State())

    /// - Parameter clock: the time buckets refill by (its ``ServerClock/elapsed``).
    public init(clock: ServerClock = .system) {
        now = clock.elapsed
    }

    public func take(_ bucket: LimitBucketName, limit: RateLimit, always: Bool) -> LimitBucketTake {
        let now = now()
        return state.withLock { state in
            var entry = state.buckets[bucket] ?? Bucket(tokens: limit.burst, updated: now, limit: limit)
            entry.tokens = limit.refilled(entry.tokens, from: entry.updated, to: now)
            entry.updated = now
            entry.limit = limit
            let taken = entry.tokens >= 1 || always
            if taken { entry.tokens = max(0, entry.tokens - 1) }
            state.buckets[bucket] = entry
            sweepIfLarge(&state, now: now)
            return LimitBucketTake(taken: taken, tokens: entry.tokens)
        }
    }

    public func level(_ bucket: LimitBucketName, limit: RateLimit) -> Double? {
        let now = now()
        return state.withLock { state in
            guard let entry = state.buckets[bucket] else { return nil }
            return limit.refilled(entry.tokens, from: entry.updated, to: now)
        }
    }

    /// Forgets buckets that have refilled (they are as good as new), once the table has doubled
    /// since the last sweep: memory stays proportional to the keys being limited now.
    private func sweepIfLarge(_ state: inout State, now: Duration) {
        guard state.buckets.count >= max(1024, 2 * state.sweptSize) else { return }
        state.buckets = state.buckets.filter { _, bucket in
            bucket.limit.refilled(bucket.tokens, from: bucket.updated, to: now) < bucket.limit.burst
        }
        state.sweptSize = state.buckets.count
    }

    /// The buckets remembered now (for tests).
    var trackedBuckets: Int { state.withLock { $0.buckets.count } }
}
