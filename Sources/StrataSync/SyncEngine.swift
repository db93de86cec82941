public import Foundation
@_spi(StrataInternals) public import Strata
import StrataCore
import StrataProtocol
import StrataLog
import Synchronization

/// Syncs one store with one zone of a log server: pushes the store's unpushed local
/// transactions, pulls the zone's changes and applies them under the merge rule.
///
/// ```swift
/// let engine = try SyncEngine(store: store, server: URL(string: "http://localhost:8080")!, zone: "notes", credentials: token)
/// try await engine.sync()          // once
/// await engine.start()             // keep going with long polls, until stop()
/// ```
///
/// What the engine does when the server refuses a push:
/// - `replicaForked` (this store is a copy of another, or restored from a backup, and both wrote
///   under the same replica) and `replicaNotYours` (the replica belongs to another user): the
///   store forks — takes a new replica ID and re-authors every transaction the server does not
///   hold (`Store.fork(keepingThrough:reason:restamp:)`) — and pushes again. Nothing is lost.
/// - `clockSkew` (the device's clock is ahead of the server's by more than it accepts): the edits
///   stay pending, the pull still runs, and the sync ends with the typed error. Once the
///   device's clock agrees with the server's again, the pending edits are re-stamped (a fork
///   with fresh timestamps) and pushed.
public actor SyncEngine {
    public let store: Store
    /// The zone's name.
    public let zone: String
    /// The zone as named to the server (its owner when it is another user's).
    public let zoneReference: ZoneReference
    let transport: any SyncTransport
    let options: SyncOptions
    /// Every decision the engine takes (the actor performs them).
    let machine: SyncStateMachine
    var cursor: SyncCursor
    var status: SyncStatus
    /// The status streams' continuations, behind a lock so that a stream ending removes its own
    /// synchronously (no task to hop onto the actor).
    let observers = Mutex<[UUID: AsyncStream<SyncStatus>.Continuation]>([:])

    /// Whether the caller may push to the zone, as the server last said.
    var canPush = true
    /// Whether the cursor's acknowledged count was checked against the server's ledger since it
    /// was read from disk: a cursor file is outside the store's checks (a hand edit with its
    /// checksum recomputed, a copy from elsewhere), and one claiming more than the server holds
    /// would hold back this store's edits for good.
    var cursorVerified = false
    /// The newest stamp of any transaction pulled (milliseconds), for ``SyncStatus/clockBehind``.
    var newestPulled: UInt64 = 0
    /// The server's limits, as it last said.
    var limits: ZoneAccessInfo?
    /// Whether this store has synced with the zone before (its cursor file exists): then a
    /// missing zone was deleted, and is not silently recreated.
    var knowsZone: Bool
    /// Set by ``recreateZone()`` for the sync that recreates a deleted zone.
    var recreating = false
    /// The epoch of the zone's life this store synced with before ``recreateZone()`` (from its
    /// token): the recreated zone continues it, so that the life's other devices go on into it.
    var recreatingFrom: UInt64?
    /// Set while a push that was answered `zoneReset` starts over (which pushes again): a second
    /// `zoneReset` meanwhile is thrown, so that a server answering it to every push cannot
    /// recurse the engine off its stack.
    var startingOverFromPush = false
    /// The last pull of the current sync went on until the server had nothing more (what
    /// ``syncOnce(deadline:)`` reports as ``SyncReport/moreToPull``).
    var pullFinished = false

    // Continuous mode (SyncEngine+Continuous.swift).
    /// The running continuous mode, if any.
    var session: ContinuousSession?
    /// The task of ``start()``; `nil` when continuous mode runs inside ``run()`` (or not at all).
    var loop: Task<Void, Never>?
    /// A local commit came since the round began: its long poll does not wait.
    var dirty = false
    /// Tells the waiting long poll's pusher of a local commit (pushed while the poll waits).
    var pollWaker: AsyncStream<Void>.Continuation?
    /// The turn a push during the long poll and the poll's answer take (an `AsyncGate`);
    /// `nil` outside continuous mode's long poll.
    var pollTurn: AsyncGate?
    /// The long poll's request has ended (answered or failed): its pusher starts no more pushes
    /// (one under way finishes); later commits go to the next round.
    var pollEnded = false
    /// How many reads of the pending count have begun, and writes of it made: a read writes the
    /// status only if nothing began or wrote since it began (a read begun before a push
    /// acknowledged edits must not put back the count from before).
    var pendingReads: UInt64 = 0
    /// Assets the server said the zone holds (uploaded by this engine, or found there): not
    /// asked about again while the engine lives.
    var assetsInZone = Set<AssetHash>()
    /// Why the last push could not upload an asset (too large, over quota): what the sync
    /// reports rather than the push's `assetMissing` that follows from it.
    var assetUploadRefusal: SyncError?
    /// The token, the store's log end and the time of the last state report the server
    /// answered (see `SyncEngine+StateReport.swift`).
    var lastStateReport: (token: String, logEnd: UInt64, at: ContinuousClock.Instant)?
    /// An engine over HTTP.
    ///
    /// - Parameters:
    ///   - store: the store to sync.
    ///   - server: the log server's base URL.
    ///   - zone: the zone's name.
    ///   - owner: the zone's owner when it is another user's (shared with the caller, or public);
    ///     `nil` for the caller's own zone, which is created when it does not exist. Another
    ///     user's zone is never created, and never used unless named with its owner.
    ///   - credentials: the user's bearer token (a fixed one; see the `tokens:` initializer for
    ///     tokens that expire).
    ///   - options: batch sizes, long polls, retries.
    public init(store: Store, server: URL, zone: String, owner: String? = nil, credentials: String, options: SyncOptions = SyncOptions()) throws {
        try self.init(store: store, transport: HTTPSyncTransport(server: server, bearer: credentials), zone: zone, owner: owner, options: options)
    }

    /// Syncs over HTTP with tokens from `tokens`, which is asked for a fresh one whenever the
    /// server answers `401` (an expired access token).
    public init(store: Store, server: URL, zone: String, owner: String? = nil, tokens: TokenProvider, options: SyncOptions = SyncOptions()) throws {
        try self.init(store: store, transport: HTTPSyncTransport(server: server, tokens: tokens), zone: zone, owner: owner, options: options)
    }

    /// An engine over any transport (simulations use an in-process one).
    public init(store: Store, transport: any SyncTransport, zone: String, owner: String? = nil, options: SyncOptions = SyncOptions()) throws {
        try self.init(store: store, transport: transport, zone: zone, owner: owner, options: options, checkingMask: true)
    }

    /// `checkingMask` false: an engine that syncs a store about to be emptied (its mask changed)
    /// to push what it holds; it pulls with the new mask, and records nothing.
    init(store: Store, transport: any SyncTransport, zone: String, owner: String?, options: SyncOptions, checkingMask: Bool) throws {
        self.store = store
        // Every request says which app schema version sends it (a zone may no longer support it).
        self.transport = transport.reporting(schemaVersion: { [store] in store.schemaVersion })
        self.zone = zone
        self.zoneReference = ZoneReference(zone, owner: owner)
        self.options = options
        self.machine = SyncStateMachine(zone: ZoneReference(zone, owner: owner), policy: SyncStateMachine.Policy(options))
        self.knowsZone = FileManager.default.fileExists(atPath: SyncCursor.path(store: store, zone: ZoneReference(zone, owner: owner)))
        self.cursor = try SyncCursor.load(store: store, zone: zoneReference, logger: options.logger)
        if checkingMask { try Self.recordMask(options.downloadMask, of: ZoneReference(zone, owner: owner), in: store, synced: knowsZone) }
        // From now on compaction keeps what this engine has not pushed.
        try store.pinUnpushed(SyncCursor.fileName(zoneReference), acknowledged: cursor.acknowledged)
        self.status = SyncStatus(phase: .idle, pending: 0, blocked: nil, pushed: 0, pulled: 0, lastError: nil)
        // The store fetches assets it lacks through the engine's zone (`Store.asset(_:)`).
        store.attach(assetSource: self)
    }

    /// Checks that the store downloaded the zone with `mask` (as the store recorded it), and
    /// records it for a store that never synced with the zone. What the store holds of the zone
    /// is what its mask let in: another mask would leave it holding what the new one leaves out
    /// (never updated again), or lacking what it lets in (those events are marked applied).
    static func recordMask(_ mask: DownloadMask, of zone: ZoneReference, in store: Store, synced: Bool) throws {
        let key = SyncCursor.fileName(zone)
        let text = mask.description
        let guidance = "download the zone again into a new store (a DatabaseSyncEngine does it itself)"
        if store.downloadMasksAreDamaged {
            throw SyncError(.downloadMaskChanged, "the store at \(store.directory) cannot say which download mask it downloaded zone \(zone) with (its download-masks.json is damaged): \(guidance)")
        }
        // A store that synced before masks were recorded downloaded everything.
        if let recorded = store.downloadMask(for: key) ?? (synced ? "" : nil), recorded != text {
            throw SyncError(.downloadMaskChanged, "the store at \(store.directory) downloaded zone \(zone) with the download mask \"\(recorded)\", not \"\(text)\": \(guidance)")
        }
        do {
            try store.recordDownloadMask(text, for: key)
        } catch {
            throw SyncError(.store, "\(error)")
        }
    }

    /// The persisted cursor (token and acknowledged sequence).
    public var currentCursor: SyncCursor { cursor }

    /// The engine's status now (``statusUpdates()`` follows it).
    public var currentStatus: SyncStatus { status }

    /// The largest asset the server takes, as it said when this engine last reached it (`nil`
    /// before that, or from a server that does not say): an app can refuse a larger file when the
    /// user picks it, rather than learn at upload time (`tooLarge`, the transaction kept pending).
    public var serverMaxAssetBytes: UInt64? { limits?.maxAssetBytes }

    /// Status updates, starting with the current one.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream<SyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        observers.withLock { $0[id] = continuation }
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func update(_ change: (inout SyncStatus) -> Void) {
        change(&status)
        let status = self.status
        observers.withLock { for continuation in $0.values { continuation.yield(status) } }
    }

    /// Pushes every unpushed local transaction, then pulls until the server has nothing more,
    /// applying what it gets.
    @discardableResult
    public func sync() async throws -> SyncReport {
        var report = SyncReport()
        try await sync(into: &report)
        return report
    }

    /// ``sync()``, adding to `report` as it goes: a sync cut short by its time budget
    /// (``syncOnce(deadline:)``) still says what it did.
    func sync(into report: inout SyncReport) async throws {
        pullFinished = false
        do {
            // Counted before any request, so that a sync that cannot reach the server says how
            // much waits.
            try await refreshPending()
            // Every sync asks what the caller may do: a grant can change between two syncs.
            let access = try await existingZone()
            try followLife(of: access)
            canPush = access.canPush
            limits = access
            // A heal goes first: it tells the server how far this store's own replica goes, so
            // the push then starts from what the store's log still holds. A refusal the machine
            // defers (the device's clock) leaves the edits pending while the pull still runs;
            // the heal is tried again after the pull, and only its last refusal counts.
            try await verifyUnconfirmedPush(&report)
            try await healOrDefer(&report)
            var deferred = try await pushOrDefer(&report, continuous: false)
            try await pullAll(wait: nil, &report)
            // Against the wall clock now, also when nothing was pulled (the clock may be set).
            let behind = noteClock([])
            update { $0.clockBehind = behind }
            if let refused = try await healOrDefer(&report) { deferred = deferred ?? refused }
            await refreshAuthors(report)
            if let deferred { throw deferred }
            await reportState(&report)
            let (phase, lastError) = machine.status(afterSyncFailing: nil)
            update { $0.phase = phase; $0.lastError = lastError }
        } catch let error as SyncError {
            let (phase, lastError) = machine.status(afterSyncFailing: error)
            update { $0.phase = phase; $0.lastError = lastError }
            throw error
        }
        report.token = cursor.token
    }

    /// Syncs from scratch: forgets the change token, so the zone is pulled again from its start
    /// (its snapshot, then its log — the store skips what it has), and pushes what the server does
    /// not hold. Nothing local is dropped: unpushed edits stay and are pushed, and what the server
    /// acknowledged stays acknowledged (its exactly-once check answers a repeat from what it
    /// holds). For a device that suspects it missed something; `strata sync --from-scratch`.
    @discardableResult
    public func resync() async throws -> SyncReport {
        cursor.token = nil
        try cursor.save(store: store, zone: zoneReference)
        return try await sync()
    }

    /// Recreates the caller's own zone after it was deleted (``SyncError/Code/zoneDeleted``) and
    /// seeds it with everything this store authored that its log still holds: the cursor starts
    /// over, so every own transaction is pushed, and the zone's new history is pulled. The server
    /// gives the zone back the access and grants it had when it was deleted (a grant revoked
    /// before the deletion stays revoked), so that its grantees are not cut off.
    @discardableResult
    public func recreateZone() async throws -> SyncReport {
        // The new life would start from what the mask let in, and lack the rest for good.
        guard options.downloadMask.isEmpty else {
            throw SyncError(.store, "zone \(zoneReference) cannot be recreated from the store at \(store.directory): it was downloaded without \(options.downloadMask), which the recreated zone would lack; recreate it from a store synced without a download mask")
        }
        recreating = true
        recreatingFrom = cursor.lifeEpoch ?? cursor.continuing
        defer {
            recreating = false
            recreatingFrom = nil
        }
        // Everything this store holds goes back: its own transactions as events, and its whole
        // state (history compacted away here, other devices' edits) as an upload.
        cursor = cursor.startingOver(replica: store.replicaID, logID: store.identity.logID)
        cursor.continuing = recreatingFrom
        try cursor.save(store: store, zone: zoneReference)
        return try await sync()
    }

    /// The zone, created when this store never synced with it; a zone this store synced with and
    /// that is gone is ``SyncError/Code/zoneDeleted``.
    func existingZone() async throws -> ZoneAccessInfo {
        let create = !knowsZone || recreating
        let request = SyncStateMachine.Request.ensureZone(create: create, ownZone: zoneReference.owner == nil, knownZone: knowsZone)
        let continuing = recreating ? recreatingFrom : nil
        switch try await ask(request, { try await self.transport.ensureZone(self.zoneReference, create: create, continuing: continuing) }) {
        case .answered(let access):
            knowsZone = true
            return access
        case .redirected(_, let refusal):
            throw refusal
        }
    }

    // MARK: The store's own transactions

    /// The store's own transactions the server has not acknowledged, as stored: the store reads
    /// only those entries (it knows where its own transactions are), so a push costs what changed.
    func unpushed() async throws -> [PendingTransaction] {
        let store = self.store
        let acknowledged = cursor.acknowledged
        do {
            // Reading the log is blocking work: not on the cooperative pool.
            return try await BlockingIO.run { try store.unpushedTransactions(after: acknowledged) }
        } catch {
            throw SyncError(.store, "cannot read the store's log: \(error)")
        }
    }

    /// This store's own transactions that edit objects and that this engine has not had
    /// acknowledged (schema records left out: see `Store.unpushedEdits(after:)`), by position.
    func unpushedEdits() async throws -> [UInt64: Set<ObjectID>] {
        let store = self.store
        let acknowledged = cursor.replica == store.replicaID ? cursor.acknowledged : 0
        do {
            return try await BlockingIO.run { try store.unpushedEdits(after: acknowledged) }
        } catch {
            throw SyncError(.store, "cannot read the store's log: \(error)")
        }
    }

    /// Counts the status's pending edits from the store.
    func refreshPending() async throws {
        pendingReads &+= 1
        let read = pendingReads
        let count = try await unpushedEdits().count
        guard read == pendingReads else { return }
        update { $0.pending = count }
    }

    /// A push is about to write the pending count: reads begun before it are stale.
    func pendingWritten() { pendingReads &+= 1 }
}
