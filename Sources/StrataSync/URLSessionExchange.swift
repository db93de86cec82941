public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Synchronization

/// The sync protocol's requests over `URLSession`: on Apple platforms, the system's proxy
/// settings, trust store and networking policies; on Linux, FoundationNetworking's. The default
/// transport of ``HTTPSyncTransport``, with no dependency.
///
/// It keeps the promises every ``HTTPExchange`` makes, which `URLSession.data(for:)` alone does
/// not: an answer body larger than the limit is refused as it arrives (never read whole into
/// memory first); ``HTTPExchangeRequest/timeout`` bounds the whole request, answer included (a
/// session's `timeoutInterval` only bounds the silence between bytes); and a cancelled task
/// throws `CancellationError`, not a network failure the engine would retry.
///
/// ```swift
/// let transport = HTTPSyncTransport(server: url, tokens: tokens, configuration: .ephemeral)
/// let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
/// ```
public final class URLSessionExchange: HTTPExchange, Sendable {
    private let session: URLSession
    private let driver: Driver

    /// - Parameter configuration: the session's configuration (proxies, cookies, cache — the
    ///   protocol needs none of them). Its limit of connections per host is raised to at least
    ///   16, so that long polls of several engines do not queue behind each other.
    public convenience init(configuration: URLSessionConfiguration = .default) {
        self.init(configuration: configuration, answerLimit: maxAnswerBytes)
    }

