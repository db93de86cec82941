import Foundation
import Logging
import StrataLog
import StrataPostgres
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// The storage backends the conformance tests run on, unchanged. PostgreSQL runs twice: as
/// configured by default (the common push by compare and set) and with every push decided under
/// the row locks, so that both ways of appending are held to the same rules.
enum StorageBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded
    case postgres
    case postgresLocked

    var testDescription: String {
        switch self {
        case .embedded, .postgres: rawValue
        case .postgresLocked: "postgres, every push under the row locks"
        }
    }
}

/// Where one test's storage lives: a temporary directory, or a fresh database of the tests'
/// PostgreSQL cluster (which fails the test loudly when it cannot start). Opened as often as the
/// test likes: a reopened storage must hold everything the closed one acknowledged.
final class StorageSite: Sendable {
    let backend: StorageBackend
    let directory: TemporaryDirectory
    /// The database's URL (PostgreSQL only).
    let url: String?

    init(_ backend: StorageBackend, label: String = #function) throws {
        self.backend = backend
        directory = TemporaryDirectory(label)
        switch backend {
        case .embedded: url = nil
        case .postgres, .postgresLocked: url = try PostgresCluster.shared().createDatabase()
        }
    }

    /// Opens the storage (creating it the first time).
    func open(makeEpoch: (@Sendable () -> UInt64)? = nil) async throws -> any ZoneStorage {
        switch backend {
        case .embedded:
            var options = EmbeddedZoneStorage.Options()
            // Small segments, so that compaction has whole segments to retire.
            options.log.segmentSize = 4096
            if let makeEpoch { options.makeEpoch = makeEpoch }
            return try EmbeddedZoneStorage(directory: directory.sub("data"), options: options)
        case .postgres, .postgresLocked:
            var options = PostgresZoneStorage.Options(compareAndSetAppends: backend == .postgres)
            if let makeEpoch { options.makeEpoch = makeEpoch }
            return try await PostgresZoneStorage.startedForTest(url: PostgresConnectionURL(parsing: url ?? ""), options: options)
        }
    }

    /// A second storage on the same data while the first is open: another `strata serve`
    /// instance on the same database. Only PostgreSQL allows this.
    func openAnotherInstance() async throws -> any ZoneStorage {
        guard backend != .embedded else { throw PostgresClusterError("the embedded storage is one process's") }
        return try await open()
    }
}

extension PostgresZoneStorage {
    /// The tests' shortcut for a storage they close themselves: runs it (``run()``) in a task
    /// that ends when the test closes the storage, and returns once it is open — or throws why
    /// it could not open. New tests that need no handle past their body use
    /// `withRunning { }` instead.
    // 60 s, not the server's 10: the tests' cluster serves every test at once on two cores, and
    // a start that only waited its turn must not fail (one that cannot start still fails, loudly).
    static func startedForTest(url: PostgresConnectionURL, options: Options = Options(), connectTimeout: Duration = .seconds(60),
                               logger: Logger = Logger(label: "test.postgres")) async throws -> PostgresZoneStorage {
        let storage = PostgresZoneStorage(url: url, options: options, connectTimeout: connectTimeout, logger: logger)
        // Ends when the test closes the storage (close() ends run()).
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

/// Runs `body` with a storage of `backend` opened on a fresh site, and closes it afterwards —
/// also when `body` throws.
func withStorage<T>(_ backend: StorageBackend, _ body: (any ZoneStorage) async throws -> T) async throws -> T {
    let storage = try await StorageSite(backend).open()
    do {
        let value = try await body(storage)
        try await storage.close()
        return value
    } catch {
        try? await storage.close()
        throw error
    }
}
