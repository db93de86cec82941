import Foundation
import Logging
import StrataLog
import StrataPostgres
import StrataServer
import StrataTestSupport
import Synchronization
import StrataCore

/// Where the simulated server keeps its zones: an embedded data directory, or a database of the
/// tests' PostgreSQL cluster (a real server). Either can be backed up while the storage is
/// closed and restored later, as an operator's tools would (a directory copy; `CREATE DATABASE …
/// TEMPLATE`).
final class SimulatedServerSite: Sendable {
    enum Backend: String, Sendable {
        case embedded, postgres
    }

    let backend: Backend
    /// The data directory (embedded).
    let directory: String
    /// The database and its cluster (PostgreSQL).
    private let database: String?
    private let cluster: PostgresCluster?
    private let backedUp = Atomic<Bool>(false)
    /// Deterministic epochs, new for each zone created (a recreated zone has another epoch), the
    /// same across restarts.
    private let epochs = Atomic<UInt64>(41)
    /// The wall clock the storage stamps asset confirmations with and sweeps by: the system's,
    /// or one the asset simulation moves past the sweep's grace.
    private let clock: ServerClock

    /// Thousands of restarts and compactions: only warnings are worth printing.
    static let quiet: Logger = {
        var logger = Logger(label: "strata.sim.server")
        logger.logLevel = .warning
        return logger
    }()

    init(_ backend: Backend, directory: String, clock: ServerClock = .system) throws {
        self.backend = backend
        self.directory = directory
        self.clock = clock
        switch backend {
        case .embedded:
            database = nil
            cluster = nil
        case .postgres:
            let cluster = try PostgresCluster.shared()
            let url = try cluster.createDatabase()
            self.cluster = cluster
            database = url.split(separator: "/").last.map(String.init)
        }
    }

    func open() async throws -> any ZoneStorage {
        let makeEpoch: @Sendable () -> UInt64 = { [self] in epochs.add(1, ordering: .relaxed).newValue }
        switch backend {
        case .embedded:
            // Small segments, so that compaction really retires history.
            var log = LogOptions(durability: .buffered)
            log.segmentSize = 4096
            return try EmbeddedZoneStorage(directory: directory, options: EmbeddedZoneStorage.Options(log: log, makeEpoch: makeEpoch, clock: clock),
                                           logger: Self.quiet)
        case .postgres:
            guard let cluster, let database else { throw PostgresClusterError("no database") }
            let storage = PostgresZoneStorage(url: try PostgresConnectionURL(parsing: cluster.url(database: database)),
                                              options: PostgresZoneStorage.Options(maxConnections: 4, makeEpoch: makeEpoch, clock: clock),
                                              // Under the full suite's load the shared cluster has taken more than 10 s to answer.
                                              connectTimeout: .seconds(60), logger: Self.quiet)
            // The simulation closes the storages it opens (a crash, a restore): closing ends the run.
            let running = Task { try await storage.run() }
            do {
                try await storage.waitUntilOpen()
            } catch {
                try? await storage.close()
                _ = await running.result
                throw error
            }
            return storage
        }
    }

    var hasBackup: Bool { backedUp.load(ordering: .relaxed) }

    /// Copies the data aside (the storage must be closed).
    func backUp() async throws {
        switch backend {
        case .embedded:
            try? FileManager.default.removeItem(atPath: directory + ".backup")
            try FileManager.default.copyItem(atPath: directory, toPath: directory + ".backup")
        case .postgres:
            guard let cluster, let database else { return }
            try cluster.psql("DROP DATABASE IF EXISTS \(database)_backup")
            // The closed storage's sessions end on their own, but CREATE DATABASE … TEMPLATE
            // waits five seconds for them before refusing: end them first (a backup tool runs
            // with the server stopped, so none would be there).
            try cluster.psql("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()")
            try await retryingWhileInUse { try cluster.psql("CREATE DATABASE \(database)_backup TEMPLATE \(database)") }
        }
        backedUp.store(true, ordering: .relaxed)
    }

    /// Replaces the data with the backup (the storage must be closed).
    func restore() async throws {
        switch backend {
        case .embedded:
            try FileManager.default.removeItem(atPath: directory)
            try FileManager.default.copyItem(atPath: directory + ".backup", toPath: directory)
        case .postgres:
            guard let cluster, let database else { return }
            try cluster.psql("DROP DATABASE \(database) WITH (FORCE)")
            try cluster.psql("CREATE DATABASE \(database) TEMPLATE \(database)_backup")
        }
    }

    /// Drops the databases (PostgreSQL; a directory goes with its temporary parent).
    func remove() throws {
        guard let cluster, let database else { return }
        try cluster.psql("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
        try cluster.psql("DROP DATABASE IF EXISTS \(database)_backup WITH (FORCE)")
    }

    /// A template database must have no sessions: the closed storage's may take a moment to end.
    private func retryingWhileInUse(_ body: () throws -> Void) async throws {
        var attempt = 0
        while true {
            do {
                try body()
                return
            } catch {
                attempt += 1
                guard attempt < 50, "\(error)".contains("is being accessed by other users") else { throw error }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}
