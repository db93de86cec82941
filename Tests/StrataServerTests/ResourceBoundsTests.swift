import Foundation
import HTTPTypes
import Hummingbird
import Strata
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// The server's resource bounds on a real server and a real port: connection timeouts and caps,
/// the upload memory budget, the failed-authentication limit per address. Timeouts are set to a
/// second and every test asserts that the server closed a connection (end of stream) or what it
/// answered — never how long anything took.
@Suite("Resource bounds: timeouts, connection caps, upload budget, failed-auth limit")
struct ResourceBoundsTests {
    /// Limits with every timeout long (so that only the one under test fires) and caps wide.
    func limits(_ change: (inout ServerConfiguration.Limits) -> Void = { _ in }) -> ServerConfiguration.Limits {
        var limits = ServerConfiguration.Limits()
        limits.idleTimeout = .seconds(120)
        limits.headerTimeout = .seconds(120)
        limits.bodyTimeout = .seconds(120)
        change(&limits)
        return limits
    }

    /// A push body of one transaction of a new replica.
    func pushBytes(_ replica: ReplicaID = .random(), sequences: ClosedRange<UInt64> = 1...1, title: String = "x") -> [UInt8] {
        TransactionFrames.encode([transaction(replica, sequences, title: title).encoded()])
    }

