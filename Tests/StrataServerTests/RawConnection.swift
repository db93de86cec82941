import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import StrataServer
import StrataProtocol
import StrataCore

/// A plain TCP connection to a live test server, for what an HTTP client library hides: a
/// request sent byte by byte, a body that stalls, a connection that just sits there, and whether
/// it was the server that closed it. Reads run off the cooperative thread pool (the server's
/// handlers need it); each read gives up after `readLimit` so that a server that never answers
/// fails the test instead of hanging it.
final class RawConnection: @unchecked Sendable {
    enum Read: Equatable {
        case bytes([UInt8])
        /// The server closed the connection (end of stream, or a reset).
        case closed
        /// Nothing came within the read limit.
        case nothing
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let fd: Int32
    private var isClosed = false

    /// Connects to `127.0.0.1:port`, from the loopback address `source` when given (Linux routes
    /// all of 127/8 to loopback, so 127.0.0.2 is a second client address).
    init(port: Int, from source: String? = nil, readLimit: TimeInterval = 30) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        var timeout = timeval(tv_sec: Int(readLimit), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A send into a full socket buffer gives up too, rather than blocking its thread forever.
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            var local = try Self.address(source, port: 0)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                Glibc.close(fd)
                throw Failure(description: "bind(\(source)) failed: errno \(errno)")
            }
        }
        var remote = try Self.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw Failure(description: "connect to port \(port) failed: errno \(errno)")
        }
    }

    deinit { close() }

    private static func address(_ host: String, port: Int) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure(description: "not an IPv4 address: \(host)") }
        return address
    }

    /// Sends `bytes`; `false` when the server had closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Sends `bytes` from a thread of its own. A large body blocks its sender until the server
    /// reads it, and the server (in this process) reads on the cooperative pool: sending on a
    /// pool thread can starve the very server it waits for (the pool has a thread per core).
    func sendOffPool(_ bytes: [UInt8]) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in continuation.resume(returning: send(bytes)) }
        }
    }

    /// One read, off the cooperative pool.
    func read() async -> Read {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    continuation.resume(returning: .bytes(Array(buffer[..<count])))
                } else if count == 0 || errno == ECONNRESET {
                    continuation.resume(returning: .closed)
                } else {
                    continuation.resume(returning: .nothing)
                }
            }
        }
    }

    /// Reads until the server closes the connection: everything it sent, and whether it did close
    /// (`false` when a read came back empty-handed first).
    func readUntilClosed() async -> (bytes: [UInt8], closed: Bool) {
        var bytes: [UInt8] = []
        while true {
            switch await read() {
            case .bytes(let more): bytes += more
            case .closed: return (bytes, true)
            case .nothing: return (bytes, false)
            }
        }
    }

    /// An HTTP/1.1 answer read off the connection.
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    /// Reads one whole answer (head and `Content-Length` body); `nil` when the connection closed
    /// or went quiet first. All of it is read on one thread of its own, so that a large answer is
    /// drained without a gap between reads (a thread per read left gaps long enough on a loaded
    /// machine for the server to cut a reading client for stalling).
    func readAnswer() async -> Answer? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in continuation.resume(returning: readAnswerBlocking()) }
        }
    }

    /// One blocking read into `buffer`: its bytes, or `nil` when the connection closed or went quiet.
    private func readBlocking(_ buffer: inout [UInt8]) -> ArraySlice<UInt8>? {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count > 0 ? buffer[..<count] : nil
    }

    private func readAnswerBlocking() -> Answer? {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var bytes: [UInt8] = []
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) {
                let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                let statusLine = head.first?.split(separator: " ") ?? []
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
                var headers: [String: String] = [:]
                for line in head.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                var body = Array(bytes[(end + 4)...])
                body.reserveCapacity(max(length, body.count))
                while body.count < length {
                    guard let more = readBlocking(&buffer) else { return nil }
                    body += more
                }
                return Answer(status: status, headers: headers, body: body)
            }
            guard let more = readBlocking(&buffer) else { return nil }
            bytes += more
        }
    }

    /// Sends a whole request and reads its answer.
    func exchange(_ method: String, _ path: String, token: String? = nil, body: [UInt8] = [], headers: [String: String] = [:]) async -> Answer? {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(body.count)\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        guard await sendOffPool(Array(head.utf8) + body) else { return nil }
        return await readAnswer()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }
}

/// Runs `app` on a free port of 127.0.0.1 for the duration of `body`, then stops it and closes
/// the storage. Fails loudly when the server does not start.
func withLiveServer<T: Sendable>(_ server: TestServer, _ body: @Sendable (_ port: Int) async throws -> T) async throws -> T {
    do {
        let value = try await withLiveServer(app: server.app, body)
        try await server.storage.close()
        return value
    } catch {
        try? await server.storage.close()
        throw error
    }
}

/// Runs `app` on a free port of 127.0.0.1 for the duration of `body`, then stops it (its storage
/// is the caller's to close). Fails loudly when the server does not start.
func withLiveServer<T: Sendable>(app: StrataServerApp, _ body: @Sendable (_ port: Int) async throws -> T) async throws -> T {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task {
        defer { continuation.finish() }
        try await app.run(onRunning: { port in continuation.yield(port) })
    }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else {
        let outcome = await running.result
        throw RawConnection.Failure(description: "the test server did not start: \(outcome)")
    }
    do {
        let value = try await body(port)
        running.cancel()
        _ = await running.result
        return value
    } catch {
        running.cancel()
        _ = await running.result
        throw error
    }
}
