import StrataProtocol
import Synchronization
import Hummingbird

extension StrataServerApp {
    /// `GET /metrics`: the Prometheus text exposition of ``metrics``, without a token (like
    /// `/health` and `/ready`; keep the port away from the internet or filter `/metrics` at the
    /// proxy if the counts are sensitive).
    static let metricsPath = StrataEndpoint.metrics

    /// Prometheus' text format, version 0.0.4.
    static let metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

    func metricsAnswer() -> Response {
        // Gauges read from live state are set when scraped.
        metrics.setLongPollWaiters(notifier.totalWaiterCount)
        // Counted again for the next scrape, never waited for: a storage that is down or slow
        // does not hold `/metrics` up (the gauge is as of the last count, begun by the previous
        // scrape or by a device report).
        refreshDivergentDevices()
        return Response(status: .ok, headers: [.contentType: Self.metricsContentType],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
    }
}

extension StrataServerApp {
    /// Counts the divergent devices of every zone's registry into `strata_divergent_devices`, in
    /// the background; a count already under way is not started again.
    func refreshDivergentDevices() {
        guard divergentCount.begin() else { return }
        let (storage, metrics, counting) = (storage, metrics, divergentCount)
        Task {
            defer { counting.end() }
            if let count = try? await storage.divergentDeviceCount() { metrics.setDivergentDevices(count) }
        }
    }
}

/// Whether a count of divergent devices is under way (one at a time).
final class CountInFlight: Sendable {
    private let running = Mutex(false)

    /// Marks a count as begun; `false` when one already runs.
    func begin() -> Bool { running.withLock { running in defer { running = true }; return !running } }
    func end() { running.withLock { $0 = false } }
}
