/// Where a ``DatabaseSyncEngine`` is, for a status display: what it is doing, what its last
/// round did zone by zone, and why it failed or stopped.
///
/// ```swift
/// for await status in await sync.statusUpdates() {
///     switch status.phase {
///     case .unauthorized: showSignInPrompt()            // resumes by itself once tokens work
///     case .stopped: if status.stoppedWith?.code == .anotherUser { showSignedOutDatabase() }
///     default: showFailingZones(status.failingZones)     // each zone with why it fails
///     }
///     if let version = status.requiredSchemaVersion { showUpdatePrompt(version) }
/// }
/// ```
public struct DatabaseSyncStatus: Sendable {
    public enum Phase: String, Sendable, Hashable {
        /// Not syncing: continuous mode is not running and no sync is under way.
        case idle
        /// A round is under way (asking what changed, adding and removing zones, syncing them).
        case syncing
        /// Continuous mode waits for the server's next change (one long poll for every zone).
        case waiting
        /// The last round failed as a whole (the server unreachable, say); continuous mode tries
        /// again after a growing backoff (``SyncOptions/initialBackoff`` up to
        /// ``SyncOptions/maxBackoff``), cut short by a local commit.
        case backingOff
        /// The server refused the credentials and the fresh token after them: continuous mode
        /// tries again after ``SyncOptions/unauthorizedBackoff``, doubling up to
        /// ``SyncOptions/maxUnauthorizedBackoff``, and goes on by itself once a token works.
        case unauthorized
        /// Continuous mode stopped by itself (``stoppedWith`` says why) or was stopped.
        case stopped
    }

    public var phase: Phase
    /// What the last round that reached the server did, zone by zone (`nil` before one did).
    public var lastReport: DatabaseSyncReport?
    /// Why the last round failed as a whole; `nil` once a round succeeds.
    public var lastError: SyncError?
    /// The zones whose last sync failed, and why (each is tried again in the next rounds).
    public var failingZones: [ZoneReference: SyncError] = [:]
    /// Why continuous mode stopped by itself (`anotherUser`); as ``DatabaseSyncEngine/stoppedWith``.
    public var stoppedWith: SyncError?
    /// Rounds completed since the engine was made (one-shot syncs and continuous mode's).
    public var rounds: Int = 0

    /// The app schema version some zone now requires, when one no longer syncs with this app's
    /// (its sync refused with `schemaTooOld`, in ``failingZones``): the highest such minimum, for
    /// an update prompt; 0 when a server did not say which. `nil` while every zone takes this
    /// version. The other zones go on syncing, and the refused zones' local edits stay until the
    /// app is updated.
    public var requiredSchemaVersion: Int? {
        failingZones.values.filter { $0.code == .schemaTooOld }.map { $0.minSchemaVersion ?? 0 }.max()
    }

    public init(phase: Phase) {
        self.phase = phase
    }
}
