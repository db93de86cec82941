public import Logging
public import StrataLog
public import StrataCore

/// Options of a ``Store``.
public struct StoreOptions: Sendable {
    /// How commits reach the disk (see `Durability`).
    public var durability: Durability = .groupCommit
    /// Size of the log's segment files.
    public var segmentSize: Int = 64 << 20
    /// Wall-clock milliseconds for the hybrid logical clock; injected for deterministic tests.
    public var clock: @Sendable () -> UInt64 = HybridClock.wallMilliseconds
    /// Where warnings (a damaged snapshot skipped, say) go.
    public var logger = Logger(label: "strata.store")
    /// The replica ID of a newly created store; random when `nil`.
    public var newReplicaID: ReplicaID? = nil
    /// How far ahead of wall-clock now one observed remote timestamp may move the store's clock,
    /// in milliseconds (default one hour). Without a bound, a single event stamped far in the
    /// future (a device with a wrong clock, or a legacy event near 2^64) would make every later
    /// local edit inherit that stamp and soon exhaust the clock; the events keep their stamps, so
    /// the merge rule still orders them by it. Within the bound, ordinary clock skew between
    /// devices still orders an edit after the ones it saw. Beyond it, an edit is still stamped
    /// after every event the object it edits holds (the clock moves past those, however far
    /// ahead): a device whose wall clock is hours or years behind never loses an edit to the
    /// value it replaced.
    public var maxClockLead: UInt64 = StoreOptions.defaultMaxClockLead

    /// Whether compaction keeps, in the log, this store's transactions that a sync engine has
    /// not pushed yet (see `Store.pinUnpushed(_:acknowledged:)`): the push path reads them from
    /// the log, so retiring them would strand them. On by default; it concerns stores that have
    /// a sync engine (a store that never synced has no pin and compacts as before).
    public var retainsUnpushed = true

    /// When the store compacts on its own (see ``AutoCompaction``): by default once more than
    /// 100,000 events or 64 MiB of encoded transactions lie in the log past the newest snapshot.
    /// ``AutoCompaction/disabled`` leaves compaction to explicit ``Store/compact()`` calls.
    public var autoCompaction = AutoCompaction.default
    /// The most bytes of fetched assets kept on this device (`nil`: no limit). Beyond it the
    /// least recently used are removed after each fetch — never a pinned asset, and never one
    /// no server holds yet (imported here, not yet uploaded); neither counts against the
    /// budget. A removed asset is fetched again when asked for. Change it later with
    /// `Store.assetCacheBudget`; an app that shows many photos should set one (a photo library
    /// scrolled through once would otherwise stay on the device).
    public var assetCacheBudget: UInt64? = nil
    /// How long an asset nothing names stays after its last use before a compaction removes it
    /// (`Store.collectUnreferencedAssets(grace:)`): an asset imported for a transaction is safe
    /// until then even before the transaction is committed. 24 hours by default.
    public var assetCollectionGrace: Duration = .seconds(24 * 3600)

    /// Whether other processes open the store at the same time — an app, its widget, its share
    /// extension — each writing (see ``StoreSharing``). Every process that opens it must say so.
    public var sharing = StoreSharing.exclusive

    /// The attributes to index (see ``AttributeIndex``): an equality or a range in a `Filter`
    /// on them, and a sort by them with a limit, is answered without reading every object of the
    /// entity. Kept in memory and built from the objects on open (and again when a schema from
    /// another app version arrives); changing the list changes nothing stored. An index naming
    /// an entity or attribute the schema does not declare (or a relationship) makes the open
    /// fail with `invalidArgument`.
    public var indexes: [AttributeIndex] = []

    /// One hour, in milliseconds.
    public static let defaultMaxClockLead: UInt64 = HybridClock.defaultMaxLead

    public init(durability: Durability = .groupCommit) {
        self.durability = durability
    }
}

