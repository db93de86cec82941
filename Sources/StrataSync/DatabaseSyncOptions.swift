public import Strata
import StrataProtocol

/// How a ``DatabaseSyncEngine`` syncs a database's zones.
public struct DatabaseSyncOptions: Sendable {
    /// What each zone's sync does (batch sizes, long polls, retries): as for a ``SyncEngine``.
    public var sync = SyncOptions()
    /// Whether a zone another user shares with this one is accepted and synced as soon as the
    /// server lists it (`true`), or waits for the app to call ``DatabaseSyncEngine/accept(_:)``
    /// (it is then in ``DatabaseSyncEngine/pendingShares``).
    public var acceptsSharesAutomatically = true
    /// Selective sync: which of the user's zones the database holds and syncs (`nil`: every one).
    /// A zone the filter refuses is neither added nor synced; one the database already holds is
    /// synced still (remove it with `Database.removeZone(_:reason:)`).
    public var selects: (@Sendable (ZoneReference) -> Bool)?
    /// Download masks: per zone, what the device does not download (`nil`, or `DownloadMask.none`
    /// for a zone: everything). The server leaves it out of the zone's pulls and snapshots, so it
    /// never reaches the device. Asked at every round: when a zone's mask changes, the engine
    /// pushes the zone's unpushed edits, empties its store (`Database.emptyZone(_:)`, which keeps
    /// the store as it was among the lost zones, reason `redownloaded`) and downloads it again
    /// with the new mask.
    public var downloadMask: (@Sendable (ZoneReference) -> DownloadMask)?
    /// How many zones sync at once.
    public var concurrentZones = 4
    /// The most zones one database-changes answer lists.
    public var databaseChangesPageSize = 500

    public init() {}
}

/// What one ``DatabaseSyncEngine/sync()`` did, zone by zone.
public struct DatabaseSyncReport: Sendable {
    /// The zones synced, with what each pushed and pulled.
    public var zones: [ZoneReference: SyncReport] = [:]
    /// The zones whose sync failed (they are synced again next time), and why.
    public var failures: [ZoneReference: SyncError] = [:]
    /// Zones added to the database (own zones made elsewhere, shares accepted).
    public var added: [ZoneReference] = []
    /// Zones that left the database (access revoked, zone deleted), with where their stores are
    /// kept and how many of their edits no server had acknowledged.
    public var removed: [LostZone] = []
    /// Shares waiting for ``DatabaseSyncEngine/accept(_:)`` (with automatic acceptance off).
    public var pendingShares: [ZoneReference] = []
    /// Requests for the database's changes (one, unless the answer came in pages).
    public var databaseRequests = 0
    /// Whether the sync did everything it had to: always, for ``DatabaseSyncEngine/sync()``;
    /// for ``DatabaseSyncEngine/syncOnce(deadline:)``, whether it ended before its deadline did
    /// (or its task was cancelled). It speaks of time only: zones that failed are in ``failures``.
    /// When the deadline came before the database's changes were read, it is `false` while
    /// ``unfinishedZones`` may be empty: test `finished`.
    public var finished = true
    /// The zones the deadline of ``DatabaseSyncEngine/syncOnce(deadline:)`` cut short or kept
    /// from starting (each zone's own report, when it began, says what it left). The next sync
    /// syncs them.
    public var unfinishedZones: [ZoneReference] = []

    /// Whether the database got anything new: a zone's store got changes
    /// (``SyncReport/receivedChanges``), or zones were added or removed. What an app answers a
    /// silent push with (`.newData` or `.noData`).
    public var receivedChanges: Bool {
        !added.isEmpty || !removed.isEmpty || zones.values.contains { $0.receivedChanges }
    }

    public init() {}
}
