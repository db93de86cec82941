public import AsyncHTTPClient
import Foundation
public import StrataSync
import NIOCore
import NIOHTTP1
import NIOSSL

/// The sync protocol's requests over AsyncHTTPClient (Linux and Apple platforms).
public struct AsyncHTTPClientExchange: HTTPExchange {
    let client: HTTPClient

    /// - Parameter client: the client to send with (the caller shuts it down);
    ///   `HTTPSyncTransport.defaultClient` lives as long as the process.
    public init(client: HTTPClient) {
        self.client = client
    }

    public func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.replaceOrAdd(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(body) }
        do {
            let seconds = max(1, request.timeout.components.seconds)
            let response = try await client.execute(outgoing, timeout: .seconds(seconds))
            let limit = request.answerLimit(within: maxAnswerBytes)
            let body: ByteBuffer
            do {
                // Refused as the body arrives (its Content-Length, or the bytes past the limit).
                body = try await response.body.collect(upTo: limit)
            } catch is NIOTooManyBytesError {
                throw SyncError(.transport, "\(request.method) \(request.url): an answer of more than the \(limit) bytes read")
            }
            let bytes = body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
            var headers: [String: String] = [:]
            for header in response.headers where headers[header.name.lowercased()] == nil { headers[header.name.lowercased()] = header.value }
            return HTTPExchangeResponse(status: Int(response.status.code), headers: headers, body: bytes)
        } catch let error as SyncError {
            throw error
        } catch where Self.isTLSFailure(error) {
            throw SyncError(.untrustedServer, "\(request.method) \(request.url): the TLS handshake failed (\(error)); is the server's certificate trusted by this client, current, and for this host?")
        } catch {
            throw SyncError(.transport, "\(request.method) \(request.url): \(error)")
        }
    }

    /// Whether `error` is a failed TLS handshake or certificate check (which no retry can fix),
    /// rather than the network failing.
    static func isTLSFailure(_ error: any Error) -> Bool {
        error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError
    }
}
