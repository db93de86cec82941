import ArgumentParser
import Foundation
import Strata
import StrataSync

/// `strata sync STORE --server URL --zone NAME [--owner USER] --token TOKEN [--watch]`: pushes the
/// store's unpushed transactions and pulls the zone's changes, once or continuously.
///
/// The zone is the user's own (created when missing) unless `--owner` names another user whose
/// zone is shared with them or public. A store that turns out to be a copy, or whose replica
/// belongs to another user, forks (the output says so); edits the server refuses for the device's
/// clock stay pending and the command exits 2 saying why.
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

    @Option(help: "The zone's owner, when it is another user's zone (shared with you, or public). Without it the zone is your own.")
    var owner: String?

    @Option(help: "The bearer token of the user.")
    var token: String

    @Flag(help: "Keep syncing with long polls until interrupted.")
    var watch = false

    @Flag(help: "Recreate your zone when it was deleted on the server, and seed it with everything this store authored.")
    var recreateZone = false

    func validate() throws {
        guard URL(string: server)?.scheme?.hasPrefix("http") == true else {
            throw ValidationError("--server must be an http(s) URL, got \(server)")
        }
    }

    func run() async throws {
        let opened = try openStore(store)
        guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
        let engine = try SyncEngine(store: opened, server: url, zone: zone, owner: owner, credentials: token)
        do {
            let report = try await (recreateZone ? engine.recreateZone() : engine.sync())
            for fork in report.forks {
                print("forked: replica \(fork.replica) → \(fork.successor) (\(fork.reason.rawValue)); kept sequences 1...\(fork.keptThrough), re-authored \(fork.reauthored) event(s)")
            }
            if report.unpushable > 0 {
                print("read-only: \(report.unpushable) local transaction(s) wait until you may push to the zone")
            }
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