    /// A fresh connection's whole exchange (the server may keep it open; it is closed after).
    func exchange(_ port: Int, _ method: String, _ path: String, token: String? = Token.alice, body: [UInt8] = [],
                  headers: [String: String] = [:], from source: String? = nil) async throws -> RawConnection.Answer {
        let connection = try RawConnection(port: port, from: source)
        defer { connection.close() }
        return try #require(await connection.exchange(method, path, token: token, body: body, headers: headers),
                            "no answer to \(method) \(path)")
    }

    func errorCode(_ answer: RawConnection.Answer) -> String? {
        let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }

    // MARK: Timeouts

    @Test("an idle connection is closed by the server; a long poll outlasting the idle timeout is answered, not cut")
    func idleTimeout() async throws {
        let server = try TestServer(limits: limits { $0.idleTimeout = .seconds(1) })
        try await withLiveServer(server) { port in
            #expect(try await exchange(port, "PUT", "/v1/zones/notes").status == 201)
            let zone = try await exchange(port, "GET", "/v1/zones/notes")
            let token = try JSONDecoder().decode(ZoneDescription.self, from: Data(zone.body)).token

            // A connection that never sends a byte, and one that sent a request and then sat.
            let silent = try RawConnection(port: port)
            let used = try RawConnection(port: port)
            #expect(await used.exchange("GET", "/health")?.status == 200)
            // A long poll of three seconds on a third connection: in flight, so never idle.
            let poller = try RawConnection(port: port)
            #expect(poller.send("GET /v1/zones/notes/changes?after=\(token)&wait=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\n\r\n"))

            let silentEnd = await silent.readUntilClosed()
            #expect(silentEnd.closed, "the server did not close a connection idle past its idle timeout")
            #expect(silentEnd.bytes.isEmpty)
            let usedEnd = await used.readUntilClosed()
            #expect(usedEnd.closed, "the server did not close a kept-alive connection idle past its idle timeout")

            let polled = try #require(await poller.readAnswer(), "the long poll was cut instead of answered")
            #expect(polled.status == 200)
            #expect(polled.headers["strata-next-token"] == token)
            // Once answered, the poller's connection is idle in turn.
            #expect(await poller.readUntilClosed().closed)
        }
    }

    @Test("a request head trickling in is closed after the header timeout, while another client is served")
    func headerTimeout() async throws {
        let server = try TestServer(limits: limits { $0.headerTimeout = .seconds(1) })
        try await withLiveServer(server) { port in
            let slow = try RawConnection(port: port, readLimit: 1)
            #expect(slow.send("GET /v1/zones HTTP/1.1\r\nHost: x\r\n"))
            // One header byte at a time, each well within the header timeout: bytes arriving do
            // not keep an unfinished head alive. Stop when the server has closed (a read sees the
            // end) — at most 120 rounds, so that a server that never closes fails the test.
            var closed = false
            for round in 0..<120 where !closed {
                if !slow.send("X-Slow-\(round): y\r\n") {
                    closed = true
                    break
                }
                switch await slow.read() {
                case .closed: closed = true
                case .bytes(let bytes): Issue.record("answered an unfinished head: \(String(decoding: bytes, as: UTF8.self))")
                case .nothing: break
                }
                // Meanwhile another client is served.
                if round == 0 { #expect(try await exchange(port, "GET", "/v1/zones").status == 200) }
            }
            #expect(closed, "the server never closed a connection whose head did not finish")
        }
    }

    @Test("a request body that stalls is cut off after the body timeout; another client's push is stored meanwhile")
    func bodyTimeout() async throws {
        let server = try TestServer(limits: limits { $0.bodyTimeout = .seconds(1) })
        try await withLiveServer(server) { port in
            #expect(try await exchange(port, "PUT", "/v1/zones/notes").status == 201)
            let body = pushBytes()
            let stalled = try RawConnection(port: port)
            #expect(stalled.send("POST /v1/zones/notes/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\nContent-Length: \(body.count)\r\n\r\n"))
            #expect(stalled.send(Array(body.prefix(body.count / 2))))

            let other = try await exchange(port, "POST", "/v1/zones/notes/push", body: pushBytes(title: "served"))
            #expect(other.status == 200, "\(String(decoding: other.body, as: UTF8.self))")

            let end = await stalled.readUntilClosed()
            #expect(end.closed, "the server did not close a connection whose body stalled")
            #expect(end.bytes.isEmpty, "answered a push whose body never arrived: \(String(decoding: end.bytes, as: UTF8.self))")
            // Only the other push was stored.
            let pulled = try await exchange(port, "GET", "/v1/zones/notes/changes")
            #expect(pulled.status == 200)
            #expect(try TransactionFrames.decode(pulled.body).count == 1)
        }
    }

    @Test("an answer the client reads nothing of is cut off after the write timeout; a client reading the same answer gets all of it")
    func writeTimeout() async throws {
        // Five seconds, not one: on a loaded two-core machine a reading client can be starved of CPU for
        // a second, and the server would rightly cut it too.
        let server = try TestServer(limits: limits { $0.writeTimeout = .seconds(5) })
        try await withLiveServer(server) { port in
            #expect(try await exchange(port, "PUT", "/v1/zones/notes").status == 201)
            // 28 MiB of history: more than loopback's socket buffers hold for a client that reads nothing.
            let replica = ReplicaID.random()
            let big = String(repeating: "a", count: 4 << 20)
            for sequence in 1...7 as ClosedRange<UInt64> {
                let pushed = try await exchange(port, "POST", "/v1/zones/notes/push", body: pushBytes(replica, sequences: sequence...sequence, title: big))
                #expect(pushed.status == 200)
            }

            let stalled = try RawConnection(port: port)
            #expect(stalled.send("GET /v1/zones/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\n\r\n"))
            // Another client reads the same answer to its end meanwhile.
            let reader = try await exchange(port, "GET", "/v1/zones/notes/changes")
            #expect(reader.status == 200)
            #expect(try TransactionFrames.decode(reader.body).count == 7)

            // Waits for the cause (the server counting a write timeout), not for a time.
            let counted = #"strata_connection_timeouts_total{timeout="write"} 1"#
            var seen = false
            for _ in 0..<600 where !seen {
                seen = String(decoding: server.app.metrics.exposition(), as: UTF8.self).contains(counted)
                if !seen { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(seen, "the server never timed out the answer nobody read")
            let end = await stalled.readUntilClosed()
            #expect(end.closed, "the connection of the stalled answer is still open")
            #expect(end.bytes.count < reader.body.count, "the whole answer reached a client that read none of it")
        }
    }

    // MARK: Connection caps

    @Test("over maxConnections a new connection is answered 503 serverBusy with Retry-After and closed; the open ones are still served, and a freed slot admits again")
    func totalCap() async throws {
        // The capped connections are idle between requests: not closed for the new one here.
        let server = try TestServer(limits: limits { $0.maxConnections = 3; $0.shedIdleAfter = .seconds(600) })
        try await withLiveServer(server) { port in
            let open = try (0..<3).map { _ in try RawConnection(port: port) }
            // Each is admitted and served (so that the server has counted all three).
            for connection in open { #expect(await connection.exchange("GET", "/health")?.status == 200) }

            let refused = try RawConnection(port: port)
            let answer = try #require(await refused.readAnswer(), "the connection over the cap got no answer")
            #expect(answer.status == 503)
            #expect(errorCode(answer) == "serverBusy")
            #expect(answer.headers["retry-after"] == "1")
            #expect(await refused.readUntilClosed().closed, "the refused connection was left open")

            // The admitted connections are still served.
            for connection in open { #expect(await connection.exchange("GET", "/v1/zones", token: Token.alice)?.status == 200) }

            // Closing one frees its slot; the count follows the close on the server's side, so a
            // new connection is tried until admitted (each refused one is answered 503 meanwhile).
            open[0].close()
            var admitted: Int?
            for _ in 0..<200 where admitted == nil {
                let again = try RawConnection(port: port)
                let status = await again.exchange("GET", "/health")?.status
                if status == 200 { admitted = status } else { try await Task.sleep(for: .milliseconds(10)) }
                again.close()
            }
            #expect(admitted == 200, "no connection was admitted after one of the capped ones closed")
        }
    }

    @Test("at maxConnections a new connection closes the longest-idle one instead of being refused; a connection mid-request is never closed for it, and a refused one makes no room")
    func idleShedAtCap() async throws {
        let server = try TestServer(limits: limits { $0.maxConnections = 2; $0.shedIdleAfter = .zero })
        try await withLiveServer(server) { port in
            let idle = try RawConnection(port: port)
            let busy = try RawConnection(port: port)
            // A request begun on `busy` (its head not finished): never closed for another.
            #expect(busy.send("GET /health HTTP/1.1\r\nHost: x\r\n"))
            try await Task.sleep(for: .milliseconds(200))

            let newcomer = try RawConnection(port: port)
            #expect(await newcomer.exchange("GET", "/health")?.status == 200, "the new connection was not admitted")
            #expect(await idle.readUntilClosed().closed, "the idle connection was not closed to make room")
            // The one mid-request is still served.
            #expect(busy.send("\r\n"))
            #expect(await busy.readAnswer()?.status == 200, "the connection mid-request was closed")

            // Refused connections make no room: with both slots held by requests begun, a new
            // connection is answered 503 — and so is the next, which must not be admitted in
            // place of the refused one before it (that one was never counted).
            #expect(busy.send("GET /health HTTP/1.1\r\nHost: x\r\n"))
            #expect(newcomer.send("GET /health HTTP/1.1\r\nHost: x\r\n"))
            try await Task.sleep(for: .milliseconds(200))
            for _ in 0..<3 {
                let refused = try RawConnection(port: port)
                #expect(await refused.readAnswer()?.status == 503, "a connection over a cap of busy connections was admitted")
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(busy.send("\r\n") && newcomer.send("\r\n"))
            #expect(await busy.readAnswer()?.status == 200)
            #expect(await newcomer.readAnswer()?.status == 200)
        }
    }

    @Test("over maxConnectionsPerAddress a connection from that address is refused 503; another address is served")
    func perAddressCap() async throws {
        let server = try TestServer(limits: limits { $0.maxConnectionsPerAddress = 2 })
        try await withLiveServer(server) { port in
            let open = try (0..<2).map { _ in try RawConnection(port: port, from: "127.0.0.1") }
            for connection in open { #expect(await connection.exchange("GET", "/health")?.status == 200) }

            let refused = try RawConnection(port: port, from: "127.0.0.1")
            let answer = try #require(await refused.readAnswer())
            #expect(answer.status == 503)
            #expect(errorCode(answer) == "serverBusy")
            #expect(answer.headers["retry-after"] != nil)

            let elsewhere = try RawConnection(port: port, from: "127.0.0.2")
            #expect(await elsewhere.exchange("GET", "/v1/zones", token: Token.bob)?.status == 200)
            for connection in open { #expect(await connection.exchange("GET", "/health")?.status == 200) }
        }
    }

    // MARK: Over TLS

    /// A self-signed certificate for localhost, made by the `openssl` tool (the test fails if it
    /// is missing).
    func selfSignedCertificate(in directory: TemporaryDirectory) throws -> TLSFiles {
        let files = TLSFiles(certificateChain: directory.sub("cert.pem"), privateKey: directory.sub("key.pem"))
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files.privateKey,
                             "-out", files.certificateChain, "-days", "1", "-subj", "/CN=localhost"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl could not make a test certificate")
        return files
    }

    /// Runs the server over HTTPS for the duration of `body`.
    func withTLSServer(_ server: TestServer, _ body: @Sendable (_ port: Int) async throws -> Void) async throws {
        let tls = try selfSignedCertificate(in: server.directory).serverConfiguration()
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = try server.app.buildApplication(tls: tls, onRunning: { port in continuation.yield(port) })
        let running = Task {
            defer { continuation.finish() }
            try await application.runService(gracefulShutdownSignals: [])
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            let outcome = await running.result
            try? await server.storage.close()
            throw RawConnection.Failure(description: "the HTTPS test server did not start: \(outcome)")
        }
        do {
            try await body(port)
        } catch {
            running.cancel()
            _ = await running.result
            try? await server.storage.close()
            throw error
        }
        running.cancel()
        _ = await running.result
        try await server.storage.close()
    }

    @Test("over HTTPS the bounds hold too: a connection that never handshakes is closed by the idle timeout, and one over the connection cap is closed")
    func overTLS() async throws {
        try await withTLSServer(try TestServer(limits: limits { $0.idleTimeout = .seconds(1) })) { port in
            let silent = try RawConnection(port: port)
            #expect(await silent.readUntilClosed().closed, "an HTTPS connection that never handshook was left open")
        }
        let server = try TestServer(limits: limits { $0.maxConnections = 1; $0.shedIdleAfter = .seconds(600) })
        try await withTLSServer(server) { port in
            let admitted = try RawConnection(port: port)
            // The admitted one is counted once the server has set it up (waited for by its cause,
            // the open-connections gauge); the refused one then has no handshake, so no answer
            // can reach it, and is closed anyway.
            var counted = false
            for _ in 0..<3000 where !counted {
                counted = String(decoding: server.app.metrics.exposition(), as: UTF8.self).split(separator: "\n").contains { line in
                    line.hasPrefix("strata_open_connections ") && Double(line.split(separator: " ").last ?? "") == 1
                }
                if !counted { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(counted, "the server never counted the first connection")
            let refused = try RawConnection(port: port)
            #expect(await refused.readUntilClosed().closed, "an HTTPS connection over the cap was left open")
            admitted.close()
        }
    }

    // MARK: Failed authentications per address

    @Test("after the burst of failed authentications an address gets 429 rateLimited with Retry-After, even with a valid token, until the bucket refills; other addresses are unaffected")
    func failedAuthLimit() async throws {
        let clock = ManualTime()
        let server = try TestServer(limits: limits { $0.failedAuthLimit = RateLimit(requestsPerSecond: 1.0 / 60.0, burst: 3) },
                                    clock: ServerClock(elapsed: { clock.now }))
        try await withLiveServer(server) { port in
            for token in ["guess-1", "guess-2", nil] {
                #expect(try await exchange(port, "GET", "/v1/zones", token: token).status == 401)
            }
            let limited = try await exchange(port, "GET", "/v1/zones", token: Token.alice)
            #expect(limited.status == 429)
            #expect(errorCode(limited) == "rateLimited")
            #expect(limited.headers["retry-after"] == "60")
            // A forwarded-for header from an untrusted peer changes nothing.
            let forwarded = try await exchange(port, "GET", "/v1/zones", token: Token.alice, headers: ["X-Forwarded-For": "10.9.8.7"])
            #expect(forwarded.status == 429)
            // The operations endpoints stay open to it.
            #expect(try await exchange(port, "GET", "/health", token: nil).status == 200)
            // Another address is not affected.
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice, from: "127.0.0.2").status == 200)

            clock.advance(by: .seconds(58))
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice).status == 429)
            clock.advance(by: .seconds(3))
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice).status == 200)
            // One failure's worth refilled: the next failure empties the bucket again.
            #expect(try await exchange(port, "GET", "/v1/zones", token: "guess-3").status == 401)
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice).status == 429)
        }
    }

    @Test("behind a trusted proxy, failed authentications count against the forwarded client address")
    func trustedProxy() async throws {
        let clock = ManualTime()
        let server = try TestServer(limits: limits {
            $0.failedAuthLimit = RateLimit(requestsPerSecond: 1.0 / 60.0, burst: 2)
            $0.trustedProxies = ["127.0.0.1"]
        }, clock: ServerClock(elapsed: { clock.now }))
        try await withLiveServer(server) { (port: Int) async throws in
            let guesser = ["X-Forwarded-For": "10.0.0.66"]
            for _ in 0..<2 { #expect(try await exchange(port, "GET", "/v1/zones", token: "guess", headers: guesser).status == 401) }
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice, headers: guesser).status == 429)
            // Another client behind the same proxy, and the proxy's own requests, still pass.
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice, headers: ["X-Forwarded-For": "10.0.0.7"]).status == 200)
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice).status == 200)
            // A client cannot hide behind a forged first hop: the last untrusted hop counts.
            #expect(try await exchange(port, "GET", "/v1/zones", token: Token.alice,
                                       headers: ["X-Forwarded-For": "10.0.0.7, 10.0.0.66"]).status == 429)
        }
    }

    // MARK: Upload memory budget

    @Test("a push that finds no room in the upload budget is answered 503 serverBusy with Retry-After; the budget held by an upload whose connection dies is given back, and the next push is stored")
    func uploadBudgetFull() async throws {
        let budget = 64 * 1024
        let server = try TestServer(limits: limits {
            $0.uploadMemoryBudget = budget
            $0.uploadBudgetWait = .milliseconds(200)
        })
        let uploadBudget = server.app.bounds.uploadBudget
        try await withLiveServer(server) { port in
            #expect(try await exchange(port, "PUT", "/v1/zones/notes").status == 201)
            // An upload declaring the whole budget, then sending only its start.
            let holder = try RawConnection(port: port)
            #expect(holder.send("POST /v1/zones/notes/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\nContent-Length: \(budget)\r\n\r\n"))
            #expect(holder.send([UInt8](repeating: 0, count: 100)))
            try await waitUntil { uploadBudget.available == 0 }
            #expect(uploadBudget.available == 0, "the held upload did not reserve the budget")

            let busy = try await exchange(port, "POST", "/v1/zones/notes/push", body: pushBytes())
            #expect(busy.status == 503)
            #expect(errorCode(busy) == "serverBusy")
            #expect(busy.headers["retry-after"] == "1")

            // The holder goes away mid-body: its reservation comes back.
            holder.close()
            try await waitUntil { uploadBudget.available == budget }
            #expect(uploadBudget.available == budget, "the reservation of an aborted upload was not given back")

            let stored = try await exchange(port, "POST", "/v1/zones/notes/push", body: pushBytes(title: "after"))
            #expect(stored.status == 200, "\(String(decoding: stored.body, as: UTF8.self))")
            #expect(uploadBudget.available == budget, "a finished push kept its reservation")
            // So were a failed push's and a refused one's.
            #expect(try await exchange(port, "POST", "/v1/zones/notes/push", body: [1, 2, 3]).status == 400)
            #expect(try await exchange(port, "POST", "/v1/zones/notes/push", token: "wrong", body: pushBytes()).status == 401)
            #expect(uploadBudget.available == budget)
        }
    }

    @Test("a body without Content-Length reserves as it arrives and is stored")
    func chunkedUpload() async throws {
        let server = try TestServer(limits: limits { $0.uploadMemoryBudget = 4 << 20 })
        try await withLiveServer(server) { port in
            #expect(try await exchange(port, "PUT", "/v1/zones/notes").status == 201)
            let body = pushBytes(sequences: 1...3)
            let connection = try RawConnection(port: port)
            var request = "POST /v1/zones/notes/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Token.alice)\r\nTransfer-Encoding: chunked\r\n\r\n"
            request += String(body.count, radix: 16) + "\r\n"
            #expect(connection.send(Array(request.utf8) + body + Array("\r\n0\r\n\r\n".utf8)))
            let answer = try #require(await connection.readAnswer())
            #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            #expect(server.app.bounds.uploadBudget.available == 4 << 20)
        }
    }
}

