import Strata
import StrataSync
import StrataCore

/// What `strata sync --json` prints: one object for the sync (keys sorted, like every `--json`).
/// The keys are part of the CLI's contract (listed in `strata sync --help`):
///
/// - `zone`, `owner` (absent for the caller's own zone), `mode` (`sync`, `fromScratch`,
///   `recreateZone`), `ok`;
/// - `pushedTransactions`, `pulledTransactions`: always (on failure, what went through before it);
/// - `appliedEvents`, `bootstraps`, `rewinds`, `unpushable`, `forks`, `stateUploads`,
///   `stateBytes`: the ``SyncReport``'s, present when the sync succeeded;
/// - `token`: the change token the store holds (absent before its first pull);
/// - `pending`: the store's local transactions the server has not acknowledged (absent when the
///   store could not be read);
/// - `finished`, `leftToPush`, `moreToPull`: whether the sync ended before `--within`'s time was
///   up (always, without it), and what it left; present when the sync succeeded;
/// - `error`: on failure only — `code` (the server's or the client's stable code, e.g.
///   `zoneDeleted`, `unauthorized`, `clockSkew`, `transport`), `message`, `status` (the HTTP
///   status, when the server answered).
struct SyncReportJSON: Codable, Hashable {
    var zone: String
    var owner: String?
    var mode: String
    var ok: Bool
    var pushedTransactions: Int
    var pulledTransactions: Int
    var appliedEvents: Int?
    var bootstraps: Int?
    var rewinds: Int?
    var unpushable: Int?
    var forks: [Fork]?
    var stateUploads: Int?
    var stateBytes: Int?
    var token: String?
    var pending: Int?
    var error: ErrorJSON?
    /// `--within`: `false` when the time was up first (absent on failure), then what is left.
    var finished: Bool?
    var leftToPush: Int?
    var moreToPull: Bool?

    /// A replica fork the sync made (the store was a copy, its replica was another user's, or its
    /// edits were re-stamped).
    struct Fork: Codable, Hashable {
        /// `forked`, `logLost` or `clockRestamp`.
        var reason: String
        var oldReplica: String
        var newReplica: String
        /// The old replica's sequences 1...keptThrough stay (the server holds them).
        var keptThrough: UInt64
        /// Events re-authored under the new replica.
        var reauthored: UInt64

        init(_ fork: ReplicaFork) {
            reason = fork.reason.rawValue
            oldReplica = fork.replica.description
            newReplica = fork.successor.description
            keptThrough = fork.keptThrough
            reauthored = fork.reauthored
        }
    }

    struct ErrorJSON: Codable, Hashable {
        var code: String
        var message: String
        var status: Int?

        init(code: String, message: String, status: Int? = nil) {
            self.code = code
            self.message = message
            self.status = status
        }

        init(_ error: SyncError) {
            self.init(code: error.code.name, message: error.message, status: error.status)
        }
    }

    /// A sync that succeeded.
    init(zone: ZoneReference, mode: String, report: SyncReport, pending: Int?) {
        self.zone = zone.name
        owner = zone.owner
        self.mode = mode
        ok = true
        pushedTransactions = report.pushedTransactions
        pulledTransactions = report.pulledTransactions
        appliedEvents = report.appliedEvents
        bootstraps = report.bootstraps
        rewinds = report.rewinds
        unpushable = report.unpushable
        forks = report.forks.map(Fork.init)
        stateUploads = report.stateUploads
        stateBytes = report.stateBytes
        token = report.token
        self.pending = pending
        finished = report.finished
        leftToPush = report.leftToPush
        moreToPull = report.moreToPull
    }

    /// A sync that failed: what the engine counted before the error, and the error.
    init(zone: ZoneReference, mode: String, error: ErrorJSON, pushed: Int, pulled: Int, token: String?, pending: Int?) {
        self.zone = zone.name
        owner = zone.owner
        self.mode = mode
        ok = false
        pushedTransactions = pushed
        pulledTransactions = pulled
        self.token = token
        self.pending = pending
        self.error = error
    }
}

/// A status of `strata sync --watch --json`, one JSON line per change.
struct SyncStatusJSON: Codable, Hashable {
    var phase: String
    var pending: Int
    var pushed: Int
    var pulled: Int
    /// Why the pending transactions cannot be pushed (read-only access); absent when they can.
    var blocked: String?
    var lastError: SyncReportJSON.ErrorJSON?

    init(_ status: SyncStatus) {
        phase = status.phase.rawValue
        pending = status.pending
        pushed = status.pushed
        pulled = status.pulled
        blocked = status.blocked
        lastError = status.lastError.map(SyncReportJSON.ErrorJSON.init)
    }
}
