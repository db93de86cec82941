import Foundation
import Logging
import NIOHTTP1
import ServiceLifecycle
import StrataProtocol
import Synchronization

/// Tells a webhook receiver which zones changed: changes are gathered for
/// ``WebhookConfiguration/coalesce`` (a burst of pushes to a zone names it once), then sent as
/// one signed notification (`WebhookSignature` in StrataProtocol), tried again with a doubling backoff while the
/// receiver fails, and dropped (logged, counted) after the last attempt.
///
/// A push only marks its zone (a lock and a signal), and deliveries run in
/// a service of their own, one at a time: a slow or dead receiver never slows a push, and while
/// it fails, further changes gather into the next notification (bounded by
/// ``WebhookConfiguration/maxPendingZones``). Notifications are a hint to wake devices, not a
/// record: those pending when the server stops are not sent (devices still find every change
/// when they next sync).
public final class WebhookNotifier: Sendable {
    let configuration: WebhookConfiguration
    /// The zones marked and not yet taken: in the order marked, and as a set.
    private struct Pending {
        var order: [ZoneID] = []
        var marked: Set<ZoneID> = []
        /// Users to wake besides the zone's readers when it is sent: those who lost it (a grant
        /// revoked, a share left, the zone deleted), read when it happened.
        var losing: [ZoneID: Set<String>] = [:]
        var deleted: Set<ZoneID> = []
        /// Counts every change (of a zone marked already too): gathering goes on while it moves.
        var changes: UInt64 = 0
    }
    private let pending = Mutex(Pending())
    /// Wakes the running delivery loop: each `run` makes its own stream (a loop that ended —
    /// its server stopped — finishes its stream, and a server run again gets a fresh one).
    private let wake = Mutex<AsyncStream<Void>.Continuation?>(nil)

    init(configuration: WebhookConfiguration) {
        self.configuration = configuration
    }

    /// Marks `zone` as changed; returns at once. `false` when too many zones wait already (the
    /// change is dropped and counted).
    /// `losing`: users who lost the zone by this change (read before it: a revoked grantee, a
    /// user who left, every reader of a deleted zone), woken too so that their devices drop it.
    /// `deleted`: whether the change deleted the zone (`nil`: as marked already — a zone marked
    /// again because the storage could not be read keeps a deletion that came meanwhile).
    @discardableResult
    func zoneChanged(_ zone: ZoneID, losing: Set<String> = [], deleted: Bool? = false, metrics: ServerMetrics) -> Bool {
        let marked = pending.withLock { pending -> Bool in
            pending.changes &+= 1
            if !pending.marked.contains(zone) {
                guard pending.marked.count < configuration.maxPendingZones else { return false }
                pending.marked.insert(zone)
                pending.order.append(zone)
            }
            if !losing.isEmpty { pending.losing[zone, default: []].formUnion(losing.prefix(Self.maxUsersPerZone)) }
            switch deleted {
            case true?: pending.deleted.insert(zone)
            case false?: pending.deleted.remove(zone)
            case nil: break
            }
            return true
        }
        if marked { wake.withLock { $0 }?.yield(()) } else { metrics.webhookDropped.increment() }
        return marked
    }

    /// The zones marked, oldest first, at most `limit`: taken off the list (a zone changed again
    /// from now on is marked anew).
    private func take(_ limit: Int) -> [(zone: ZoneID, losing: Set<String>, deleted: Bool)] {
        pending.withLock { pending in
            let taken = Array(pending.order.prefix(limit))
            pending.order.removeFirst(taken.count)
            return taken.map { zone in
                pending.marked.remove(zone)
                let deleted = pending.deleted.remove(zone) != nil
                return (zone, pending.losing.removeValue(forKey: zone) ?? [], deleted)
            }
        }
    }

    /// The most users one zone's entry names (a zone with more grantees says `moreUsers`).
    static let maxUsersPerZone = 1_000

    var pendingCount: Int { pending.withLock { $0.marked.count } }