    /// An exchange that refuses answers larger than `answerLimit` bytes (the tests' small limit).
    package init(configuration: URLSessionConfiguration, answerLimit: Int) {
        // A copy: the caller's configuration object stays as it was.
        let configuration = (configuration.copy() as? URLSessionConfiguration) ?? configuration
        configuration.httpMaximumConnectionsPerHost = max(16, configuration.httpMaximumConnectionsPerHost)
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        let driver = Driver(limit: answerLimit)
        self.driver = driver
        session = URLSession(configuration: configuration, delegate: driver, delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    /// The exchange ``HTTPSyncTransport`` uses unless given another: one session for the
    /// process, so that engines share its connections.
    public static let shared = URLSessionExchange()

    public func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        guard let url = URL(string: request.url) else {
            throw SyncError(.transport, "\(request.method) \(request.url): not a URL")
        }
        try Task.checkCancellation()
        var outgoing = URLRequest(url: url)
        outgoing.httpMethod = request.method
        outgoing.timeoutInterval = max(1, Double(request.timeout.components.seconds))
        for (name, value) in request.headers { outgoing.setValue(value, forHTTPHeaderField: name) }
        if let body = request.body { outgoing.httpBody = Data(body) }
        let task = session.dataTask(with: outgoing)
        let id = task.taskIdentifier
        // The whole request's deadline (answer included); stopped as soon as the answer is in.
        let deadline = request.timeout
        let timer = Task { [driver] in
            try await Task.sleep(for: deadline)
            if driver.fail(id, with: Failure.deadline) { Self.end(task) }
        }
        defer { timer.cancel() }
        let answer: Result<(HTTPURLResponse, [UInt8]), any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                driver.start(id, continuation: continuation, limit: request.answerLimit(within: driver.limit))
                // Cancelled before the task was registered: the handler found nothing to end.
                if Task.isCancelled {
                    if driver.fail(id, with: CancellationError()) { Self.end(task) }
                    return
                }
                task.resume()
            }
        } onCancel: {
            if driver.fail(id, with: CancellationError()) { Self.end(task) }
        }
        switch answer {
        case .success(let (http, body)):
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return HTTPExchangeResponse(status: http.statusCode, headers: headers, body: body)
        case .failure(let error as CancellationError):
            throw error
        case .failure(Failure.deadline):
            throw SyncError(.transport, "\(request.method) \(request.url): no whole answer within \(request.timeout)")
        case .failure(Failure.tooLarge(let bytes)):
            throw SyncError(.transport, "\(request.method) \(request.url): an answer of \(bytes) bytes or more, more than the \(request.answerLimit(within: driver.limit)) read")
        case .failure(Failure.notHTTP):
            throw SyncError(.transport, "\(request.method) \(request.url): not an HTTP answer")
        case .failure(let error as URLError) where Self.untrusted.contains(error.code):
            throw SyncError(.untrustedServer, "\(request.method) \(request.url): the TLS handshake failed (\(error.localizedDescription)); is the server's certificate trusted by this device, current, and for this host?")
        case .failure(let error):
            throw SyncError(.transport, "\(request.method) \(request.url): \(error)")
        }
    }

    /// Cancels a URL task whose waiter was already answered, off the caller's thread:
    /// FoundationNetworking's `cancel()` waits for the session's work queue, and a cancellation
    /// handler (run by whoever cancels the request) or a Swift concurrency thread must not block
    /// on it — the caller has its `CancellationError` already and nothing waits for the task.
    private static func end(_ task: URLSessionDataTask) {
        let task = UncheckedTask(task: task)
        cancelling.async { task.task.cancel() }
    }

    /// One serial queue for those cancels: a burst of them (every zone of a stopped engine)
    /// takes one thread, not one each.
    private static let cancelling = DispatchQueue(label: "strata.urlsession.cancel")

    /// A URL task handed to the queue that cancels it (`URLSessionTask` is thread-safe, but
    /// not declared `Sendable` on every platform).
    private struct UncheckedTask: @unchecked Sendable { let task: URLSessionDataTask }

    /// The URL errors of a certificate the client does not trust (no retry fixes them).
    static let untrusted: Set<URLError.Code> = [
        .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateHasUnknownRoot,
        .serverCertificateNotYetValid, .clientCertificateRejected, .secureConnectionFailed,
    ]

    /// Why the exchange ended a task itself.
    enum Failure: Error {
        case deadline
        case tooLarge(Int)
        case notHTTP
    }

    /// The session's delegate: collects each task's answer as it arrives, refuses a body past
    /// the limit at once, and resumes the waiting request exactly once (answer, error, deadline
    /// or cancellation, whichever comes first).
    final class Driver: NSObject, URLSessionDataDelegate, Sendable {
        typealias Answer = Result<(HTTPURLResponse, [UInt8]), any Error>

        struct Pending {
            var continuation: CheckedContinuation<Answer, Never>
            var response: HTTPURLResponse?
            var body: [UInt8] = []
            /// The largest body read for this request.
            var limit: Int
        }

        private let pending = Mutex<[Int: Pending]>([:])
        /// The largest answer body read (a request may ask for less).
        let limit: Int

        init(limit: Int) { self.limit = limit }

        func start(_ id: Int, continuation: CheckedContinuation<Answer, Never>, limit: Int) {
            pending.withLock { $0[id] = Pending(continuation: continuation, limit: limit) }
        }

        /// Ends task `id` with `error` unless it has ended; whether it was still running (the
        /// caller then cancels the URL task).
        @discardableResult
        func fail(_ id: Int, with error: any Error) -> Bool {
            guard let ended = pending.withLock({ $0.removeValue(forKey: id) }) else { return false }
            ended.continuation.resume(returning: .failure(error))
            return true
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            let id = dataTask.taskIdentifier
            guard let http = response as? HTTPURLResponse else {
                if fail(id, with: Failure.notHTTP) { dataTask.cancel() }
                completionHandler(.cancel)
                return
            }
            let limit = pending.withLock { $0[id]?.limit } ?? limit
            if http.expectedContentLength > Int64(limit) {
                if fail(id, with: Failure.tooLarge(Int(http.expectedContentLength))) { dataTask.cancel() }
                completionHandler(.cancel)
                return
            }
            pending.withLock { $0[id]?.response = http }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let id = dataTask.taskIdentifier
            let over: Int? = pending.withLock { tasks in
                guard tasks[id] != nil else { return nil }
                let count = (tasks[id]?.body.count ?? 0) + data.count
                // Refused before the bytes past the limit are kept.
                guard count <= tasks[id]?.limit ?? limit else { return count }
                tasks[id]?.body.append(contentsOf: data)
                return nil
            }
            if let over, fail(id, with: Failure.tooLarge(over)) { dataTask.cancel() }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let ended = pending.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
            if let error {
                ended.continuation.resume(returning: .failure(error))
            } else if let response = ended.response {
                ended.continuation.resume(returning: .success((response, ended.body)))
            } else {
                ended.continuation.resume(returning: .failure(Failure.notHTTP))
            }
        }
    }
}

extension HTTPSyncTransport {
    /// The protocol over a `URLSession` of the given configuration (``URLSessionExchange``).
    public init(server: URL, tokens: TokenProvider, configuration: URLSessionConfiguration) {
        self.init(server: server, tokens: tokens, exchange: URLSessionExchange(configuration: configuration))
    }
}
