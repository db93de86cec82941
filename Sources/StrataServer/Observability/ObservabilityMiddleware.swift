import HTTPTypes
import Hummingbird
import Logging

/// The outermost middleware of the server's router: gives every request an ID (see
/// ``RequestID``) that tags its log lines and is echoed in the `X-Request-ID` header, and counts
/// and times every answer in ``ServerMetrics`` by route (the router's pattern, e.g.
/// `/v1/zones/{zone}/push`), method and status — `401` answers also in `authFailures`, `429` in
/// `rateLimited`.
struct ObservabilityMiddleware: RouterMiddleware {
    typealias Context = StrataRequestContext

    let metrics: ServerMetrics
    let logger: Logger

    static let requestIDField = HTTPField.Name(RequestID.headerName)!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = RequestID.accept(request.headers[Self.requestIDField])
        let clock = ContinuousClock()
        let start = clock.now
        return try await RequestID.$current.withValue(id) {
            var response: Response
            do {
                response = try await next(request, context)
            } catch {
                // The gatekeeper answers every error; whatever still escapes is counted as Hummingbird
                // will answer it (an HTTPError's status, else 500), and passed on.
                let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
                record(request, context, status: status, since: start, clock: clock)
                throw error
            }
            response.headers[Self.requestIDField] = id
            record(request, context, status: response.status, since: start, clock: clock)
            return response
        }
    }

    private func record(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant,
                        clock: ContinuousClock) {
        // Unmatched paths share one series, so that scanners cannot create series at will.
        let route = context.endpointPath ?? "unmatched"
        metrics.recordRequest(route: route, method: request.method.rawValue, status: status.code, duration: clock.now - start)
        switch status.code {
        case 401: metrics.authFailures.increment()
        case 429: metrics.rateLimited.increment()
        default: break
        }
    }
}
