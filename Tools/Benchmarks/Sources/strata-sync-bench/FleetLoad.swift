// The fleet row's load generator: thousands of devices on one thread, each from its own loopback
// address, driven by one epoll loop over non-blocking sockets. A device is a client as Strata's
// sync engines are: one keep-alive HTTP/1.1 connection that holds a long poll, never cut short
// by a local commit, whose push goes out on another connection: one kept for the device's pushes
// (`--fleet-push-connection kept`, the default, as an HTTP stack's connection pool keeps it: two
// connections per device), or a new one per push, closed after its answer (`new`). `replaces-poll`
// is the engines before they kept their poll: a commit cancels the poll — which closes its
// connection — and the push goes out on a new one, which then holds the next long poll. One loop
// for the whole fleet, so that the generator's CPU stays a small, separately reported fraction of
// the server's. It speaks the protocol's bytes itself (request
// heads, `Content-Length` answers, framed transactions) and reads only the transaction headers of
// what a long poll delivers, to match each delivery with its push.
import BenchSupport
import Foundation
import StrataCore
import StrataProtocol

#if canImport(Glibc)
import CEpoll
import Glibc
#endif

/// One device of the fleet.
struct FleetDevice {
    var zone: Int
    var replica: ReplicaID
    var source: String
    var nextSequence: UInt64 = 1
    /// A push not acknowledged (failed, or its connection lost): sent again, the same bytes, in
    /// place of the next one — as a device re-pushes what the server did not confirm.
    var unacknowledged: (sequence: UInt64, request: [UInt8])?
    /// The token the device's next long poll (or zone pull) reads after.
    var token: String
    /// Database mode: the token of the device's next database long poll ("" before the first).
    var databaseToken = ""
    var poll = -1
    var push = -1
}

/// One HTTP/1.1 connection of a device.
struct FleetConnection {
    enum Role { case poll, push }
    enum State { case connecting, idle, waiting }
    /// What a poll connection waits for: a zone long poll, or (database mode) a database long
    /// poll or the zone pull one of those started.
    enum Stage { case zonePoll, databasePoll, zonePull, push }
    var fd: Int32
    var device: Int
    var role: Role
    var state = State.connecting
    var received: [UInt8] = []
    var unsent: [UInt8] = []
    /// When the request in flight was sent (monotonic ns).
    var sentAt: UInt64 = 0
    /// Whether the push in flight was sent while measuring (its answer counts, even in the drain).
    var counted = false
    var stage = Stage.zonePoll
    /// A request to send as soon as the connection is up (a push that replaced a long poll).
    var queued: [UInt8]?
}

/// Where a device's push goes out.
enum FleetPushConnection: String, CaseIterable, Sendable {
    /// A second connection the device keeps for its pushes; the long poll is never cut short.
    case kept
    /// A new connection per push, closed after its answer; the long poll is never cut short.
    case new
    /// The poll is cut short (its connection closed) and the push goes out on a new connection,
    /// which then holds the next poll.
    case replacesPoll = "replaces-poll"
}

/// What the loop measured.
struct FleetMeasurements {
    var ackLatencies: [UInt64] = []
    var deliveryLatencies: [UInt64] = []
    var pushes = 0
    /// Pushes sent again, the same bytes, after a failure or a lost connection (not in `pushes`).
    var retries = 0
    /// Pushes sent while measuring with no answer after the drain.
    var unanswered = 0
    /// Pushes due while the device's previous push was still unanswered (not sent: the schedule
    /// fell behind the server).
    var pushesSkipped = 0
    var pushFailures = 0
    var pollFailures = 0
    /// Connections the server closed (each reopened at once).
    var closedByServer = 0
    var connectFailures = 0
    /// Deliveries still missing at the end (each push is owed to every other device of its zone).
    var undelivered = 0
    /// Long polls answered (with something, or empty at the end of their wait).
    var pollAnswers = 0
}

