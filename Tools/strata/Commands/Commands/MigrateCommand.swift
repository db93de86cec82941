import ArgumentParser
import Foundation
import Logging
import StrataPostgres
import StrataServer
import StrataCore

/// `strata migrate --data DIR --postgres URL [--json]`: copies an embedded data directory into a
/// PostgreSQL database for `strata serve --postgres` (see ``ZoneMigration``). The server on the
/// directory must be stopped (the directory is locked while a storage has it open). Every zone
/// is copied whole, then verified by comparing its digest (history fingerprint, replicas, state)
/// on both sides; running it again skips the zones already copied. Exit 0 when every zone is in
/// the database and verified, 2 when something failed (nothing half-copied is left: a zone is
/// copied in one database transaction).
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy a stopped server's data directory into PostgreSQL, verifying every zone.",
        discussion: """
        The zones keep their epochs, merges, positions and digests, so devices go on with the change tokens \
        they hold; the assets each zone holds come with it (manifests, chunks once per owner, links). \
        The password may come from STRATA_POSTGRES_PASSWORD.
        """
    )

    @Option(help: "The data directory of `strata serve --data` (the server must be stopped).")
    var data: String

    @Option(help: ArgumentHelp("The PostgreSQL database (postgres://USER@HOST:PORT/DATABASE).", valueName: "URL"))
    var postgres: String

    @OptionGroup var output: JSONFlag

    struct Report: Encodable {
        var copied: [String]
        var alreadyThere: [String]
        var transactions: Int
        var bytes: Int64
        var assets: Int
        var assetBytes: Int64
    }

    func run() async throws {
        var logger = Logger(label: "strata.migrate")
        logger.logLevel = .warning
        let url = try PostgresConnectionURL(parsing: postgres, password: ProcessInfo.processInfo.environment["STRATA_POSTGRES_PASSWORD"])
        let source = try EmbeddedZoneStorage(directory: data, logger: logger)
        let target = PostgresZoneStorage(url: url, logger: logger)
        let json = output.json
        let report: ZoneMigration.Report
        do {
            // The database's storage runs (its connection pool, the schema's migration) for as
            // long as the copy takes.
            report = try await target.withRunning { target in
                try await ZoneMigration.copy(from: source, to: target) { line in
                    if !json { print(line) }
                }
            }
        } catch {
            try? await source.close()
            throw CLIError("migration stopped: \(error)")
        }
        try await source.close()
        if json {
            print(try JSONOutput.string(Report(copied: report.copied.map(\.description), alreadyThere: report.alreadyThere.map(\.description),
                                               transactions: report.transactions, bytes: report.bytes,
                                               assets: report.assets, assetBytes: report.assetBytes)))
        } else {
            print("migrated \(report.copied.count) zone(s) (\(report.transactions) transactions, \(report.bytes) bytes; \(report.assets) asset(s) held, \(report.assetBytes) bytes of chunks) into \(url); \(report.alreadyThere.count) already there; every zone verified")
        }
    }
}