/// When a store compacts on its own.
///
/// Opening a store loads its newest snapshot and replays the log past it, so the open takes time
/// in proportion to the history written since the last compaction. Apps do not call
/// ``Store/compact()``, so without a policy that history — and the open — would grow without
/// bound. After each commit (local, remote apply, fork) and after each open, the store compares
/// the log past its newest snapshot with these thresholds; once either is exceeded it compacts in
/// the background:
///
/// - one compaction at a time, never concurrently with itself or with ``Store/compact()``;
/// - the commit that crossed the threshold does not wait for it (later commits wait only while
///   the projection is encoded, as with ``Store/compact()``);
/// - it keeps, as ``Store/compact()`` does, the transactions a sync engine has not pushed yet
///   (``StoreOptions/retainsUnpushed``); and, unlike an explicit ``Store/compact()``, it also
///   keeps this store's own transactions while no sync engine has pinned any (a store that has
///   never synced may still sync later, and the push reads them from the log). It always writes
///   the snapshot, so the open stays bounded either way; only disk space waits for the push.
///   A store that never syncs and should reclaim that space sets
///   ``StoreOptions/retainsUnpushed`` to `false`;
/// - a failure is logged (error level, on ``StoreOptions/logger``), never thrown at a caller: the
///   store tries again once as much history again has accumulated, or at the next open;
/// - a closed store does not start one; ``Store/close()`` waits for one that is running.
///
/// What is counted is what the next open replays: the transactions at or after the newest
/// snapshot's position, their events and their encoded (uncompressed) bytes — the log stores them
/// LZ4-compressed, usually smaller. Transactions this store kept for sync below the snapshot are
/// not replayed on open and do not count.
///
/// The defaults keep the replay on open to a fraction of a second (a full replay runs at about
/// half a million events per second; see the Benchmarks article) while compacting rarely: each
/// compaction writes the whole projection, in time proportional to the number of objects, so a
/// threshold far below the store's size would spend more on snapshots than it saves on opens.
/// The byte threshold catches histories of few but large events (long texts, blobs), whose
/// replay is bounded by bytes rather than by events. Stores with very large object graphs and
/// heavy write rates may raise both thresholds; tests use small ones.
///
/// ``Store/waitForAutoCompaction()`` waits for a background compaction (for tests and tools).
public struct AutoCompaction: Sendable, Hashable {
    /// Compact once more than this many events lie in the log past the newest snapshot (`nil`:
    /// no limit on events).
    public var eventsSinceSnapshot: Int?
    /// Compact once the transactions past the newest snapshot encode to more than this many bytes
    /// (`nil`: no limit on bytes).
    public var bytesSinceSnapshot: Int?

    public init(eventsSinceSnapshot: Int? = AutoCompaction.defaultEventsSinceSnapshot,
                bytesSinceSnapshot: Int? = AutoCompaction.defaultBytesSinceSnapshot) {
        self.eventsSinceSnapshot = eventsSinceSnapshot
        self.bytesSinceSnapshot = bytesSinceSnapshot
    }

    /// 100,000 events.
    public static let defaultEventsSinceSnapshot = 100_000
    /// 64 MiB.
    public static let defaultBytesSinceSnapshot = 64 << 20
    /// Compact past 100,000 events or 64 MiB since the newest snapshot.
    public static let `default` = AutoCompaction()
    /// Never compact on its own: only ``Store/compact()`` does.
    public static let disabled = AutoCompaction(eventsSinceSnapshot: nil, bytesSinceSnapshot: nil)

    /// Whether any threshold is set.
    public var isEnabled: Bool { eventsSinceSnapshot != nil || bytesSinceSnapshot != nil }

    /// Whether `events` events or `bytes` bytes exceed a threshold.
    func isExceeded(events: Int, bytes: Int) -> Bool {
        if let limit = eventsSinceSnapshot, events > limit { return true }
        if let limit = bytesSinceSnapshot, bytes > limit { return true }
        return false
    }
}

/// Whether one process or several open a store.
public enum StoreSharing: Sendable, Hashable {
    /// Only this process opens the store (another open fails with `StoreError.Code.log`,
    /// `locked`). The default, and the fastest: a commit takes no cross-process lock.
    case exclusive
    /// Several processes open the store at once, each committing: an app, its widget, its share
    /// extension, in the app group's shared container. Commits are serialized across processes
    /// by a short lock around the append: a commit first applies what the others committed
    /// (its validation, sequence numbers and clock follow theirs), then appends after it; the
    /// sync runs outside the lock, and commits of one process still share it (group commit).
    /// Each process follows the others' commits as they land — the log directory is watched
    /// (inotify on Linux, kqueue on Apple platforms), so ``Store/changes()`` and observed
    /// queries see them within milliseconds, as `ChangeSet.Origin.otherProcess`.
    ///
    /// What changes: a fork and an adopted snapshot need the store to themselves
    /// (`StoreError.Code.exclusiveAccessRequired`); a compaction writes its snapshot but
    /// retires log segments only when no other process has the store open; run sync in one
    /// process (it pushes every process's commits: they are all this device's). A `Database`
    /// (several zones) is not shared by processes yet: `Database.open` refuses this option.
    case processes
}
