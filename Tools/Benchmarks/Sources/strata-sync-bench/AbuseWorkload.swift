// Row 5: what abusive-but-cheap clients cost everyone else. Pulls of a small page, from a few
// keep-alive connections as fast as they are answered, with nobody else connected and then with
// 1,000 long polls waiting and 100 slow clients (50 dripping a request head, 50 dripping a push
// body) connected — alternating in rounds, so that drift in the machine hits both. The abusers
// come from other loopback addresses (127.0.1.x, 127.0.2.x), as many clients would, so that the
// server's per-address connection cap (256) does not refuse them.
import BenchSupport
import Foundation
import StrataProtocol
import Strata
import StrataCore
import StrataLog
import StrataServer

#if canImport(Glibc)
import Glibc
#endif

struct AbuseSettings {
    var rounds = 3
    var phaseSeconds = 4.0
    var pullers = 4
    var longPolls = 1000
    var slowClients = 100
    var transactions = 10
}

struct AbuseRun {
    struct Phase {
        var requests: Int
        var seconds: Double
        var latencies: [UInt64]
        var failures: Int
    }
    var quiet: [Phase] = []
    var loaded: [Phase] = []
    /// Long polls still open (not answered, not closed) at the end of each loaded phase.
    var longPollsHeld: [Int] = []
    /// Slow clients the server closed (header or body timeout) over the run, reconnected at once.
    var slowClosed = 0

    static func rate(_ phases: [Phase]) -> Double {
        phases.reduce(0) { $0 + Double($1.requests) } / max(1e-9, phases.reduce(0) { $0 + $1.seconds })
    }

    static func p99(_ phases: [Phase]) -> UInt64 {
        percentile(phases.flatMap(\.latencies).sorted(), 99)
    }
}

/// A blocking TCP socket to the server, optionally bound to a loopback source address.
final class BenchSocket {
    let fd: Int32

    init?(port: Int, from source: String? = nil, nonBlocking: Bool = false) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source {
            var local = Self.address(source, port: 0)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                return nil
            }
        }
        var remote = Self.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        if nonBlocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }

    deinit { close(fd) }

    static func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// Sends everything; false when the connection is gone (or would block, non-blocking).
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Reads one whole HTTP answer with a `Content-Length` body: its status, or nil when the
    /// connection ended first.
    func readAnswer(_ buffer: inout [UInt8]) -> Int? {
        readAnswer(&buffer, keepBody: false)?.status
    }

    /// Reads one whole HTTP answer: its status and (when `keepBody`) its body.
    func readAnswer(_ buffer: inout [UInt8], keepBody: Bool) -> (status: Int, body: [UInt8])? {
        var received: [UInt8] = []
        while true {
            if let end = Self.headEnd(received) {
                let head = String(decoding: received[..<end], as: UTF8.self)
                let lines = head.split(separator: "\r\n")
                guard let statusLine = lines.first, statusLine.split(separator: " ").count >= 2,
                      let status = Int(statusLine.split(separator: " ")[1]) else { return nil }
                var length = 0
                for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
                var body = keepBody ? Array(received[(end + 4)...]) : []
                var have = received.count - end - 4
                while have < length {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if count <= 0 { return nil }
                    have += count
                    if keepBody { body += buffer[..<count] }
                }
                return (status, body)
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            received += buffer[..<count]
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// Whether the peer has closed (a non-blocking peek sees end of stream or a reset).
    var isClosedByPeer: Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if count == 0 { return true }
        if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        return false
    }
}

/// Row 5: pulls of a small page with and without abusive clients connected.
func abuseRun(server: ServerProcess, settings: AbuseSettings) async throws -> AbuseRun {
    let port = server.port
    let token = ServerProcess.token
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    // A zone with a few small transactions: the page every pull answers.
    guard let setup = BenchSocket(port: port) else { throw BenchError("cannot connect to the server") }
    func request(_ method: String, _ path: String, body: [UInt8] = []) -> [UInt8] {
        Array("\(method) \(path) HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(token)\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
    }
    _ = setup.send(request("PUT", "/v1/zones/abuse"))
    guard let created = setup.readAnswer(&scratch), created == 201 || created == 200 else { throw BenchError("creating zone abuse failed") }
    let replica = ReplicaID.random()
    let records = (1...UInt64(settings.transactions)).map { sequence in
        TransactionRecord(replica: replica, events: [
            Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                  change: .insert(entity: "Item", object: ObjectID(), fields: ["name": .string("item \(sequence)")])),
        ])
    }
    _ = setup.send(request("POST", "/v1/zones/abuse/push", body: TransactionFrames.encode(records.map { $0.encoded() })))
    guard setup.readAnswer(&scratch) == 200 else { throw BenchError("pushing to zone abuse failed") }
    // The zone's end, for long polls that wait there.
    _ = setup.send(request("GET", "/v1/zones/abuse"))
    var endToken = ""
    if let described = setup.readAnswer(&scratch, keepBody: true),
       let object = try? JSONSerialization.jsonObject(with: Data(described.body)) as? [String: Any] {
        endToken = object["token"] as? String ?? ""
    }
    guard !endToken.isEmpty else { throw BenchError("no token in the zone's description") }
    let pull = request("GET", "/v1/zones/abuse/changes?limit=\(settings.transactions)")
    let longPoll = request("GET", "/v1/zones/abuse/changes?after=\(endToken)&wait=60")

    /// Pulls on `pullers` keep-alive connections for `seconds`; every latency, and the failures.
    func measure(seconds duration: Double) -> AbuseRun.Phase {
        let results = PullerResults()
        let deadline = monotonicNanos() + UInt64(duration * 1e9)
        let started = monotonicNanos()
        let group = DispatchGroup()
        for _ in 0..<settings.pullers {
            group.enter()
            Thread.detachNewThread {
                var mine: [UInt64] = []
                var failed = 0
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                var socket = BenchSocket(port: port)
                while monotonicNanos() < deadline {
                    guard let connection = socket else {
                        failed += 1
                        socket = BenchSocket(port: port)
                        continue
                    }
                    let sent = monotonicNanos()
                    let status = connection.send(pull) ? connection.readAnswer(&buffer) : nil
                    if status == 200 {
                        mine.append(monotonicNanos() - sent)
                    } else {
                        failed += 1
                        // An answer other than 200 keeps the connection; a lost one is replaced.
                        if status == nil { socket = BenchSocket(port: port) }
                    }
                }
                results.add(mine, failures: failed)
                group.leave()
            }
        }
        group.wait()
        return AbuseRun.Phase(requests: results.latencies.count, seconds: seconds(monotonicNanos() - started),
                              latencies: results.latencies, failures: results.failures)
    }

    var run = AbuseRun()
    for round in 1...settings.rounds {
        note("  round \(round)/\(settings.rounds): quiet…")
        run.quiet.append(measure(seconds: settings.phaseSeconds))

        // The abusers: long polls waiting at the zone's end, and slow clients.
        var polls: [BenchSocket] = []
        for index in 0..<settings.longPolls {
            let source = "127.0.1.\(1 + index / 200)"
            guard let socket = BenchSocket(port: port, from: source), socket.send(longPoll) else {
                throw BenchError("long poll \(index) could not connect from \(source)")
            }
            polls.append(socket)
        }
        let slow = SlowClients(port: port, token: token, count: settings.slowClients)
        let dripper = Thread { slow.drip() }
        dripper.start()
        // Let the server take them all in before measuring.
        usleep(1_000_000)
        note("  round \(round)/\(settings.rounds): \(polls.count) long polls and \(slow.connected) slow clients connected…")
        run.loaded.append(measure(seconds: settings.phaseSeconds))
        run.longPollsHeld.append(polls.filter { !$0.isClosedByPeer }.count)
        run.slowClosed += slow.stop()
        polls.removeAll()
        // Give the server a moment to see them go.
        usleep(500_000)
    }
    return run
}

/// What the pulling threads measured.
final class PullerResults: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var latencies: [UInt64] = []
    private(set) var failures = 0

    func add(_ latencies: [UInt64], failures: Int) {
        lock.lock()
        self.latencies += latencies
        self.failures += failures
        lock.unlock()
    }
}

