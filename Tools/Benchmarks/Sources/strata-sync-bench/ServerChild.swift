// The log server in a child process. The parent re-runs this executable as
// `strata-sync-bench --serve DATA PORT USERS`; the child calls `runServer` and serves until it gets
// SIGTERM or its stdin (a pipe from the parent) reaches end of file, which also happens when the
// parent dies. A separate process keeps the server's CPU time apart from the client's
// (/proc/<pid>/stat) and makes the HTTP hop a real loopback one.
import BenchSupport
import Foundation
import Logging
import StrataServer

#if canImport(Glibc)
import Glibc
#endif

enum ServeChild {
    /// The child's `main`: never returns.
    static func run(data: String, port: Int, users: String) async -> Never {
        // The parent closes our stdin to stop us, or dies: either way, shut down gracefully.
        let watcher = Thread {
            _ = FileHandle.standardInput.readDataToEndOfFile()
            kill(getpid(), SIGTERM)
        }
        watcher.start()
        var logger = Logger(label: "strata.server")
        // "push appended" is logged at info for every push; that is not what we measure.
        logger.logLevel = .warning
        // The server's defaults, except the per-user rate limit: every workload runs as one user,
        // and the abuse rows pull as fast as the server answers (thousands per second).
        var limits = ServerConfiguration.Limits()
        limits.rateLimit = .unlimited
        // The zones rows give one user a database of 1,000 zones next to others (default: 1,000).
        limits.maxZonesPerUser = 10_000
        // The fleet row holds two connections per device (a long poll and a push connection)
        // for 10,000 devices: above the default cap, and above the default descriptor limit.
        limits.maxConnections = 30_000
        raiseDescriptorLimit(to: 65_536)
        do {
            try await runServer(dataDirectory: data, port: port, usersFile: users, limits: limits, logger: logger)
            exit(0)
        } catch {
            fail("serve \(data) on port \(port): \(error)", status: 1)
        }
    }
}

/// The parent's handle on the server child.
final class ServerProcess {
    static let user = "bench"
    static let token = "secret"
    /// A second user, who shares a zone with the first (the zones workload).
    static let sharer = "sharer"
    static let sharerToken = "sharer-secret"

    let process: Process
    let port: Int
    private let stdin: Pipe
    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var pid: Int32 { process.processIdentifier }

    private init(process: Process, port: Int, stdin: Pipe) {
        self.process = process
        self.port = port
        self.stdin = stdin
    }

    /// Writes the users file into `directory`, starts the child on a free port and returns once
    /// it accepts connections (a few attempts if the port was taken in between). With `port`, the
    /// first attempt is on that port (a restart over the same data keeps the server's address).
    /// `moreUsers` join the two users every workload has (the fleet row's: generated tokens,
    /// which the server finds by their ID, as a deployment with many users would have).
    static func start(data: String, directory: String, port preferred: Int? = nil, moreUsers: [UserDirectory.User] = []) throws -> ServerProcess {
        let usersPath = directory + "/users.json"
        let users = [UserDirectory.User(name: user, tokenSHA256: UserDirectory.digest(of: token)),
                     UserDirectory.User(name: sharer, tokenSHA256: UserDirectory.digest(of: sharerToken))] + moreUsers
        struct File: Encodable { var users: [UserDirectory.User] }
        try JSONEncoder().encode(File(users: users)).write(to: URL(fileURLWithPath: usersPath))
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        var problems: [String] = []
        for attempt in 0..<3 {
            let port = try preferred.flatMap { attempt == 0 ? $0 : nil } ?? freePort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Machine.executablePath)
            process.arguments = ["--serve", data, String(port), usersPath]
            let stdin = Pipe()
            process.standardInput = stdin
            process.standardOutput = FileHandle.standardError
            process.standardError = FileHandle.standardError
            try process.run()
            let server = ServerProcess(process: process, port: port, stdin: stdin)
            let deadline = monotonicNanos() + 30_000_000_000
            while monotonicNanos() < deadline && process.isRunning {
                if canConnect(port) { return server }
                usleep(10_000)
            }
            problems.append("port \(port): " + (process.isRunning ? "no answer within 30 s" : "the child exited with status \(process.terminationStatus)"))
            server.stop()
        }
        throw BenchError("the server child did not start: " + problems.joined(separator: "; "))
    }

    /// Asks the child to stop (SIGTERM, stdin closed) and waits for it; SIGKILL after 10 s.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        try? stdin.fileHandleForWriting.close()
        let deadline = monotonicNanos() + 10_000_000_000
        while process.isRunning && monotonicNanos() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The child's CPU time so far (utime + stime from /proc/<pid>/stat), in seconds.
    func cpuSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        // Fields after the command name start with field 3 (state); utime and stime are 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Bytes the child passed to write-like system calls (`wchar` in /proc/<pid>/io): socket
    /// writes and file writes alike.
    func writtenBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
            return Int(line.dropFirst("wchar:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }

    /// The child's VmRSS, in bytes.
    func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count >= 2, let kb = Int(fields[1]) { return kb * 1024 }
        }
        return 0
    }

    /// A port that was free a moment ago: bind 127.0.0.1:0, read it back, close.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw BenchError("bind: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw BenchError("getsockname: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// Raises this process's open-descriptor limit (soft, and hard when allowed) to at least `count`;
/// children inherit it. Best effort: a lower limit shows up as refused connections in the row.
func raiseDescriptorLimit(to count: Int) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(count) else { return }
    var wanted = limit
    wanted.rlim_cur = rlim_t(count)
    wanted.rlim_max = max(limit.rlim_max, rlim_t(count))
    if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted) != 0 {
        wanted.rlim_cur = limit.rlim_max
        wanted.rlim_max = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted)
    }
}

/// This process's CPU time (user + system), in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func value(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return value(usage.ru_utime) + value(usage.ru_stime)
}
