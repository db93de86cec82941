public import Foundation
import Synchronization

/// A throwaway PostgreSQL cluster for the tests that need a real database: `initdb` in a
/// temporary directory, `pg_ctl start` on a free port of 127.0.0.1 (and a Unix socket in the same
/// directory), trust authentication for the user `strata`, `fsync` off (a test cluster dies with
/// the test). `initdb` refuses to run as root, so when the tests do, the cluster runs as `nobody`
/// (`runuser`). ``stop()`` — or dropping the last reference — stops it and removes its files.
///
/// It fails loudly: ``start()`` throws, with the tools' output, when the binaries are missing or
/// the cluster does not come up — a test that needs a database is never skipped silently. The
/// binaries are found in `STRATA_PG_BIN`, then on `PATH`, then in `/usr/lib/postgresql/*/bin`.
public final class PostgresCluster: @unchecked Sendable {
    /// The cluster's superuser, trusted without a password.
    public let user = "strata"
    public let port: Int
    /// The directory holding the cluster (`data/`), its socket and its log.
    public let directory: String
    private let binaries: String
    private let runAs: String?
    /// Whether commits are durable (fsync and synchronous commit on), for the tests that crash
    /// the server; the others run without, a test cluster dying with its test.
    public let durable: Bool
    private var stopped = false

    /// A connection URL for `database` (`postgres` exists in every cluster).
    public func url(database: String = "postgres") -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(database)"
    }

    private init(port: Int, directory: String, binaries: String, runAs: String?, durable: Bool) {
        self.durable = durable
        self.port = port
        self.directory = directory
        self.binaries = binaries
        self.runAs = runAs
    }

    deinit { stop() }

    /// Creates and starts a cluster. A port taken meanwhile by someone else is tried again on
    /// another (three times).
    public static func start(durable: Bool = false) throws -> PostgresCluster {
        let binaries = try findBinaries()
        let runAs: String? = geteuid() == 0 ? "nobody" : nil
        var lastError: (any Error)?
        for _ in 0..<3 {
            let directory = NSTemporaryDirectory() + "strata-pg-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if let runAs { try run("/bin/chown", [runAs, directory]) }
            let cluster = PostgresCluster(port: try freePort(), directory: directory, binaries: binaries, runAs: runAs, durable: durable)
            do {
                try cluster.initialize()
                try cluster.launch()
                return cluster
            } catch {
                lastError = error
                cluster.stop()
            }
        }
        throw lastError ?? PostgresClusterError("PostgreSQL did not start")
    }

    /// The cluster of this test process, started on first use and stopped when the process exits;
    /// tests take a database of their own in it (``createDatabase()``). A failed start is
    /// thrown to every test that asks (never a silent skip).
    public static func shared() throws -> PostgresCluster {
        try sharedCluster.withLock { state in
            if let cluster = state.cluster { return cluster }
            if let failure = state.failure { throw failure }
            do {
                let cluster = try start()
                state.cluster = cluster
                atexit { PostgresCluster.stopShared() }
                return cluster
            } catch {
                state.failure = PostgresClusterError("the tests' PostgreSQL cluster did not start: \(error)")
                throw error
            }
        }
    }

    private static let sharedCluster = Mutex<(cluster: PostgresCluster?, failure: PostgresClusterError?)>((nil, nil))

    private static func stopShared() {
        sharedCluster.withLock { $0.cluster?.stop() }
    }

    /// A new empty database in the cluster; its connection URL.
    public func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        try psql("CREATE DATABASE \(name)")
        return url(database: String(name))
    }

    /// Stops the server as a crash or an operator would (`immediate`), keeping its files;
    /// ``resume()`` starts it again on the same port.
    public func halt() throws {
        try tool("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
    }

    /// Starts a halted server again.
    public func resume() throws {
        try launch()
    }

    /// Stops the cluster (fast shutdown) and removes its files. Idempotent.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        if FileManager.default.fileExists(atPath: directory + "/data/postmaster.pid") {
            _ = try? tool("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `psql` against the cluster with `sql` (`ON_ERROR_STOP`, unaligned, tuples only) and
    /// returns what it printed.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.run(binaries + "/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", String(port),
                                          "-U", user, "-d", database, "-c", sql])
    }

    private func initialize() throws {
        try tool("initdb", ["-D", directory + "/data", "-U", user, "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
    }

    private func launch() throws {
        // Suites run in parallel, each storage with a pool of up to 20 connections: PostgreSQL's
        // default of 100 was reached in a CI run ("sorry, too many clients already").
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c max_connections=400"
            + (durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        do {
            try tool("pg_ctl", ["-D", directory + "/data", "-o", options, "-l", directory + "/log", "-w", "-t", "60", "start"])
        } catch {
            let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
            throw PostgresClusterError("\(error)\nserver log:\n\(log.suffix(2000))")
        }
    }

    /// Runs one of the cluster's tools, as `runAs` when set.
    @discardableResult
    private func tool(_ name: String, _ arguments: [String]) throws -> String {
        let path = binaries + "/" + name
        if let runAs { return try Self.run("/usr/sbin/runuser", ["-u", runAs, "--", path] + arguments) }
        return try Self.run(path, arguments)
    }

    private static func findBinaries() throws -> String {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["STRATA_PG_BIN"], !configured.isEmpty { candidates.append(configured) }
        candidates += (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).sorted().reversed()
        candidates += versions.map { "/usr/lib/postgresql/\($0)/bin" }
        for directory in candidates where ["initdb", "pg_ctl", "psql"].allSatisfy({ FileManager.default.isExecutableFile(atPath: directory + "/" + $0) }) {
            return directory
        }
        throw PostgresClusterError("no PostgreSQL binaries (initdb, pg_ctl, psql) in STRATA_PG_BIN, on PATH or in /usr/lib/postgresql/*/bin: install PostgreSQL 15 (apt-get install postgresql-15) or set STRATA_PG_BIN")
    }

    /// A port nothing listens on now (the kernel's choice for a socket bound to port 0).
    private static func freePort() throws -> Int {
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        let fd = socket(AF_INET, stream, 0)
        guard fd >= 0 else { throw PostgresClusterError("socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw PostgresClusterError("bind() failed: errno \(errno)") }
        let named = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw PostgresClusterError("getsockname() failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a program to its end; its standard output, or an error with everything it printed.
    ///
    /// Spawned and waited for with `posix_spawn` and `waitpid`, not Foundation's `Process`:
    /// `pg_ctl start` leaves the server running as a grandchild, and `Process` (on Linux) waits
    /// for descriptors the grandchild inherited, so it would never see `pg_ctl` end.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let scratch = NSTemporaryDirectory() + "strata-pg-run-\(UUID().uuidString)"
        defer { unlink(scratch + ".out"); unlink(scratch + ".err") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, scratch + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, scratch + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw PostgresClusterError("cannot run \(executable): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw PostgresClusterError("waitpid failed for \(executable): errno \(errno)") }
        }
        let out = (try? String(contentsOfFile: scratch + ".out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: scratch + ".err", encoding: .utf8)) ?? ""
        // Exited normally with status 0 (WIFEXITED and WEXITSTATUS, spelled out: they are macros).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresClusterError("\(executable) \(arguments.joined(separator: " ")) failed (wait status \(status)): \(err)\(out)")
        }
        return out
    }
}

/// Why a test cluster could not be started or used.
public struct PostgresClusterError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