final class FleetLoad {
    let port: Int
    let zones: [(name: String, token: String)]
    var devices: [FleetDevice]
    private var connections: [Int32: FleetConnection] = [:]
    private let epoll: Int32
    private var measuring = false
    private(set) var measured = FleetMeasurements()
    /// Pushes not yet delivered to every other device of their zone: (replica, sequence) → (when
    /// it was due, the devices still owed it). A device is crossed off once, so a second copy
    /// delivered to one device cannot hide one missing at another.
    private var pending: [PendingKey: (sentAt: UInt64, owed: Set<Int>)] = [:]
    private let devicesPerZone: Int
    private let wait: Int
    /// Whether devices long poll their database (`GET /v1/database/changes`, then pull the zone
    /// it names, as `DatabaseSyncEngine` does) rather than their zone.
    let databaseMode: Bool
    /// Where a device's push goes out.
    let pushConnection: FleetPushConnection
    private var twoConnections: Bool { pushConnection == .kept }
    private var scratch = [UInt8](repeating: 0, count: 256 * 1024)
    private var connectingCount = 0

    struct PendingKey: Hashable {
        var replica: ReplicaID
        var sequence: UInt64
    }

    init(port: Int, zones: [(name: String, token: String)], devicesPerZone: Int, zoneTokens: [String], wait: Int, databaseMode: Bool, pushConnection: FleetPushConnection) throws {
        self.databaseMode = databaseMode
        self.pushConnection = pushConnection
        self.port = port
        self.zones = zones
        self.devicesPerZone = devicesPerZone
        self.wait = wait
        devices = []
        for zone in zones.indices {
            for _ in 0..<devicesPerZone {
                let index = devices.count
                // 127.1.0.1, 127.1.0.2, …: 250 per third byte, one address per device.
                let source = "127.\(1 + index / 62_500).\(index / 250 % 250).\(1 + index % 250)"
                devices.append(FleetDevice(zone: zone, replica: ReplicaID.random(), source: source, token: zoneTokens[zone]))
            }
        }
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw BenchError("epoll_create1: \(String(cString: strerror(errno)))") }
    }

    deinit {
        for fd in connections.keys { close(fd) }
        close(epoll)
    }

    var openConnections: Int { connections.values.filter { $0.state != .connecting }.count }
    var heldPolls: Int { connections.values.filter { $0.role == .poll && $0.state == .waiting && $0.stage != .zonePull }.count }

    // MARK: Connecting

    /// Opens both connections of every device (at most `inFlight` connects at a time) and starts
    /// every long poll; returns once all are connected and sent, or throws after `timeout`.
    func connectAll(inFlight: Int = 200, timeout: Double = 120) throws {
        var next = 0
        let perDevice = twoConnections ? 2 : 1
        let total = devices.count * perDevice
        let deadline = monotonicNanos() + UInt64(timeout * 1e9)
        while next < total || connectingCount > 0 {
            while next < total && connectingCount < inFlight {
                let device = next / perDevice
                let role: FleetConnection.Role = next % perDevice == 0 ? .poll : .push
                try open(device: device, role: role)
                next += 1
            }
            turn(timeoutMs: 5)
            if monotonicNanos() > deadline {
                throw BenchError("fleet: \(connectingCount) connects still pending after \(Int(timeout)) s (\(next) of \(total) started)")
            }
        }
    }

    @discardableResult
    private func open(device: Int, role: FleetConnection.Role) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno))) (device \(device); raise the open-file limit)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = BenchSocket.address(devices[device].source, port: 0)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw BenchError("bind \(devices[device].source): \(String(cString: strerror(errno)))")
        }
        var remote = BenchSocket.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 || errno == EINPROGRESS else {
            close(fd)
            throw BenchError("connect from \(devices[device].source): \(String(cString: strerror(errno)))")
        }
        connections[fd] = FleetConnection(fd: fd, device: device, role: role)
        connectingCount += 1
        switch role {
        case .poll: devices[device].poll = Int(fd)
        case .push: devices[device].push = Int(fd)
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue
        event.data.fd = fd
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
        return fd
    }

    /// Closes a connection on the device's own account (a long poll cut short).
    private func drop(_ fd: Int32) {
        guard let connection = connections.removeValue(forKey: fd) else { return }
        // Until its replacement is open, the device has no connection (a descriptor number
        // reused by another device's socket must not be taken for this one's).
        if devices[connection.device].poll == Int(fd) { devices[connection.device].poll = -1 }
        if devices[connection.device].push == Int(fd) { devices[connection.device].push = -1 }
        if connection.state == .connecting { connectingCount -= 1 }
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        close(fd)
    }

    /// Closes a connection the server ended (or that failed) and opens the device's replacement.
    private func reopen(_ fd: Int32) {
        guard let connection = connections.removeValue(forKey: fd) else { return }
        if connection.state == .connecting { connectingCount -= 1 }
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        close(fd)
        if measuring { measured.closedByServer += 1 }
        // A connection made for one push is not replaced: the push stays unacknowledged, and the
        // device's next push sends it again.
        if pushConnection == .new && connection.role == .push {
            if devices[connection.device].push == Int(fd) { devices[connection.device].push = -1 }
            return
        }
        do {
            try open(device: connection.device, role: connection.role)
        } catch {
            measured.connectFailures += 1
            // No replacement: the device has no such connection (a descriptor number reused by
            // another device's socket must not be taken for this one's).
            if devices[connection.device].poll == Int(fd) { devices[connection.device].poll = -1 }
            if devices[connection.device].push == Int(fd) { devices[connection.device].push = -1 }
        }
    }

    // MARK: The loop

    /// Runs the loop for `duration` seconds, pushing `rate` one-insert transactions a second in
    /// total (device after device, evenly spaced), or none with `rate` 0. With `measure`, what
    /// happens counts.
    func run(seconds duration: Double, rate: Double, measure: Bool) {
        measuring = measure
        let start = monotonicNanos()
        let end = start + UInt64(duration * 1e9)
        var sent = 0
        var cursor = 0
        while true {
            let now = monotonicNanos()
            if now >= end { break }
            if rate > 0 {
                let due = Int(Double(now - start) / 1e9 * rate)
                while sent < due {
                    // Latency counts from when the push was due, not from when the loop got to
                    // it: a generator falling behind shows as latency, not as fewer samples.
                    push(device: cursor, due: start + UInt64(Double(sent) / rate * 1e9))
                    cursor = (cursor + 1) % devices.count
                    sent += 1
                }
                let nextDue = start + UInt64(Double(sent + 1) / rate * 1e9)
                // At least a millisecond: pushes due within it go out together on the next turn,
                // rather than the loop spinning (and its CPU counting against the server's).
                turn(timeoutMs: Int32(max(1, min(5, (Int64(nextDue) - Int64(monotonicNanos())) / 1_000_000))))
            } else {
                turn(timeoutMs: 5)
            }
        }
        measuring = false
    }

    /// The deliveries still owed, counted (after a drain).
    func countUndelivered() -> Int {
        pending.values.reduce(0) { $0 + $1.owed.count }
    }

    /// Pushes sent while measuring that have no answer yet (after a drain: never answered).
    func countUnanswered() -> Int {
        connections.values.filter { $0.stage == .push && $0.counted && ($0.state == .waiting || $0.queued != nil || $0.state == .connecting) }.count
    }

    /// Forgets what is pending (between the warm-up and the measured phase).
    func resetMeasurements() {
        measured = FleetMeasurements()
        pending.removeAll()
    }

    private var events = [epoll_event](repeating: epoll_event(), count: 512)

    private func turn(timeoutMs: Int32) {
        let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, 512, timeoutMs) }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let fd = events[index].data.fd
            let flags = events[index].events
            guard let connection = connections[fd] else { continue }
            if connection.state == .connecting {
                if flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
                    measured.connectFailures += 1
                    reopen(fd)
                    continue
                }
                guard flags & EPOLLOUT.rawValue != 0 else { continue }
                connected(fd)
                continue
            }
            if flags & EPOLLOUT.rawValue != 0 { flush(fd) }
            if flags & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { read(fd) }
        }
    }

    private func connected(_ fd: Int32) {
        connectingCount -= 1
        // No longer connecting (`reopen` below must not count it off again).
        connections[fd]?.state = .idle
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else {
            measured.connectFailures += 1
            reopen(fd)
            return
        }
        connections[fd]?.state = .idle
        // Level-triggered writability is only wanted while something is unsent.
        interest(fd, writable: false)
        if let queued = connections[fd]?.queued {
            connections[fd]?.queued = nil
            send(fd, queued, keepSentAt: true)
        } else if connections[fd]?.role == .poll {
            sendPoll(fd)
        }
    }

    private func interest(_ fd: Int32, writable: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    /// Sends a request; `keepSentAt`: its latency counts from when it was queued (a push that
    /// waited for its connection), not from now.
    private func send(_ fd: Int32, _ bytes: [UInt8], keepSentAt: Bool = false) {
        connections[fd]?.unsent += bytes
        if !keepSentAt { connections[fd]?.sentAt = monotonicNanos() }
        connections[fd]?.state = .waiting
        flush(fd)
    }

    private func flush(_ fd: Int32) {
        guard var connection = connections[fd] else { return }
        while !connection.unsent.isEmpty {
            let count = connection.unsent.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                connection.unsent.removeFirst(count)
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                connections[fd] = connection
                interest(fd, writable: true)
                return
            } else {
                reopen(fd)
                return
            }
        }
        connections[fd] = connection
        interest(fd, writable: false)
    }

    private func request(_ method: String, _ path: String, device: Int, body: [UInt8] = [], close: Bool = false) -> [UInt8] {
        let token = zones[devices[device].zone].token
        let connection = close ? "Connection: close\r\n" : ""
        return Array("\(method) \(path) HTTP/1.1\r\nHost: fleet\r\nAuthorization: Bearer \(token)\r\n\(connection)Content-Length: \(body.count)\r\n\r\n".utf8) + body
    }

    private func sendPoll(_ fd: Int32) {
        guard let device = connections[fd]?.device else { return }
        if databaseMode {
            let token = devices[device].databaseToken
            connections[fd]?.stage = .databasePoll
            send(fd, request("GET", "/v1/database/changes?wait=\(wait)" + (token.isEmpty ? "" : "&after=\(token)"), device: device))
            return
        }
        let zone = zones[devices[device].zone].name
        connections[fd]?.stage = .zonePoll
        send(fd, request("GET", "/v1/zones/\(zone)/changes?after=\(devices[device].token)&wait=\(wait)", device: device))
    }

    /// Database mode: the pull of the device's zone that a database answer naming it starts.
    private func sendZonePull(_ fd: Int32) {
        guard let device = connections[fd]?.device else { return }
        let zone = zones[devices[device].zone].name
        connections[fd]?.stage = .zonePull
        send(fd, request("GET", "/v1/zones/\(zone)/changes?after=\(devices[device].token)", device: device))
    }

    private func push(device: Int, due: UInt64) {
        // The connection the push goes out on: the device's push connection, or a new one that
        // replaces its long poll's (the poll is cut short, as a local commit does).
        if pushConnection == .new {
            // One push at a time per device: the last one's connection is still open.
            guard devices[device].push < 0 else {
                if measuring { measured.pushesSkipped += 1 }
                return
            }
        }
        let current = Int32(pushConnection == .kept ? devices[device].push : devices[device].poll)
        if pushConnection != .new {
            guard let connection = connections[current], connection.state != .connecting, connection.stage != .push,
                  twoConnections ? connection.state == .idle : true else {
                if measuring { measured.pushesSkipped += 1 }
                return
            }
        }
        let sequence: UInt64
        let bytes: [UInt8]
        if let retry = devices[device].unacknowledged {
            (sequence, bytes) = retry
        } else {
            sequence = devices[device].nextSequence
            devices[device].nextSequence += 1
            let replica = devices[device].replica
            let milliseconds = UInt64(Date().timeIntervalSince1970 * 1000)
            let record = TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: milliseconds, counter: 0),
                      change: .insert(entity: "Item", object: ObjectID(), fields: ["name": .string("push \(sequence) of device \(device)")])),
            ])
            let body = TransactionFrames.encode([record.encoded()])
            bytes = request("POST", "/v1/zones/\(zones[devices[device].zone].name)/push", device: device, body: body,
                            close: pushConnection == .new)
        }
        let retry = devices[device].unacknowledged != nil
        devices[device].unacknowledged = (sequence, bytes)
        let now = due
        if measuring {
            // A retry is the same push again: counted once.
            if retry { measured.retries += 1 } else { measured.pushes += 1 }
            let key = PendingKey(replica: devices[device].replica, sequence: sequence)
            if pending[key] == nil {
                let zone = devices[device].zone
                let others = Set((zone * devicesPerZone)..<((zone + 1) * devicesPerZone)).subtracting([device])
                pending[key] = (now, others)
            }
        }
        let fd: Int32
        switch pushConnection {
        case .kept:
            fd = current
            send(fd, bytes)
            connections[fd]?.sentAt = now
        case .new, .replacesPoll:
            if pushConnection == .replacesPoll { drop(current) }
            do {
                fd = try open(device: device, role: pushConnection == .new ? .push : .poll)
            } catch {
                measured.connectFailures += 1
                return
            }
            connections[fd]?.queued = bytes
            connections[fd]?.sentAt = now
        }
        connections[fd]?.stage = .push
        connections[fd]?.counted = measuring
    }

    // MARK: Answers

    private func read(_ fd: Int32) {
        while true {
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                connections[fd]?.received += scratch[..<count]
                if count < scratch.count { break }
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                // The server closed the connection (idle timeout, shutdown) or it failed.
                if let connection = connections[fd], connection.state == .waiting || connection.queued != nil {
                    if connection.stage == .push {
                        if connection.counted { measured.pushFailures += 1 }
                    } else if measuring {
                        measured.pollFailures += 1
                    }
                }
                reopen(fd)
                return
            }
        }
        while let answer = takeAnswer(fd) {
            answered(fd, answer)
        }
    }

    struct Answer {
        var status: Int
        var nextToken: String?
        var body: [UInt8]
    }

    /// One whole answer off the front of the connection's received bytes, or nil when it is not
    /// all there yet.
    private func takeAnswer(_ fd: Int32) -> Answer? {
        guard let received = connections[fd]?.received, received.count >= 4 else { return nil }
        var end = -1
        for i in 0...(received.count - 4) where received[i] == 13 && received[i + 1] == 10 && received[i + 2] == 13 && received[i + 3] == 10 {
            end = i
            break
        }
        guard end >= 0 else { return nil }
        let head = String(decoding: received[..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first else { return nil }
        let parts = statusLine.split(separator: " ")
        let status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
        var length = 0
        var nextToken: String?
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { length = Int(value) ?? 0 }
            if name == StrataHeader.nextToken.lowercased() { nextToken = value }
            if name == "transfer-encoding" { fail("fleet: the server answered with Transfer-Encoding \(value); the generator reads Content-Length bodies only", status: 1) }
        }
        let bodyStart = end + 4
        guard received.count >= bodyStart + length else { return nil }
        let body = Array(received[bodyStart..<(bodyStart + length)])
        connections[fd]?.received.removeFirst(bodyStart + length)
        return Answer(status: status, nextToken: nextToken, body: body)
    }

    private func answered(_ fd: Int32, _ answer: Answer) {
        guard let connection = connections[fd] else { return }
        let now = monotonicNanos()
        connections[fd]?.state = .idle
        switch connection.role {
        case _ where connection.stage == .push:
            if answer.status == 200 { devices[connection.device].unacknowledged = nil }
            // One connection: it holds the next long poll now. A connection made for this push
            // is closed; a kept one waits for the next push.
            if connection.role == .poll {
                sendPoll(fd)
            } else if pushConnection == .new {
                drop(fd)
            } else {
                connections[fd]?.stage = .zonePoll
            }
            guard connection.counted else { return }
            if answer.status == 200 {
                measured.ackLatencies.append(now - connection.sentAt)
            } else {
                measured.pushFailures += 1
                if measured.pushFailures <= 3 {
                    note("  fleet: a push was answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
                }
            }
        case .push:
            return
        case .poll where connection.stage == .databasePoll:
            if answer.status == 200, let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any] {
                if let token = object["token"] as? String { devices[connection.device].databaseToken = token }
                if measuring { measured.pollAnswers += 1 }
                // The only zone of the device's user is its own: any zone named means a pull.
                if let named = object["zones"] as? [Any], !named.isEmpty {
                    sendZonePull(fd)
                    return
                }
            } else if measuring {
                measured.pollFailures += 1
                if measured.pollFailures <= 3 {
                    note("  fleet: a database long poll was answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
                }
            }
            sendPoll(fd)
        case .poll:
            if answer.status == 200 {
                if let token = answer.nextToken { devices[connection.device].token = token }
                if measuring { measured.pollAnswers += 1 }
                delivered(answer.body, to: connection.device, at: now)
            } else if measuring {
                measured.pollFailures += 1
                if measured.pollFailures <= 3 {
                    note("  fleet: a long poll was answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
                }
            }
            sendPoll(fd)
        }
    }

    /// Matches each transaction a long poll delivered with its push.
    private func delivered(_ body: [UInt8], to device: Int, at now: UInt64) {
        guard !body.isEmpty, let frames = try? TransactionFrames.decode(body) else { return }
        let own = devices[device].replica
        for frame in frames {
            guard let header = try? TransactionHeader(decoding: frame), header.replica != own else { continue }
            let key = PendingKey(replica: header.replica, sequence: header.firstSequence)
            guard var entry = pending[key], entry.owed.remove(device) != nil else { continue }
            measured.deliveryLatencies.append(now &- entry.sentAt)
            pending[key] = entry.owed.isEmpty ? nil : entry
        }
    }
}
