import Foundation
import Logging

/// The shared state of the server's resource bounds (see ``ServerConfiguration/Limits``): the
/// upload memory budget and the failed-authentication limiter, one of each per
/// ``StrataServerApp``.
struct ServerBounds: Sendable {
    let limits: ServerConfiguration.Limits
    let uploadBudget: UploadBudget
    let failedAuth: FailedAuthLimiter

    /// - Parameters:
    ///   - buckets: the storage's shared limit buckets (``ZoneStorage/limitBuckets``), if any.
    ///   - clock: the time the in-process failed-authentication buckets refill by.
    init(limits: ServerConfiguration.Limits, buckets: (any LimitBuckets)? = nil, clock: ServerClock = .system,
         logger: Logger = Logger(label: "strata.server")) {
        self.limits = limits
        uploadBudget = UploadBudget(capacity: limits.uploadMemoryBudget, wait: limits.uploadBudgetWait)
        failedAuth = FailedAuthLimiter(limit: limits.failedAuthLimit, buckets: buckets, clock: clock, logger: logger)
    }

    /// The address a request is counted against for failed authentications: the connection's
    /// peer, or — when the peer is a trusted proxy — the last address in `X-Forwarded-For` that is
    /// not a trusted proxy itself.
    func clientAddress(peer: String?, forwardedFor: [String]) -> String {
        guard let peer else { return "-" }
        guard !limits.trustedProxies.isEmpty, limits.trustedProxies.contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return hops.last(where: { !limits.trustedProxies.contains($0) }) ?? peer
    }
}
