#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser
import AsyncHTTPClient
import StrataSyncAsyncHTTPClient
import Foundation
import NIOSSL
@_spi(StrataInternals) import Strata
import StrataSync
import StrataCore

/// `strata sync STORE --server URL --zone NAME [--owner USER] [--token-file PATH | --token TOKEN] [--watch]
/// [--from-scratch | --recreate-zone] [--json]`: pushes the store's unpushed transactions and
/// pulls the zone's changes, once or continuously.
///
/// The zone is the user's own (created when missing) unless `--owner` names another user whose
/// zone is shared with them or public. A store that turns out to be a copy, or whose replica
/// belongs to another user, forks (the output says so); edits the server refuses for the device's
/// clock stay pending and the command exits 2 saying why. `--json` prints ``SyncReportJSON``.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Push and pull a store against a log server.",
        discussion: """
        A failed sync exits 2 and says why (the server's code, e.g. zoneDeleted, unauthorized, clockSkew).

        --from-scratch: a forced full resync. The change token is forgotten and the zone is pulled \
        again from its start (its snapshot, then its log; the store skips what it already holds), \
        for a device that suspects it missed something. Nothing local is dropped: unpushed edits stay \
        and are pushed. It cannot be combined with --recreate-zone, which already starts the zone \
        over from this store (a usage error, exit 2).

        --json prints one JSON object instead of the text lines, with sorted, stable keys: \
        zone; owner (absent for your own zone); mode ("sync", "fromScratch" or "recreateZone"); ok; \
        pushedTransactions; pulledTransactions; appliedEvents; bootstraps; rewinds; unpushable; \
        stateUploads; stateBytes; forks, each {reason, oldReplica, newReplica, keptThrough, \
        reauthored}; token (the change token the store holds, absent before its first pull); \
        pending (local transactions the server has not acknowledged); finished, leftToPush and \
        moreToPull (see --within); and on failure only error, \
        {code, message, status (the HTTP status, when the server answered)}.

        On failure ok is false and the exit code is 2 (the message also goes to stderr); \
        pushedTransactions and pulledTransactions count what went through before the error, and \
        appliedEvents, bootstraps, rewinds, unpushable, stateUploads, stateBytes, forks, finished, \
        leftToPush and moreToPull are \
        absent. With --watch the output is JSON Lines: that object on one line, then one {phase, \
        pending, pushed, pulled, blocked, lastError} per status change.

        A database directory (one with database.json) syncs every zone it holds with one engine: \
        the server's database changes say which zones changed, shares are accepted and added, \
        zones whose grant was revoked or that were deleted are set aside. --zone NAME (or \
        OWNER/NAME, or --zone NAME --owner OWNER) syncs only that zone. The text output is a line \
        per zone; --json prints {database, ok, zones: {ZONE: {the keys above}}, failures: {ZONE: \
        {code, message, status}}, added: [ZONE], removed: [{zone, reason, unpushedEdits, store}], \
        pendingShares: [ZONE], token (the database token)}, ZONE being NAME for your own zones and \
        OWNER/NAME for others'. A zone that failed exits 2 after the output. --watch, \
        --from-scratch and --recreate-zone on a database need --zone.

        --within SECONDS: a sync with a deadline, as an app woken in the background does it \
        (SyncEngine.syncOnce(deadline:)): push first, then pull in pages, and stop when the time \
        is up — the request in flight is cancelled, everything that landed before stays, and the \
        next sync goes on from there. Running out of time is no failure (exit 0); --json then \
        says finished false, with leftToPush and moreToPull (for a database, each zone's, and \
        unfinishedZones). Not with --watch, --from-scratch or --recreate-zone.
        """
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Option(help: "The server's base URL, e.g. http://localhost:8080.")
    var server: String

    @Option(help: "The zone to sync with (for a store, required). For a database directory: only this zone, NAME or OWNER/NAME; without it, every zone.")
    var zone: String?

    @Option(help: "The zone's owner, when it is another user's zone (shared with you, or public). Without it the zone is your own.")
    var owner: String?

    @Option(help: "The bearer token of the user. Visible to every user of the machine in `ps`: prefer --token-file or STRATA_TOKEN.")
    var token: String?

    @Option(help: "A file holding the bearer token (its first line), readable only by you (chmod 600). Without --token or --token-file, the token is read from STRATA_TOKEN.")
    var tokenFile: String?

    @Option(help: "Trust the server's certificate through this PEM file (a private CA, or a self-signed server's own certificate) instead of the system's roots.")
    var caFile: String?

    @Option(help: ArgumentHelp("Sync for at most this long (a deadline, as in the background): stop when the time is up, keeping what landed, and say what is left.", valueName: "SECONDS"))
    var within: Double?

    @Flag(help: "Keep syncing with long polls until interrupted.")
    var watch = false

    @Flag(help: "Recreate your zone when it was deleted on the server, and seed it with everything this store authored.")
    var recreateZone = false

    @Flag(help: "Pull the zone again from its start (a forced full resync); unpushed edits are kept and pushed. Not with --recreate-zone.")
    var fromScratch = false

    @Flag(help: "Print one JSON object instead of text (its keys are listed in the overview above).")
    var json = false

    @Option(help: ArgumentHelp("What not to download (a download mask): Entity or Entity.attribute entries, comma-separated, e.g. Comment,Photo.fullImage. The server leaves them out. A store refuses another mask than the one it was first synced with; a database downloads a zone again when its mask changes (so pass the same --omit every time).", valueName: "MASK"))
    var omit: String?

    /// The `--omit` mask (`.none` without it).
    func downloadMask() throws -> DownloadMask {
        guard let omit else { return .none }
        do {
            return try DownloadMask(parsing: omit)
        } catch {
            throw CLIError("--omit: \((error as? StoreError)?.message ?? "\(error)")")
        }
    }

    /// One zone's sync as the flags ask: a recreation, from scratch, with a deadline, or plain.
    func syncAsAsked(_ engine: SyncEngine) async throws -> SyncReport {
        if recreateZone { return try await engine.recreateZone() }
        if fromScratch { return try await engine.resync() }
        if let budget { return try await engine.syncOnce(within: budget) }
        return try await engine.sync()
    }

    /// `--within` as a duration.
    var budget: Duration? { within.map { .milliseconds(Int64($0 * 1000)) } }

    /// The line saying what a sync cut short by `--within` left.
    static func unfinished(_ report: SyncReport) -> String {
        "the time was up: \(report.leftToPush) local transaction(s) left to push\(report.moreToPull ? ", more to pull" : ""); the next sync goes on from here"
    }

    /// What the sync does: `mode` in the JSON.
    var mode: String { recreateZone ? "recreateZone" : fromScratch ? "fromScratch" : "sync" }

    func validate() throws {
        guard URL(string: server)?.scheme?.hasPrefix("http") == true else {
            throw ValidationError("--server must be an http(s) URL, got \(server)")
        }
        if let within, !(within.isFinite && within > 0 && within <= 86_400) {
            throw ValidationError("--within takes a number of seconds above 0 and at most 86400, got \(within)")
        }
        if within != nil && (watch || fromScratch || recreateZone) {
            throw ValidationError("--within is a sync with a deadline; it does not go with --watch, --from-scratch or --recreate-zone")
        }
        if fromScratch && recreateZone {
            throw ValidationError("--from-scratch and --recreate-zone do not go together: --recreate-zone already starts the zone over from this store (its whole history and state are sent again, and the zone pulled from its start)")
        }
    }

    func run() async throws {
        guard let caFile else { return try await sync(client: HTTPSyncTransport.defaultClient) }
        let client = try Self.client(trusting: caFile)
        do {
            try await sync(client: client)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    /// An HTTP client that trusts only the certificates in `caFile` — checked here, so that a
    /// missing or damaged file is refused by name before anything is sent.
    static func client(trusting caFile: String) throws -> HTTPClient {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(caFile)
        } catch {
            throw CLIError("--ca-file \(caFile): not a readable PEM certificate file (\(error))")
        }
        guard !certificates.isEmpty else { throw CLIError("--ca-file \(caFile): holds no certificate") }
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPSyncTransport.configuration(trusting: .certificates(certificates)))
    }

    private func sync(client: HTTPClient) async throws {
        let layout: DatabaseLayout?
        do {
            layout = try Database.layout(ofDatabaseAt: store)
        } catch {
            throw CLIError("\(error)")
        }
        if let layout { return try await syncDatabase(layout, client: client) }
        guard let zone else { throw CLIError("--zone is required: \(store) is a store, not a database (it has no database.json)") }
        let reference = ZoneReference(zone, owner: owner)
        let opened: Store
        let engine: SyncEngine
        do {
            // The token first: a missing or exposed one stops the sync before the store is opened.
            let credentials = try SyncToken.resolve(option: token, file: tokenFile)
            var options = SyncOptions()
            options.downloadMask = try downloadMask()
            opened = try openStore(store)
            guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
            do {
                engine = try SyncEngine(store: opened, transport: HTTPSyncTransport(server: url, bearer: credentials, client: client),
                                        zone: zone, owner: owner, options: options)
            } catch {
                try? await opened.close()
                throw CLIError("cannot sync the store \(store): \(error)")
            }
        } catch let error as CLIError {
            // Nothing was sent: the store could not be opened, or its sync state not read.
            if json {
                emit(try JSONOutput.string(SyncReportJSON(zone: reference, mode: mode, error: .init(code: SyncError.Code.store.name, message: error.message),
                                                          pushed: 0, pulled: 0, token: nil, pending: nil), pretty: !watch))
            }
            throw error
        }
        do {
            let report = try await syncAsAsked(engine)
            if json {
                let pending = await pendingCount(opened, engine)
                emit(try JSONOutput.string(SyncReportJSON(zone: reference, mode: mode, report: report, pending: pending), pretty: !watch))
            } else {
                for fork in report.forks {
                    emit("forked: replica \(fork.replica) → \(fork.successor) (\(fork.reason.rawValue)); kept sequences 1...\(fork.keptThrough), re-authored \(fork.reauthored) event(s)")
                }
                if report.unpushable > 0 {
                    emit("read-only: \(report.unpushable) local transaction(s) wait until you may push to the zone")
                }
                emit("pushed \(report.pushedTransactions) transaction(s), pulled \(report.pulledTransactions) (\(report.appliedEvents) new event(s)); token \(report.token ?? "-")")
                if !report.finished { emit(Self.unfinished(report)) }
            }
        } catch {
            // A SyncError carries the server's code; anything else (the cursor could not be
            // written, say) is the store's trouble. Either way the exit code is 2, not a finding.
            let failure = (error as? SyncError).map(SyncReportJSON.ErrorJSON.init)
                ?? SyncReportJSON.ErrorJSON(code: SyncError.Code.store.name, message: "\(error)")
            if json {
                let status = await currentStatus(engine)
                let pending = await pendingCount(opened, engine)
                let cursorToken = await engine.currentCursor.token
                emit(try JSONOutput.string(SyncReportJSON(zone: reference, mode: mode, error: failure, pushed: status?.pushed ?? 0,
                                                          pulled: status?.pulled ?? 0, token: cursorToken, pending: pending), pretty: !watch))
            }
            try? await opened.close()
            throw CLIError("sync with \(server) failed: \(error)")
        }
        if watch {
            await engine.start()
            for await status in await engine.statusUpdates() {
                if json {
                    emit(try JSONOutput.string(SyncStatusJSON(status), pretty: false))
                } else {
                    emit("\(status.phase.rawValue): pending \(status.pending), pushed \(status.pushed), pulled \(status.pulled)" + (status.lastError.map { ", last error: \($0)" } ?? ""))
                }
            }
        }
        try await opened.close()
    }

    /// A line of output, flushed at once: `--watch` runs until interrupted, and whoever reads
    /// its output through a pipe sees each line as it happens.
    func emit(_ line: String) {
        print(line)
        fflush(nil)  // every output stream: naming `stdout` is not concurrency-safe in Swift 6
    }

    /// The engine's status as it is now (the first value of its updates).
    func currentStatus(_ engine: SyncEngine) async -> SyncStatus? {
        for await status in await engine.statusUpdates() { return status }
        return nil
    }

    /// The store's own transactions with edits the server has not acknowledged (what the engine
    /// pushes next, less the records of the app's schema, which are no edit: the count the
    /// engine's status gives), counted from the log and the engine's cursor; `nil` when the log
    /// cannot be read.
    func pendingCount(_ store: Store, _ engine: SyncEngine) async -> Int? {
        let cursor = await engine.currentCursor
        // A cursor of another replica (the store forked since) counts none of this one's.
        let acknowledged = cursor.replica == store.replicaID ? cursor.acknowledged : 0
        return try? store.unpushedEditCount(after: acknowledged)
    }
}
