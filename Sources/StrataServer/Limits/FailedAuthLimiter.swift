import Synchronization

/// Failed authentications per client address (``ServerConfiguration/Limits/failedAuthLimit``): a
/// token bucket per address, from which each failure takes one. While an address's bucket holds
/// less than one, every request from it is refused — valid token or not — so that guessing tokens
/// costs a guesser its access until the bucket refills. Time comes from an injected monotonic
/// clock so that tests need not sleep.
final class FailedAuthLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Duration
    }

    let limit: RateLimit
    private let now: @Sendable () -> Duration
    private struct State {
        var buckets: [String: Bucket] = [:]
        /// The table's size after the last sweep; the next sweep waits until it has doubled.
        var sweptSize = 0
    }
    private let state = Mutex(State())

    /// - Parameter now: monotonic time since any fixed origin (by default the continuous clock's).
    init(limit: RateLimit, now: (@Sendable () -> Duration)? = nil) {
        self.limit = limit
        self.now = now ?? elapsedOnContinuousClock()
    }

    /// Whether `address` may try to authenticate: `nil` if so, else how long until it may.
    func blocked(_ address: String) -> Duration? {
        guard limit.requestsPerSecond.isFinite else { return nil }
        let now = now()
        return state.withLock { state -> Duration? in
            guard var bucket = state.buckets[address] else { return nil }
            refill(&bucket, now: now)
            state.buckets[address] = bucket
            guard bucket.tokens < 1 else { return nil }
            guard limit.requestsPerSecond > 0 else { return .seconds(3600) }
            let seconds = min(3600, (1 - bucket.tokens) / limit.requestsPerSecond)
            return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
        }
    }

    /// Counts a failed authentication from `address`.
    func recordFailure(_ address: String) {
        guard limit.requestsPerSecond.isFinite else { return }
        let now = now()
        state.withLock { state in
            var bucket = state.buckets[address] ?? Bucket(tokens: limit.burst, updated: now)
            refill(&bucket, now: now)
            bucket.tokens = max(0, bucket.tokens - 1)
            state.buckets[address] = bucket
            sweepIfLarge(&state, now: now)
        }
    }

    private func refill(_ bucket: inout Bucket, now: Duration) {
        let elapsed = Double((now - bucket.updated) / .nanoseconds(1)) / 1e9
        bucket.tokens = min(limit.burst, bucket.tokens + max(0, elapsed) * limit.requestsPerSecond)
        bucket.updated = now
    }

    /// Forgets addresses whose buckets have refilled (they are as good as new), once the table
    /// has doubled since the last sweep: memory stays proportional to the addresses failing now.
    private func sweepIfLarge(_ state: inout State, now: Duration) {
        guard state.buckets.count >= max(1024, 2 * state.sweptSize) else { return }
        state.buckets = state.buckets.filter { _, bucket in
            var bucket = bucket
            refill(&bucket, now: now)
            return bucket.tokens < limit.burst
        }
        state.sweptSize = state.buckets.count
    }

    /// Addresses the limiter remembers now (for tests).
    var trackedAddresses: Int { state.withLock { $0.buckets.count } }
}