    /// Delivers until the calling task is cancelled.
    func run(storage: any ZoneStorage, metrics: ServerMetrics, logger: Logger) async {
        let (wakes, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        wake.withLock { $0 = continuation }
        defer { continuation.finish() }
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled {
            if pendingCount == 0 {
                guard await iterator.next() != nil else { return }
            }
            // Gather the burst: until the zones were quiet for `coalesce`, or for `maxDelay` at most.
            let started = ContinuousClock.now
            var seen = pending.withLock { $0.changes }
            while true {
                // (At least a millisecond: a zero window would spin while changes keep coming.)
                do { try await Task.sleep(for: max(.milliseconds(1), configuration.coalesce)) } catch { return }
                let now = pending.withLock { $0.changes }
                if now == seen || ContinuousClock.now - started >= configuration.maxDelay { break }
                seen = now
            }
            let zones = take(max(1, configuration.maxZonesPerNotification))
            guard !zones.isEmpty else { continue }
            var changes: [WebhookNotification.ZoneChange] = []
            for (zone, losing, deleted) in zones {
                // The readers are read when sent (grants changed meanwhile count); those who lost
                // the zone were read when they lost it.
                var users = losing
                if !deleted {
                    do {
                        if let info = try await storage.zone(zone) {
                            users.insert(info.owner)
                            users.formUnion(info.grants.keys.filter { info.canRead($0) })
                        }
                    } catch {
                        // The storage failing now (a restart of PostgreSQL) is no reason to wake
                        // no one: the zone goes in the next notification.
                        zoneChanged(zone, losing: losing, deleted: nil, metrics: metrics)
                        continue
                    }
                }
                guard !users.isEmpty else { continue }
                let sorted = users.sorted()
                changes.append(.init(zone: zone.name, owner: zone.owner, users: Array(sorted.prefix(Self.maxUsersPerZone)),
                                     moreUsers: sorted.count > Self.maxUsersPerZone ? true : nil, deleted: deleted ? true : nil))
            }
            guard !changes.isEmpty else { continue }
            let notification = WebhookNotification(id: UUID().uuidString.lowercased(),
                                                   sentAt: Int64(Date().timeIntervalSince1970 * 1000), changes: changes)
            await deliver(notification, metrics: metrics, logger: logger)
        }
    }

    /// Sends `notification` until the receiver takes it or the attempts run out.
    private func deliver(_ notification: WebhookNotification, metrics: ServerMetrics, logger: Logger) async {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let body = try? Array(encoder.encode(notification)) else { return }
        var backoff = configuration.initialBackoff
        for attempt in 1...max(1, configuration.maxAttempts) {
            let seconds = Int64(Date().timeIntervalSince1970)
            let headers = [
                ("Content-Type", "application/json"),
                (WebhookSignature.header, WebhookSignature.sign(body: body, secret: configuration.secret, seconds: seconds)),
                (WebhookSignature.idHeader, notification.id),
                ("User-Agent", "strata-webhook"),
            ]
            let failure: String
            var retryable = true
            do {
                // The status decides; the answer's body is not kept (a large one is no failure).
                let answer = try await OutboundHTTP.send(.POST, configuration.url, headers: headers, body: body, limit: 0,
                                                         timeout: configuration.timeout, keepingBody: false)
                if (200..<300).contains(answer.status) {
                    metrics.webhookDelivered.increment()
                    logger.debug("webhook notified", metadata: ["id": "\(notification.id)", "zones": "\(notification.changes.count)"])
                    return
                }
                failure = "answered HTTP \(answer.status)"
                // A refusal that the same request will meet again (a redirect, which is not
                // followed; a 4xx but a timeout or a rate limit) is not sent again.
                retryable = answer.status >= 500 || answer.status == 408 || answer.status == 429
            } catch {
                failure = "\(error)"
            }
            guard retryable, attempt < configuration.maxAttempts, !Task.isCancelled else {
                metrics.webhookDropped.increment()
                logger.error("webhook notification dropped after \(attempt) attempt(s)", metadata: [
                    "id": "\(notification.id)", "host": "\(configuration.url.host ?? "")", "error": "\(failure)",
                    "zones": "\(notification.changes.count)",
                ])
                return
            }
            metrics.webhookRetried.increment()
            logger.warning("webhook delivery failed; trying again", metadata: [
                "id": "\(notification.id)", "attempt": "\(attempt)", "error": "\(failure)", "retryIn": "\(backoff)",
            ])
            // Jittered, so that several servers on one receiver do not retry in step.
            let jittered = backoff * Double.random(in: 0.5...1.0)
            do { try await Task.sleep(for: jittered) } catch { return }
            backoff = min(backoff * 2, configuration.maxBackoff)
        }
    }
}

/// Runs a server's webhook deliveries beside its HTTP service (see ``WebhookNotifier``).
struct WebhookService: Service {
    let notifier: WebhookNotifier
    let server: StrataServerApp

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await notifier.run(storage: server.storage, metrics: server.metrics, logger: server.logger)
        }
    }
}
