import Strata
public import StrataCore

/// What one ``SyncEngine/sync()`` did.
public struct SyncReport: Sendable, Hashable {
    public var pushedTransactions = 0
    public var pulledTransactions = 0
    /// Events the store applied from the pulled transactions (its own come back and are skipped).
    public var appliedEvents = 0
    /// Times the engine had to bootstrap from the zone's snapshot (its token had expired).
    public var bootstraps = 0
    /// Times the server held less than the device had seen (restored from a backup) and the
    /// device pulled the zone again from its start.
    public var rewinds = 0
    /// Local transactions with edits that wait because the caller may only read the zone (they
    /// are pushed once write access is granted); 0 when the caller may push. The record of the
    /// app's schema that opening a store writes is no edit and is not counted: a reader that
    /// never edited has none.
    public var unpushable = 0
    /// Replica forks this sync made: the store was a copy (or restored), its replica belonged to
    /// another user, or its edits were stamped by a wrong clock; each took a new replica ID and
    /// re-authored what the server did not hold.
    public var forks: [ReplicaFork] = []
    /// States this sync uploaded to heal the zone (it held less than the store had seen), and
    /// their bytes.
    public var stateUploads = 0
    public var stateBytes = 0
    public var token: String?
    /// Whether the sync did everything it had to: always, for ``SyncEngine/sync()``; for
    /// ``SyncEngine/syncOnce(deadline:)``, whether it ended before its deadline did.
    public var finished = true
    /// Local transactions with edits that the sync left unpushed because its deadline came
    /// first (``SyncEngine/syncOnce(deadline:)``; 0 when it finished; it includes edits that wait
    /// for write access, see ``unpushable``). The next sync pushes them.
    public var leftToPush = 0
    /// Whether the pull stopped before the end of the zone's log because the deadline came first
    /// (``SyncEngine/syncOnce(deadline:)``; `false` when it finished): the zone may hold changes
    /// not pulled yet (also when the deadline came before the pull began). The next sync pulls
    /// them.
    public var moreToPull = false
    /// What the server found of the store's state when this sync reported it to the zone's
    /// device registry (see ``SyncOptions/stateReportInterval``); `nil` when the sync sent no
    /// report: reports are off, too soon after the last one, nothing changed since it (token and
    /// store), the sync failed first, or the report failed (a report never fails a sync).
    ///
    /// `DeviceStateCheck.divergent`: the store holds a state the zone never had at this point
    /// of its history. Keep syncing: when the cause is events the zone has not received yet (a
    /// device that got them another way), it clears once they arrive. When it persists, the
    /// store is worth a look: `strata diff STORE --server URL --zone Z` names the first event
    /// where the two part, and `DebugBundle` (with a redaction key) packs the store for whoever
    /// looks, without its values. Quote the replica ID: the zone's owner finds the device by it
    /// in `strata zones status`.
    public var stateCheck: DeviceVerdict?

    /// Whether the store got anything new from the zone: events applied (not its own coming
    /// back), a snapshot adopted, or the zone pulled again after a rewind. What an app answers a
    /// silent push with (`.newData` or `.noData`).
    public var receivedChanges: Bool { appliedEvents > 0 || bootstraps > 0 || rewinds > 0 }

    public init() {}
}