/// The budget's own logic, without a server.
@Suite("UploadBudget: first come first served, bounded waits")
struct UploadBudgetTests {
    @Test("reservations that fit are granted at once; those that do not wait and are granted in order as bytes come back")
    func ordering() async throws {
        let budget = UploadBudget(capacity: 100, wait: .seconds(60))
        #expect(await budget.reserve(60))
        #expect(await budget.reserve(40))
        let first = Task { await budget.reserve(50) }
        try await waitUntil { budget.waiting == 1 }
        let second = Task { await budget.reserve(10) }
        try await waitUntil { budget.waiting == 2 }
        // Room for the second but not the first: the second stays behind the first (a stream of
        // small bodies never starves a large one).
        budget.release(40)
        #expect(budget.available == 40)
        #expect(budget.waiting == 2)
        budget.release(60)
        #expect(await first.value)
        #expect(await second.value)
        #expect(budget.available == 40)
        budget.release(50)
        budget.release(10)
        #expect(budget.available == 100)
    }

    @Test("a reservation that finds no room within the wait is refused and takes nothing; a cancelled one too")
    func refusal() async throws {
        let budget = UploadBudget(capacity: 10, wait: .milliseconds(20))
        #expect(await budget.reserve(10))
        #expect(await budget.reserve(1) == false)
        let patient = UploadBudget(capacity: 10, wait: .seconds(60))
        #expect(await patient.reserve(10))
        let waiting = Task { await patient.reserve(5) }
        try await waitUntil { patient.waiting == 1 }
        waiting.cancel()
        #expect(await waiting.value == false)
        patient.release(10)
        #expect(patient.available == 10)
        // A body larger than the whole budget waits for all of it, rather than forever.
        #expect(await patient.reserve(1000))
        #expect(patient.available == 0)
    }
}

/// Polls `condition` until it holds (at most ten seconds, then the test fails instead of hanging).
private func waitUntil(_ condition: () -> Bool) async throws {
    for _ in 0..<2000 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("the condition did not come true within ten seconds")
}
