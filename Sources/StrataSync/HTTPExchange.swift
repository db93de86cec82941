import Foundation

/// One HTTP request of the sync protocol, as ``HTTPSyncTransport`` builds it: bodies are bytes in
/// memory, so a request can be sent again (after a token refresh).
public struct HTTPExchangeRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?
    /// The longest the request may take, answer included.
    public var timeout: Duration
    /// The largest answer body this request reads, when it is less than the exchange's own limit
    /// (256 MiB): an asset chunk's answer is at most a chunk as an LZ4 block, so a server that
    /// sends more is refused as the body arrives, not buffered. `nil`: the exchange's limit.
    public var answerLimit: Int?

    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil, timeout: Duration = .seconds(30),
                answerLimit: Int? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.answerLimit = answerLimit
    }

    /// The most answer bytes to read: ``answerLimit`` within `exchangeLimit`.
    package func answerLimit(within exchangeLimit: Int) -> Int {
        min(max(0, answerLimit ?? exchangeLimit), exchangeLimit)
    }
}

/// An HTTP answer: status, headers, the whole body.
public struct HTTPExchangeResponse: Sendable {
    public var status: Int
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    /// A header's value, by name in any case.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// An HTTP stack the sync protocol's requests go through: ``URLSessionExchange`` (the
/// default), `AsyncHTTPClientExchange` (the `StrataSyncAsyncHTTPClient` library) or your own.
///
/// An exchange refuses, as it arrives, an answer body larger than the request's
/// ``HTTPExchangeRequest/answerLimit`` (or its own limit), with ``SyncError/Code/transport``
/// (``HTTPSyncTransport`` checks again after an exchange that does not).
///
/// Whatever the stack, its failures come out as ``SyncError``: a network failure as
/// ``SyncError/Code/transport`` (retried with backoff), a TLS certificate the client does not
/// trust as ``SyncError/Code/untrustedServer`` (not retried). Statuses other than 2xx are not
/// failures here: the transport reads the server's error from them.
public protocol HTTPExchange: Sendable {
    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse
}

/// The longest answer body read (a pull page, a snapshot): a larger one is refused, not buffered.
package let maxAnswerBytes = 256 << 20
