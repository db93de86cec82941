// The log server in a child process, as in strata-sync-bench: the parent re-runs this executable
// as `strata-asset-bench --serve DATA PORT USERS [POSTGRES_URL]` (embedded storage in DATA, or the
// PostgreSQL database at POSTGRES_URL), and the child serves until SIGTERM or the end
// of its stdin (a pipe from the parent, which also ends when the parent dies). A separate process
// makes the HTTP hop a real loopback one and keeps the server's memory and CPU apart from the
// client's (/proc/<pid>/status, /proc/<pid>/stat).
import BenchSupport
import Foundation
import Logging
import StrataPostgres
import StrataServer

#if canImport(Glibc)
import Glibc
#endif

enum ServeChild {
    /// The child's `main`: never returns.
    static func run(data: String, port: Int, users: String, postgres: String?) async -> Never {
        let watcher = Thread {
            _ = FileHandle.standardInput.readDataToEndOfFile()
            kill(getpid(), SIGTERM)
        }
        watcher.start()
        var logger = Logger(label: "strata.server")
        logger.logLevel = .warning
        // The server's defaults, except what one benchmark user would run into: the request rate
        // (every chunk is a request) and the stored-bytes quota (the big row stores 5 GiB).
        var limits = ServerConfiguration.Limits()
        limits.rateLimit = .unlimited
        limits.maxStoredBytesPerUser = 0
        do {
            var options = ServeOptions(dataDirectory: data, usersFile: users, configuration: ServerConfiguration(host: "127.0.0.1", port: port, limits: limits))
            if let postgres {
                options.storage = PostgresZoneStorage(url: try PostgresConnectionURL(parsing: postgres), logger: logger)
            }
            try await StrataServerApp.serve(options, logger: logger)
            exit(0)
        } catch {
            fail("serve \(data) on port \(port): \(error)", status: 1)
        }
    }
}

/// The parent's handle on the server child.
final class ServerProcess {
    /// One user per HTTP client, so that each side's uploads start from a server without its
    /// assets (the server keeps one copy of an asset per owner, whichever zone it is in).
    static let users = [Exchange.urlSession, Exchange.asyncHTTPClient].map { ($0.user, $0.token) }

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
    /// it accepts connections.
    static func start(data: String, directory: String, postgres: String? = nil) throws -> ServerProcess {
        let usersPath = directory + "/users.json"
        let entries = users.map { #"{"name": "\#($0.0)", "tokenSHA256": "\#(UserDirectory.digest(of: $0.1))"}"# }
        let users = #"{"users": ["# + entries.joined(separator: ", ") + "]}"
        try Data(users.utf8).write(to: URL(fileURLWithPath: usersPath))
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        var problems: [String] = []
        for _ in 0..<3 {
            let port = try freePort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Machine.executablePath)
            process.arguments = ["--serve", data, String(port), usersPath] + (postgres.map { [$0] } ?? [])
            let stdin = Pipe()
            process.standardInput = stdin
            process.standardOutput = FileHandle.standardError
            process.standardError = FileHandle.standardError
            try process.run()
            let server = ServerProcess(process: process, port: port, stdin: stdin)
            let deadline = monotonicNanos() + 30_000_000_000
            while monotonicNanos() < deadline && process.isRunning {
                // The storage is the service group's first service: the port answers once the
                // database is open and migrated.
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
    func cpuSeconds() -> Double { processCPUSeconds(pid: pid) }

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

/// A process's CPU time (utime + stime from /proc/<pid>/stat; `self` for this one), in seconds.
func processCPUSeconds(pid: Int32? = nil) -> Double {
    let path = pid.map { "/proc/\($0)/stat" } ?? "/proc/self/stat"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return 0 }
    // Fields after the command name start with field 3 (state); utime and stime are 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// `VmRSS` and `VmHWM` of a process (`self` for this one), in bytes.
func residentMemory(pid: Int32? = nil) -> (rss: Int, peak: Int) {
    let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return (0, 0) }
    var rss = 0
    var peak = 0
    for line in text.split(separator: "\n") {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard fields.count >= 2, let kb = Int(fields[1]) else { continue }
        if fields[0] == "VmRSS:" { rss = kb * 1024 }
        if fields[0] == "VmHWM:" { peak = kb * 1024 }
    }
    return (rss, peak)
}

/// Resets a process's `VmHWM` to its current `VmRSS` (writing 5 to /proc/<pid>/clear_refs), so
/// that the peak afterwards is the peak of what follows. Returns false where the kernel refuses.
@discardableResult
func resetPeakMemory(pid: Int32? = nil) -> Bool {
    let path = pid.map { "/proc/\($0)/clear_refs" } ?? "/proc/self/clear_refs"
    let fd = open(path, O_WRONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return write(fd, "5", 1) == 1
}
