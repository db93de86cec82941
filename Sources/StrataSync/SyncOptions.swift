import Foundation
public import StrataCore
public import Logging

/// Options of a ``SyncEngine``.
public struct SyncOptions: Sendable {
    /// Transactions per push.
    public var pushBatchSize = 256
    /// Transactions per pull page.
    public var pullLimit = 1000
    /// The long poll of continuous mode.
    public var longPoll: Duration = .seconds(25)
    /// Retries of a failing request before the error is reported (with exponential backoff and
    /// jitter; the server's Retry-After is honoured).
    public var maxRetries = 6
    public var initialBackoff: Duration = .milliseconds(100)
    public var maxBackoff: Duration = .seconds(10)
    public var logger = Logger(label: "strata.sync")
    /// The device's wall clock in milliseconds since 1970 (injected by simulations), compared with
    /// the server's time when it refuses a push for clock skew.
    public var wallClock: @Sendable () -> UInt64 = { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }
    /// How far behind the zone's newest pulled stamp the wall clock may be before the status
    /// says so (``SyncStatus/clockBehind``).
    public var clockBehindWarning: Duration = .seconds(3600)
    /// The clock the engine waits on between retries and after a failed round of continuous
    /// mode. Tests and simulations inject one they advance themselves, so that what a backoff
    /// does is asserted without waiting for it.
    public var clock: any Clock<Duration> = ContinuousClock()
    /// The jitter of a backoff: the fraction of the capped delay to wait, in `0.5...1` (random by
    /// default; injected for deterministic tests).
    public var jitter: @Sendable () -> Double = { Double.random(in: 0.5...1.0) }
    /// The first wait of continuous mode after the server refused the credentials and a fresh
    /// token (``SyncStatus/Phase/unauthorized``); it doubles with each refusal in a row, up to
    /// ``maxUnauthorizedBackoff``, with the same jitter. Each try asks the ``TokenProvider`` for
    /// one fresh token, so this bounds how often a revoked user's provider is asked.
    public var unauthorizedBackoff: Duration = .seconds(2)
    public var maxUnauthorizedBackoff: Duration = .seconds(120)
    /// What of the zone this device does not download (`DownloadMask`, `.none` by default): the
    /// server leaves those entities, attributes and relationships out of every pull and snapshot,
    /// so they never reach the store's files (nor the assets masked attributes name). The store's
    /// own edits are never masked. The mask a zone was first synced with is kept by the store
    /// (`download-masks.json`): an engine made with another one throws ``SyncError/Code/downloadMaskChanged`` (the zone
    /// must be downloaded again — `DatabaseSyncEngine` does that itself).
    public var downloadMask: DownloadMask = .none
    /// Whether a catch-up asks for the next page while it applies the current one, so that the
    /// download and the apply overlap. It holds a second page in memory (a page is at most the
    /// server's pull byte limit): turn it off where memory is tighter than time.
    public var pullReadAhead = true
    /// The least time between two reports of the store's state to the server's device registry
    /// (``SyncReport/stateCheck``), on by default; `nil` turns reports off.
    ///
    /// A report is the digest of the store's state at its change token, which the server
    /// compares with the zone's own state there and flags when they differ — a device holding a
    /// state the zone never had, found without anyone asking. It goes after the engine's first
    /// sync, then after a sync that ends with another token or another store log end (a local
    /// commit) than the last report's, once this long has passed since it.
    ///
    /// What it sends: the replica ID, the change token, the digest (a SHA-256; no value of the
    /// store), how many transactions and assets are not pushed yet, whether a download mask is
    /// used, and the library's release; the server adds the user and its own time. The zone's
    /// owner sees these for every device that syncs with the zone, other users' included (when
    /// each last synced, how much each has not pushed).
    ///
    /// What it costs: the digest reads the whole state under the store's lock (commits and
    /// reads wait for it), in time proportional to the number of fields it holds. It is not computed when the
    /// server would not compare it (unpushed edits, a download mask), nor when the sync's task
    /// is cancelled (a background deadline).
    public var stateReportInterval: Duration? = .seconds(60)

    public init() {}
}
