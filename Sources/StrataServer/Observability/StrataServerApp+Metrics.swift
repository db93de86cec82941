import StrataProtocol
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
        return Response(status: .ok, headers: [.contentType: Self.metricsContentType],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
    }
}
