import Foundation
import Logging
import StrataLog
import StrataPostgres
@testable import StrataServer
import StrataTestSupport
import Testing

/// The storage backends the conformance tests run on, unchanged.
enum StorageBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded
    case postgres

    var testDescription: String { rawValue }
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
        case .postgres: url = try PostgresCluster.shared().createDatabase()
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
        case .postgres:
            var options = PostgresZoneStorage.Options()
            if let makeEpoch { options.makeEpoch = makeEpoch }
            return try await PostgresZoneStorage.open(url: PostgresConnectionURL(parsing: url ?? ""), options: options,
                                                      logger: Logger(label: "test.postgres"))
        }
    }

    /// A second storage on the same data while the first is open: another `strata serve`
    /// instance on the same database. Only PostgreSQL allows this.
    func openAnotherInstance() async throws -> any ZoneStorage {
        guard backend == .postgres else { throw PostgresClusterError("the embedded storage is one process's") }
        return try await open()
    }
}
