import ArgumentParser
import Foundation
import Strata
import StrataSync

/// `strata sync STORE --server URL --zone NAME --token TOKEN [--watch]`: pushes the store's
/// unpushed transactions and pulls the zone's changes, once or continuously.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Push and pull a store against a log server."
    )

    @Argument(help: "The store directory.")
    var store: String

    @Option(help: "The server's base URL, e.g. http://localhost:8080.")
    var server: String

    @Option(help: "The zone to sync with.")
    var zone: String

    @Option(help: "The bearer token of the user.")
    var token: String

    @Flag(help: "Keep syncing with long polls until interrupted.")
    var watch = false

    func validate() throws {
        guard URL(string: server)?.scheme?.hasPrefix("http") == true else {
            throw ValidationError("--server must be an http(s) URL, got \(server)")
        }
    }

    func run() async throws {
        let opened = try openStore(store)
        guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
        let engine = try SyncEngine(store: opened, server: url, zone: zone, credentials: token)
        do {
            let report = try await engine.sync()
            print("pushed \(report.pushedTransactions) transaction(s), pulled \(report.pulledTransactions) (\(report.appliedEvents) new event(s)); token \(report.token ?? "-")")
        } catch let error as SyncError {
            try? await opened.close()
            throw CLIError("sync with \(server) failed: \(error)")
        }
        if watch {
            await engine.start()
            for await status in await engine.statusUpdates() {
                print("\(status.phase.rawValue): pending \(status.pending), pushed \(status.pushed), pulled \(status.pulled)" + (status.lastError.map { ", last error: \($0)" } ?? ""))
            }
        }
        try await opened.close()
    }
}
