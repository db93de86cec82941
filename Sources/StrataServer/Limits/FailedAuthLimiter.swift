import Logging

/// Failed authentications per client address (``ServerConfiguration/Limits/failedAuthLimit``): a
/// token bucket per address, from which each failure takes one. While an address's bucket holds
/// less than one, every request from it is refused — valid token or not — so that guessing tokens
/// costs a guesser its access until the bucket refills. The buckets are the storage's shared ones
/// when it has them (``ZoneStorage/limitBuckets``), so that a guesser spreading guesses over
/// several instances gets no more than from one; else this process's own.
final class FailedAuthLimiter: Sendable {
    let limit: RateLimit
    private let buckets: any LimitBuckets
    /// Used when the shared buckets cannot be reached: the limit then holds per instance.
    private let fallback: InProcessLimitBuckets
    private let logger: Logger

    /// - Parameters:
    ///   - buckets: where the buckets live (by default this process's memory).
    ///   - clock: the time the in-process buckets refill by.
    init(limit: RateLimit, buckets: (any LimitBuckets)? = nil, clock: ServerClock = .system,
         logger: Logger = Logger(label: "strata.server")) {
        self.limit = limit
        fallback = InProcessLimitBuckets(clock: clock)
        self.buckets = buckets ?? fallback
        self.logger = logger
    }

    /// Whether `address` may try to authenticate: `nil` if so, else how long until it may.
    func blocked(_ address: String) async -> Duration? {
        guard limit.requestsPerSecond.isFinite else { return nil }
        let level: Double?
        do {
            level = try await buckets.level(.failedAuthentications(address), limit: limit)
        } catch {
            logger.warning("the shared failed-authentication limit cannot be read; counting in this instance", metadata: ["error": "\(error)"])
            level = fallback.level(.failedAuthentications(address), limit: limit)
        }
        return level.flatMap { limit.wait(untilOneFrom: $0) }
    }

    /// Counts a failed authentication from `address`.
    func recordFailure(_ address: String) async {
        guard limit.requestsPerSecond.isFinite else { return }
        do {
            _ = try await buckets.take(.failedAuthentications(address), limit: limit, always: true)
        } catch {
            logger.warning("the shared failed-authentication limit cannot be written; counting in this instance", metadata: ["error": "\(error)"])
            _ = fallback.take(.failedAuthentications(address), limit: limit, always: true)
        }
    }
}
