public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// The sync protocol's requests over `URLSession`: on Apple platforms, the system's proxy
/// settings, trust store and networking policies; on Linux, Foundation's implementation.
///
/// ```swift
/// let transport = HTTPSyncTransport(server: url, tokens: tokens, session: .shared)
/// let engine = try SyncEngine(store: store, transport: transport, zone: "notes")
/// ```
public struct URLSessionExchange: HTTPExchange {
    let session: URLSession

    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        guard let url = URL(string: request.url) else {
            throw SyncError(.transport, "\(request.method) \(request.url): not a URL")
        }
        var outgoing = URLRequest(url: url)
        outgoing.httpMethod = request.method
        outgoing.timeoutInterval = max(1, Double(request.timeout.components.seconds))
        for (name, value) in request.headers { outgoing.setValue(value, forHTTPHeaderField: name) }
        if let body = request.body { outgoing.httpBody = Data(body) }
        let data: Data
        let answer: URLResponse
        do {
            (data, answer) = try await session.data(for: outgoing)
        } catch let error as URLError where Self.untrusted.contains(error.code) {
            throw SyncError(.untrustedServer, "\(request.method) \(request.url): the TLS handshake failed (\(error.localizedDescription)); is the server's certificate trusted by this device, current, and for this host?")
        } catch {
            throw SyncError(.transport, "\(request.method) \(request.url): \(error)")
        }
        guard let http = answer as? HTTPURLResponse else {
            throw SyncError(.transport, "\(request.method) \(request.url): not an HTTP answer")
        }
        guard data.count <= maxAnswerBytes else {
            throw SyncError(.transport, "\(request.method) \(request.url): an answer of \(data.count) bytes, more than the \(maxAnswerBytes) read")
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return HTTPExchangeResponse(status: http.statusCode, headers: headers, body: Array(data))
    }

    /// The URL errors of a certificate the client does not trust (no retry fixes them).
    static let untrusted: Set<URLError.Code> = [
        .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateHasUnknownRoot,
        .serverCertificateNotYetValid, .clientCertificateRejected, .secureConnectionFailed,
    ]
}

extension HTTPSyncTransport {
    /// The protocol over `URLSession` (``URLSessionExchange``).
    public init(server: URL, tokens: TokenProvider, session: URLSession) {
        self.init(server: server, tokens: tokens, exchange: URLSessionExchange(session: session))
    }
}
