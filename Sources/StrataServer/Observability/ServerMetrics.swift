public import Prometheus
public import StrataLog
import StrataProtocol

/// The server's metrics, answered in Prometheus text format at `GET /metrics`.
///
/// Every ``StrataServerApp`` has one (``StrataServerApp/metrics``); each instance owns its own
/// `PrometheusCollectorRegistry`, so that several servers in one process (tests) never share
/// counts and nothing calls `MetricsSystem.bootstrap` (which a process may do only once).
///
/// The parts of the server that refuse requests count their refusals here:
///
/// ```swift
/// metrics.quotaRefusals.increment()      // 403 quotaExceeded
/// metrics.serverBusy.increment()         // 503 serverBusy (memory budget, connection cap)
/// metrics.storageFull.increment()        // 507 storageFull
/// ```
///
/// ``authFailures`` (401) and ``rateLimited`` (429, whatever the reason) are counted by the
/// server's observability middleware from the status of every answer that passes through the
/// router — do not increment them for such answers; only for refusals answered outside the router
/// (before a request reaches it), if any.
///
/// The request counters and durations, push and pull volumes and long-poll waiters are counted by
/// the server itself. Code that prefers the swift-metrics API records into the same registry
/// through ``factory`` (`Counter(label: "…", factory: metrics.factory)`).
public final class ServerMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    /// A swift-metrics factory over ``registry``.
    public let factory: PrometheusMetricsFactory

    /// `strata_push_transactions_total`: transactions accepted by pushes.
    public let pushTransactions: CounterMetric
    /// `strata_push_bytes_total`: bytes of push bodies accepted.
    public let pushBytes: CounterMetric
    /// Bytes of asset chunk bodies received and sent (as they traveled: compressed or not).
    public let assetBytesReceived: CounterMetric
    public let assetBytesSent: CounterMetric
    /// `strata_pull_transactions_total`: transactions answered by pulls.
    public let pullTransactions: CounterMetric
    /// `strata_pull_bytes_total`: bytes of pull answers.
    public let pullBytes: CounterMetric
    /// `strata_long_poll_waiters`: pulls waiting for a change right now (set at each scrape).
    let longPollWaiters: Prometheus.Gauge
    /// `strata_open_connections`: connections the server holds open now (admitted under the caps).
    let openConnections: Prometheus.Gauge
    /// `strata_divergent_devices`: devices whose last report held a state their zone never had
    /// (set at each scrape, from the storage's registries).
    let divergentDevices: Prometheus.Gauge
    /// `strata_compaction_runs_total{outcome="ok"}`: compaction passes that finished.
    public let compactionRuns: CounterMetric
    /// `strata_compaction_runs_total{outcome="failed"}`: compaction passes that failed.
    public let compactionFailures: CounterMetric
    /// `strata_asset_bytes_swept_total`: bytes of asset chunks the sweep of unreferenced assets
    /// removed (``AssetStorage/sweepAssets(grace:)``).
    public let assetBytesSwept: CounterMetric
    /// `strata_rate_limited_total`: requests answered `429 rateLimited`.
    public let rateLimited: CounterMetric
    /// `strata_quota_refusals_total`: requests answered `403 quotaExceeded`.
    public let quotaRefusals: CounterMetric
    /// `strata_auth_failures_total`: requests refused for a missing or unknown token (`401`).
    public let authFailures: CounterMetric
    /// `strata_server_busy_total`: requests answered `503 serverBusy`.
    public let serverBusy: CounterMetric
    /// `strata_storage_full_total`: requests answered `507 storageFull`.
    public let storageFull: CounterMetric
    /// `strata_webhook_deliveries_total{outcome="delivered"}`: webhook notifications the
    /// receiver took (a 2xx answer).
    public let webhookDelivered: CounterMetric
    /// `strata_webhook_deliveries_total{outcome="retried"}`: delivery attempts that failed and
    /// were tried again.
    public let webhookRetried: CounterMetric
    /// `strata_webhook_deliveries_total{outcome="dropped"}`: notifications given up after the
    /// last attempt (or when too many zones waited to be notified).
    public let webhookDropped: CounterMetric
    /// `strata_group_commit_transactions`: log entries (transactions) made durable by one fsync
    /// of a zone's log (group commit).
    let groupCommitSize: Prometheus.ValueHistogram
    /// `strata_fsync_duration_seconds`: how long each such fsync took.
    let fsyncDuration: Prometheus.DurationHistogram

    /// Feeds `groupCommitSize` and `fsyncDuration`: give it to every zone log's options
    /// (``EmbeddedZoneStorage/Options/log``), as `strata serve` does.
    public var commitObserver: CommitObserver {
        CommitObserver { [groupCommitSize, fsyncDuration] entries, sync in
            groupCommitSize.record(Double(entries))
            fsyncDuration.record(sync)
        }
    }

    /// Buckets of request durations: long polls last up to a minute.
    static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    static let fsyncBuckets: [Duration] = [
        .microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1),
    ]

    /// - Parameter registry: where the metrics live (a new one by default).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> CounterMetric {
            CounterMetric(registry.makeCounter(name: name, labels: labels, help: help))
        }
        pushTransactions = counter("strata_push_transactions_total", "Transactions accepted by pushes.")
        pushBytes = counter("strata_push_bytes_total", "Bytes of push bodies accepted.")
        assetBytesReceived = counter("strata_asset_bytes_received_total", "Bytes of asset chunk bodies received (as sent: compressed or not).")
        assetBytesSent = counter("strata_asset_bytes_sent_total", "Bytes of asset chunk bodies sent (as sent: compressed or not).")
        pullTransactions = counter("strata_pull_transactions_total", "Transactions answered by pulls.")
        pullBytes = counter("strata_pull_bytes_total", "Bytes of transactions answered by pulls.")
        openConnections = registry.makeGauge(name: "strata_open_connections", labels: [],
                                             help: "Connections open now (admitted under the connection caps).")
        longPollWaiters = registry.makeGauge(name: "strata_long_poll_waiters", labels: [],
                                             help: "Pulls waiting for a change (long polls).")
        divergentDevices = registry.makeGauge(name: "strata_divergent_devices", labels: [],
                                              help: "Devices whose last state report differs from their zone's state at the same position.")
        let compactionHelp = "Compaction passes, by outcome."
        compactionRuns = counter("strata_compaction_runs_total", compactionHelp, [("outcome", "ok")])
        compactionFailures = counter("strata_compaction_runs_total", compactionHelp, [("outcome", "failed")])
        assetBytesSwept = counter("strata_asset_bytes_swept_total", "Bytes of asset chunks removed by the sweep of unreferenced assets.")
        rateLimited = counter("strata_rate_limited_total", "Requests answered 429 rateLimited.")
        quotaRefusals = counter("strata_quota_refusals_total", "Requests answered 403 quotaExceeded.")
        authFailures = counter("strata_auth_failures_total", "Requests refused for a missing or unknown bearer token.")
        serverBusy = counter("strata_server_busy_total", "Requests answered 503 serverBusy.")
        storageFull = counter("strata_storage_full_total", "Requests answered 507 storageFull.")
        let webhookHelp = "Webhook notification attempts, by outcome."
        webhookDelivered = counter("strata_webhook_deliveries_total", webhookHelp, [("outcome", "delivered")])
        webhookRetried = counter("strata_webhook_deliveries_total", webhookHelp, [("outcome", "retried")])
        webhookDropped = counter("strata_webhook_deliveries_total", webhookHelp, [("outcome", "dropped")])
        groupCommitSize = registry.makeValueHistogram(name: "strata_group_commit_transactions", labels: [],
                                                      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
                                                      help: "Log entries made durable by one fsync.")
        fsyncDuration = registry.makeDurationHistogram(name: "strata_fsync_duration_seconds", labels: [],
                                                       buckets: Self.fsyncBuckets, help: "Duration of each log fsync.")
    }

    /// Counts one answered request: `strata_http_requests_total{route, method, status}` and
    /// `strata_http_request_duration_seconds{route, method}`. `route` is the router's pattern
    /// (`/v1/zones/:zone/push`), never the raw path, so that zone names do not multiply series.
    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        registry.makeCounter(name: "strata_http_requests_total",
                             labels: [("route", route), ("method", method), ("status", String(status))],
                             help: "HTTP requests answered, by route, method and status.").increment()
        registry.makeDurationHistogram(name: "strata_http_request_duration_seconds",
                                       labels: [("route", route), ("method", method)], buckets: Self.durationBuckets,
                                       help: "Time to answer an HTTP request, by route and method.").record(duration)
    }

    /// Counts a connection the server closed because one of its timeouts passed:
    /// `strata_connection_timeouts_total{timeout}` (`idle`, `header`, `body`, `write`).
    func recordConnectionTimeout(_ timeout: String) {
        registry.makeCounter(name: "strata_connection_timeouts_total", labels: [("timeout", timeout)],
                             help: "Connections closed by a timeout, by which timeout.").increment()
    }

    /// An idle connection closed to make room for a new one at the connection cap.
    func recordShedConnection() {
        registry.makeCounter(name: "strata_idle_connections_shed_total",
                             help: "Idle connections closed to make room for a new connection at the connection cap.").increment()
    }

    /// The Prometheus text exposition of every metric.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

/// A counter of ``ServerMetrics``: callers need not import Prometheus to count.
public struct CounterMetric: Sendable {
    let base: Prometheus.Counter

    init(_ base: Prometheus.Counter) { self.base = base }

    /// Adds `amount` (1 by default; never negative).
    public func increment(by amount: Int64 = 1) {
        base.increment(by: amount)
    }
}

extension ServerMetrics {
    /// Sets `strata_long_poll_waiters`.
    func setLongPollWaiters(_ count: Int) { longPollWaiters.set(Int64(count)) }

    /// Sets `strata_open_connections`.
    func setOpenConnections(_ count: Int) { openConnections.set(Int64(count)) }

    /// Sets `strata_divergent_devices`.
    func setDivergentDevices(_ count: Int) { divergentDevices.set(Int64(count)) }

    /// Counts a device report by what the server found:
    /// `strata_device_reports_total{check="consistent|divergent|unverified"}`.
    func recordDeviceReport(_ check: DeviceStateCheck) {
        registry.makeCounter(name: "strata_device_reports_total", labels: [("check", check.rawValue)],
                             help: "Device state reports, by what the server found.").increment()
    }
}