/// Slow clients: half drip a request head (one byte every half second: the server's header
/// timeout closes them), half declare a 1 MiB push body and drip it (never stalling long enough
/// for the body timeout, each holding 1 MiB of the upload budget). One closed by the server is
/// reconnected at once, so that `count` stay connected.
final class SlowClients: @unchecked Sendable {
    private let port: Int
    private let token: String
    private let lock = NSLock()
    private var clients: [(socket: BenchSocket, drip: [UInt8], position: Int)] = []
    private var stopped = false
    private var finished = false
    private var closedByServer = 0

    init(port: Int, token: String, count: Int) {
        self.port = port
        self.token = token
        clients = (0..<count).compactMap { connect($0) }
    }

    var connected: Int { lock.lock(); defer { lock.unlock() }; return clients.count }

    private func connect(_ index: Int) -> (socket: BenchSocket, drip: [UInt8], position: Int)? {
        guard let socket = BenchSocket(port: port, from: "127.0.2.\(1 + index / 100)", nonBlocking: true) else { return nil }
        if index % 2 == 0 {
            let head = "GET /v1/zones/abuse/changes HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(token)\r\nX-Slow: "
            return (socket, Array(head.utf8) + [UInt8](repeating: UInt8(ascii: "z"), count: 1000), 0)
        }
        let head = "POST /v1/zones/abuse/push HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(token)\r\nContent-Length: \(1 << 20)\r\n\r\n"
        _ = socket.send(Array(head.utf8))
        return (socket, [0], 0)
    }

    /// Drips a byte to each client every half second until ``stop()``.
    func drip() {
        while true {
            lock.lock()
            if stopped {
                finished = true
                lock.unlock()
                return
            }
            for index in clients.indices {
                let client = clients[index]
                let byte = client.drip[client.position % client.drip.count]
                if client.socket.isClosedByPeer || !client.socket.send([byte]) {
                    closedByServer += 1
                    if let fresh = connect(index) { clients[index] = fresh }
                } else {
                    clients[index].position += 1
                }
            }
            lock.unlock()
            usleep(500_000)
        }
    }

    /// Stops dripping, closes every client; how many the server had closed meanwhile.
    func stop() -> Int {
        lock.lock()
        stopped = true
        lock.unlock()
        while true {
            lock.lock()
            if finished {
                clients.removeAll()
                lock.unlock()
                return closedByServer
            }
            lock.unlock()
            usleep(10_000)
        }
    }
}
