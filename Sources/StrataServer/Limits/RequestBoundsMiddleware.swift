import StrataProtocol
import HTTPTypes
import Hummingbird
import Logging

/// The per-request bounds, around the authentication middleware: an address with too many failed
/// authentications is answered `429 rateLimited` before its token is even looked at, every `401`
/// counts as a failure of its address, and each request gets an ``UploadReservation`` that its
/// body reads reserve from and that is given back when it is answered — whatever way it ends.
struct RequestBoundsMiddleware: RouterMiddleware {
    typealias Context = StrataRequestContext

    let bounds: ServerBounds
    let metrics: ServerMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The operations endpoints stay open to a health checker behind the same address.
        if request.method == .get, StrataServerApp.operationsPaths.contains(request.uri.path) {
            return try await next(request, context)
        }
        let address = bounds.clientAddress(peer: context.clientAddress, forwardedFor: request.headers[values: .xForwardedFor])
        if let wait = await bounds.failedAuth.blocked(address) { return refusal(address, wait: wait) }
        let reservation = UploadReservation(budget: bounds.uploadBudget)
        defer { reservation.release() }
        let response = try await UploadReservation.$current.withValue(reservation) {
            try await next(request, context)
        }
        switch response.status {
        case .unauthorized:
            // (401 and 429 are counted in the metrics by the observability middleware.)
            await bounds.failedAuth.recordFailure(address)
        case .serviceUnavailable:
            // Only the upload budget answers 503 here (`/ready` is outside this middleware).
            metrics.serverBusy.increment()
        default:
            break
        }
        return response
    }

    // The refusal is built here, not in `handle`: every request's task keeps `handle`'s frame (a
    // long poll's for a minute), so it holds only what crosses an `await` (see
    // `GatekeeperMiddleware.handle`).
    @inline(never)
    private func refusal(_ address: String, wait: Duration) -> Response {
        let seconds = max(1, Int((Double(wait / .nanoseconds(1)) / 1e9).rounded(.up)))
        logger.notice("request refused: too many failed authentications", metadata: ["address": "\(address)", "retryAfter": "\(seconds)"])
        return ServerError(.rateLimited, "too many failed authentications from \(address); retry in \(seconds) s", retryAfter: seconds).response
    }
}

extension HTTPField.Name {
    /// `X-Forwarded-For`, believed only from a trusted proxy.
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}

extension StrataServerApp {
    /// The unauthenticated operations endpoints (`/health`, `/ready`, `/metrics`), outside the
    /// failed-authentication limit.
    static let operationsPaths: Set<String> = [healthPath, readyPath, metricsPath]
}
