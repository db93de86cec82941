public import Foundation
@_spi(StrataInternals) public import Strata
import StrataCore
public import StrataProtocol
import Logging
import Synchronization

/// One engine for every zone of a `Database`: each zone syncs with its own cursor (a
/// ``SyncEngine`` per zone under the hood), and one request — the server's database changes —
/// says which zones changed, so a device with a thousand zones and nothing new pays for one
/// small request, and one long poll covers them all.
///
/// ```swift
/// let db = try await Database.open(at: path, schema: schema)
/// let sync = DatabaseSyncEngine(database: db, server: url, credentials: token)
/// try await sync.sync()                     // every zone of the user, once
/// await sync.start()                        // keep going: one long poll for all zones
/// try await sync.share(ZoneReference("groceries"), with: "bob", access: .readWrite)
/// ```
///
/// Zones come and go with the server: an own zone made on another device and a zone another
/// user shares (accepted automatically unless ``DatabaseSyncOptions/acceptsSharesAutomatically``
/// is off) are added; a zone whose grant was revoked or that was deleted leaves the database
/// (`Database.removeZone(_:reason:)`: its objects leave every read, its store and unpushed edits
/// are kept aside, observers get `zoneRemoved`). ``DatabaseSyncOptions/selects`` chooses which
/// zones the device holds at all (selective sync).
public actor DatabaseSyncEngine {
    public let database: Database
    let transport: any SyncTransport
    /// The user the database belongs to, as every request of this engine (and of its zones'
    /// engines) says (``StrataHeader``'s `Strata-User`); `nil` until it is known.
    let boundUser: BoundUser
    let options: DatabaseSyncOptions
    /// Each zone's engine, made when the zone first syncs, and the download mask it was made with.
    var engines: [ZoneReference: SyncEngine] = [:]
    var engineMasks: [ZoneReference: DownloadMask] = [:]
    var state: DatabaseSyncState
    /// Shares the server listed that wait for ``accept(_:)``.
    public internal(set) var pendingShares: [ZoneReference: DatabaseZone] = [:]
    /// Continuous mode's task (``start()``), and its number (a loop that ended by itself clears
    /// `loop` only if no other began since).
    var loop: Task<Void, Never>?
    var loopNumber: UInt64 = 0
    /// Why continuous mode stopped by itself: `anotherUser` (another user signed in on the
    /// device; no round can succeed). `nil` before ``start()`` and while it runs; kept after it
    /// stopped until the next ``start()``, which begins it again.
    public internal(set) var stoppedWith: SyncError?
    /// Tells continuous mode of a local commit: a push round while the long poll waits, or the
    /// end of a sleep between rounds.
    var waker: AsyncStream<Void>.Continuation?
    /// Continuous mode's long poll has ended (answered or failed): no push round starts any
    /// more; later commits go to the round that follows.
    var pollEnded = false
    /// A local commit came since the last round asked for changes.
    var localDirty = false
    /// Zones whose cursor file was seen (they synced before).
    var syncedZones = Set<ZoneReference>()
    /// A round is between reading the changes and saving the token (see `exclusively`).
    var roundRunning = false
    var roundWaiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    var nextWaiter: UInt64 = 0
    /// The rounds begun so far: the current one's number marks its task (`roundOf`), and a long
    /// poll's batch is applied only if no round ran while it waited.
    var roundNumber: UInt64 = 0
    /// What the file holds, once this engine wrote it.
    var savedState: DatabaseSyncState?
    /// Where the engine is (``currentStatus``), and who follows it (``statusUpdates()``).
    var status = DatabaseSyncStatus(phase: .idle)
    let statusObservers = Mutex<[UUID: AsyncStream<DatabaseSyncStatus>.Continuation]>([:])

    /// An engine over HTTP with a fixed bearer token.
    public init(database: Database, server: URL, credentials: String, options: DatabaseSyncOptions = DatabaseSyncOptions()) {
        self.init(database: database, transport: HTTPSyncTransport(server: server, bearer: credentials), server: server.absoluteString, options: options)
    }

    /// An engine over HTTP with tokens from `tokens` (refreshed after a `401`).
    public init(database: Database, server: URL, tokens: TokenProvider, options: DatabaseSyncOptions = DatabaseSyncOptions()) {
        self.init(database: database, transport: HTTPSyncTransport(server: server, tokens: tokens), server: server.absoluteString, options: options)
    }

    /// An engine over any transport; `server` names the server the database token belongs to (a
    /// token kept for another server is not used).
    public init(database: Database, transport: any SyncTransport, server: String, options: DatabaseSyncOptions = DatabaseSyncOptions()) {
        self.database = database
        // A copy of its own whose requests say they are for the database's user (once known):
        // a transport the app reuses for another user's database says nothing of this one's.
        let boundUser = BoundUser()
        self.boundUser = boundUser
        self.transport = transport.expecting { boundUser.value }
        self.options = options
        self.state = DatabaseSyncState.load(in: database.directory, server: server)
        // A state read from the file is what the file holds (an idle first round writes nothing).
        if state != DatabaseSyncState(server: server) { savedState = state }
        boundUser.value = state.user
    }

    /// The engine of a zone the database holds (made on first use), for its status and its
    /// zone-level calls (`recreateZone()`, `resync()`).
    ///
    /// - Throws: ``SyncError`` `store` for a zone the database does not hold;
    ///   `downloadMaskChanged` when the zone's download mask changed since it was downloaded (the
    ///   next ``sync()`` downloads it again).
    public func engine(for zone: ZoneReference) throws -> SyncEngine {
        let mask = downloadMask(for: zone)
        guard let store = database.store(for: zone) else {
            throw SyncError(.store, "the database holds no zone \(zone)")
        }
        // (An engine of a store the database replaced — emptied by the app — is made again.)
        if let engine = engines[zone], engineMasks[zone] == mask, engine.store === store { return engine }
        var zoneOptions = options.sync
        zoneOptions.downloadMask = mask
        let engine = try SyncEngine(store: store, transport: transport, zone: zone.name, owner: zone.owner, options: zoneOptions)
        engines[zone] = engine
        engineMasks[zone] = mask
        return engine
    }

    func downloadMask(for zone: ZoneReference) -> DownloadMask { options.downloadMask?(zone) ?? .none }

    /// What a store being downloaded again records as its mask (see `engineRedownloading`).
    static let redownloading = "..downloading-again"

    /// The zone's engine; when the zone's download mask changed, the zone is first downloaded
    /// again: its unpushed edits pushed, its store set aside and emptied, its new engine made.
    func engineRedownloading(_ zone: ZoneReference) async throws -> SyncEngine {
        do {
            return try engine(for: zone)
        } catch let error as SyncError where error.code == .downloadMaskChanged {
            guard let store = database.store(for: zone) else { throw error }
            if let stale = engines.removeValue(forKey: zone) { await stale.stop() }
            engineMasks[zone] = nil
            // Pushes what the store holds. It pulls with the new mask: what it pulls goes aside
            // with the store, and nothing the new mask leaves out comes to the device (the old
            // mask may not even be known, when the store's record of it is damaged).
            var pushingOptions = options.sync
            pushingOptions.downloadMask = downloadMask(for: zone)
            // From here the store holds what two masks let in: recorded as a mask no engine has
            // (it does not parse), so that it is downloaded again whatever mask comes next, even
            // the old one, should this re-download stop before the store is emptied.
            do {
                try store.recordDownloadMask(Self.redownloading, for: SyncCursor.fileName(zone))
            } catch {
                throw SyncError(.store, "\(error)")
            }
            let pushing = try SyncEngine(store: store, transport: transport, zone: zone.name, owner: zone.owner, options: pushingOptions, checkingMask: false)
            do {
                try await pushing.sync()
            } catch {
                await pushing.stop()
                throw error
            }
            let healPending = await pushing.currentCursor.healPending
            await pushing.stop()
            // A heal the server has not taken yet (held back by read-only access or the device's
            // clock) is the only copy of what the zone lost: the store stays as it is.
            guard !healPending else {
                throw SyncError(.store, "zone \(zone) waits to heal the server with this store's state: it is downloaded with its new mask once the heal is done")
            }
            do {
                try await database.emptyZone(zone)
            } catch {
                throw SyncError(.store, "zone \(zone) could not be emptied to be downloaded with its new mask: \(error)")
            }
            syncedZones.remove(zone)
            options.sync.logger.notice("zone downloaded again", metadata: ["zone": "\(zone)", "mask": "\(downloadMask(for: zone))"])
            return try engine(for: zone)
        }
    }

    /// The user the database belongs to: as bound with ``bind(to:)``, or as the server signed in
    /// the first sync (`nil` before either). Every request of this engine and of its zones'
    /// engines says so, and the server refuses it for anyone else (`anotherUser`).
    public var user: String? { state.user }

    /// Binds the database to `user` before its first request: an app that knows who signed in
    /// (the subject of its JWT) makes sure that even the first sync of a new database cannot be
    /// made as someone else — for example with a token left over from the previous user, which
    /// would otherwise bind the new database to that user. Written to `database-sync.json` at once.
    ///
    /// - Throws: ``SyncError`` `anotherUser` when the database already belongs to another user
    ///   (nothing changes); `store` when the state file cannot be written.
    public func bind(to user: String) async throws {
        try await exclusively {
            if let bound = state.user {
                guard bound != user else { return }
                throw SyncError(.anotherUser, "the database at \(database.directory) belongs to user \(bound), not \(user): nothing was changed; give \(user) a database of their own")
            }
            var bound = state
            bound.user = user
            try bound.save(in: database.directory)
            state = bound
            savedState = bound
            boundUser.value = user
        }
    }

    /// The database token of the server's last answer (`nil` before the first sync).
    public var databaseToken: String? { state.token }

    func selected(_ zone: ZoneReference) -> Bool { options.selects?(zone) ?? true }

    // MARK: One sync

    /// Syncs every zone that needs it: those with local edits to push, those the server says
    /// changed since the last sync, and new ones (own zones made elsewhere, shares); removes the
    /// zones access to which was lost. A zone whose sync fails is in the report's failures and
    /// is synced again next time; the sync throws only when the server cannot say what changed.
    @discardableResult
    public func sync() async throws -> DatabaseSyncReport {
        var report = DatabaseSyncReport()
        updateStatus { $0.phase = .syncing }
        do {
            try await exclusively {
                let changes = try await fetchChanges(after: state.token, &report)
                try await apply(changes, &report)
                try await syncDirtyZones(&report)
            }
        } catch {
            roundEnded(report, failure: error as? SyncError ?? SyncError(.store, "\(error)"))
            throw error
        }
        roundEnded(report, failure: nil)
        return report
    }

    // MARK: Status

    /// The engine's status now (``statusUpdates()`` follows it).
    public var currentStatus: DatabaseSyncStatus { status }

    /// Status updates, starting with the current one: after every round (its report, the zones
    /// that failed), when continuous mode waits, backs off, or stops (and why).
    public func statusUpdates() -> AsyncStream<DatabaseSyncStatus> {
        let (stream, continuation) = AsyncStream<DatabaseSyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        statusObservers.withLock { $0[id] = continuation }
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in
            _ = self?.statusObservers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func updateStatus(_ change: (inout DatabaseSyncStatus) -> Void) {
        change(&status)
        let status = self.status
        statusObservers.withLock { for continuation in $0.values { continuation.yield(status) } }
    }

    /// A round ended: with its report, or failing as a whole with `failure`.
    func roundEnded(_ report: DatabaseSyncReport, failure: SyncError?) {
        let continuous = loop != nil
        updateStatus { status in
            if let failure {
                status.lastError = failure
                status.phase = !continuous ? .idle : failure.code == .unauthorized ? .unauthorized : .backingOff
            } else {
                status.lastError = nil
                status.lastReport = report
                status.rounds += 1
                status.phase = continuous ? .waiting : .idle
            }
            for zone in report.zones.keys { status.failingZones[zone] = nil }
            for lost in report.removed { status.failingZones[lost.zone] = nil }
            status.failingZones.merge(report.failures) { $1 }
        }
    }

    /// Runs `body` when no other round is between reading the changes and saving the token: a
    /// `sync()` called while continuous mode (or another `sync()`) runs waits for it, rather than
    /// adding, removing and syncing the same zones at the same time (an actor lets them
    /// interleave at every `await`). Rounds run in the order they asked; one whose task is
    /// cancelled while it waits throws `CancellationError` without running. Called from inside
    /// the round that is running (a `whenRemovingZone` hook calling `sync()`, or a task it
    /// started that inherited the round's task-local values), it throws
    /// ``SyncError/Code/reentrantSync`` rather than wait for the round it may be part of.
    func exclusively<T>(_ body: () async throws -> T) async throws -> T {
        if insideRunningRound {
            throw SyncError(.reentrantSync, "a sync of the database at \(database.directory) was asked for from inside its running round (a hook such as whenRemovingZone, or a task it started): it would wait for itself; sync once the hook has returned, from a Task.detached")
        }
        try Task.checkCancellation()
        if roundRunning {
            nextWaiter += 1
            let id = nextWaiter
            // The round ending hands the turn over (roundRunning stays set), so no caller
            // arriving meanwhile overtakes a waiter.
            // Under a time budget the wait ends at the deadline (SyncBudget.Spent).
            let timer = SyncBudget.current.map { budget in
                Task { [weak self] in
                    try await Task.sleep(until: budget.deadline, clock: .continuous)
                    await self?.cancelWaiter(id, with: SyncBudget.Spent())
                }
            }
            defer { timer?.cancel() }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { roundWaiters.append((id, $0)) }
            } onCancel: {
                Task { await self.cancelWaiter(id, with: CancellationError()) }
            }
            // Handed the turn just as the task was cancelled: pass it on rather than run.
            if Task.isCancelled {
                endRound()
                throw CancellationError()
            }
        } else {
            roundRunning = true
        }
        defer { endRound() }
        roundNumber += 1
        return try await Self.$roundOf.withValue(RoundMark(engine: ObjectIdentifier(self), round: roundNumber)) { try await body() }
    }

    /// Whether the current task runs in (or was started from) the round that is running now. A
    /// task started in an earlier round, which has ended, is not.
    var insideRunningRound: Bool {
        roundRunning && Self.roundOf == RoundMark(engine: ObjectIdentifier(self), round: roundNumber)
    }

    /// The engine and round the current task runs in (see `exclusively`).
    struct RoundMark: Sendable, Equatable {
        var engine: ObjectIdentifier
        var round: UInt64
    }

    @TaskLocal static var roundOf: RoundMark?

    private func endRound() {
        if roundWaiters.isEmpty {
            roundRunning = false
        } else {
            roundWaiters.removeFirst().continuation.resume()
        }
    }

    private func cancelWaiter(_ id: UInt64, with error: any Error) {
        guard let index = roundWaiters.firstIndex(where: { $0.id == id }) else { return }
        roundWaiters.remove(at: index).continuation.resume(throwing: error)
    }

    /// The database's changes since `start` (`nil`: from the beginning, a full listing), every
    /// page of them (`first`: the first one, read already by a long poll).
    func fetchChanges(after start: String?, first: DatabaseChanges? = nil,
                      _ report: inout DatabaseSyncReport) async throws -> DatabaseChangeBatch {
        var batch = DatabaseChangeBatch(start: start)
        var next = first
        while true {
            let page: DatabaseChanges
            if let read = next {
                page = read
                next = nil
            } else {
                let (transport, after, limit) = (self.transport, batch.token.isEmpty ? nil : batch.token, options.databaseChangesPageSize)
                page = try await SyncBudget.bounding { try await transport.databaseChanges(after: after, limit: limit, wait: nil) }
            }
            report.databaseRequests += 1
            try checkUser(page)
            batch.add(page)
            if !page.moreComing { break }
        }
        return batch
    }

    /// The zone a database-changes entry names, as this device names it (own zones without owner).
    static func reference(_ zone: DatabaseZone) -> ZoneReference {
        zone.role == .owner ? ZoneReference(zone.name) : ZoneReference(zone.name, owner: zone.owner)
    }

    /// Refuses an answer for another user than the one the database belongs to: a user signed
    /// out and another signed in on the device must not sync the first one's zones (their own
    /// zones are named without owner, and would be pushed into the second one's account).
    func checkUser(_ page: DatabaseChanges) throws {
        try checkUser(page.user)
    }

    func checkUser(_ named: String?) throws {
        guard let user = named, let bound = state.user, user != bound else { return }
        throw SyncError(.anotherUser, "the database at \(database.directory) belongs to user \(bound), but the server signed this request in as \(user): nothing was synced; sign \(bound) in again, or give \(user) a database of their own")
    }

    /// Adds, marks and removes zones as the server's changes say, then keeps the token.
    func apply(_ changes: DatabaseChangeBatch, _ report: inout DatabaseSyncReport) async throws {
        var dirty = Set(state.dirty)
        // A share whose acceptance failed for a reason that may pass (the network, the server
        // busy), or a zone that could not be added or removed, must be listed again: the token
        // then stays where it was, since the changes after the new one would not name the zone
        // again until it changes.
        var keepToken = false
        // Removals first: a zone removed and then shared again in one answer ends up added.
        var removals: [(ZoneReference, LostZone.Reason)] = []
        // The user the database belongs to: as the server says it signed them in, or (an older
        // server) as it names their own zones.
        let named = changes.user ?? changes.zones.first(where: { $0.role == .owner })?.owner
        // An older server names no user: its listing of another user's own zones is refused too.
        try checkUser(named)
        if let user = named {
            // Every request from now on says so, those of the zones' engines and the sharing
            // calls too: the server refuses them for anyone else (`anotherUser`).
            boundUser.value = user
            state.user = user
        }
        // The zones the answer lists (a zone listed and removed in one answer was given back).
        let listed = Set(changes.zones.map(Self.reference))
        for removal in changes.removed {
            let reason: LostZone.Reason = removal.reason == .deleted ? .deleted : .revoked
            // The server names own zones with the user's name; the database without owner.
            let zone = removal.owner == state.user ? ZoneReference(removal.name) : ZoneReference(removal.name, owner: removal.owner)
            guard !listed.contains(zone) else { continue }
            pendingShares[zone] = nil
            guard database.store(for: zone) != nil else { continue }
            removals.append((zone, reason))
        }
        if changes.reset {
            // A full listing: a zone this device synced before that it does not list is no
            // longer the user's; so is another user's zone it does not list, synced or not (it
            // came from the server's listing: an own zone never synced may be the app's new one).
            // A share waiting for acceptance that the listing no longer names was taken back.
            pendingShares = pendingShares.filter { listed.contains($0.key) }
            for zone in database.zones where !listed.contains(zone) && !removals.contains(where: { $0.0 == zone }) {
                guard let store = database.store(for: zone), zone.owner != nil || SyncCursor.exists(store: store, zone: zone) else { continue }
                removals.append((zone, zone.owner == nil ? .deleted : .revoked))
            }
        }
        for (zone, reason) in removals {
            if zone == database.defaultZone {
                report.failures[zone] = SyncError(.zoneDeleted, "the database's default zone \(zone) is gone from the server (\(reason.rawValue)); recreate it (engine(for:).recreateZone()) or make another zone the default (database.setDefaultZone)")
                // Listed again until the app has chosen: once another zone is the default, the
                // next round removes this one.
                keepToken = true
                continue
            }
            if let engine = engines.removeValue(forKey: zone) { await engine.stop() }
            do {
                report.removed.append(try await database.removeZone(zone, reason: reason))
            } catch {
                report.failures[zone] = SyncError(.store, "cannot remove zone \(zone): \(error)")
                keepToken = true
                continue
            }
            dirty.remove(zone)
        }
        for entry in changes.zones {
            let zone = Self.reference(entry)
            guard selected(zone) else { continue }
            if database.store(for: zone) != nil {
                // (No engine: the zone's download mask changed, and it is to be downloaded again.)
                let known = try? await engine(for: zone).currentCursor.token
                if known == nil || known != entry.token { dirty.insert(zone) }
                pendingShares[zone] = nil
                continue
            }
            if entry.role != .owner && !entry.accepted {
                guard options.acceptsSharesAutomatically else {
                    pendingShares[zone] = entry
                    continue
                }
                do {
                    let transport = self.transport
                    _ = try await SyncBudget.bounding { try await transport.acceptShare(zone) }
                } catch let error as SyncError {
                    report.failures[zone] = error
                    // Gone (`zoneNotFound`: the grant was taken back) or refused: nothing to retry.
                    if error.code != .zoneNotFound && error.code != .forbidden { keepToken = true }
                    continue
                }
            }
            pendingShares[zone] = nil
            do {
                try await database.addZone(zone)
            } catch {
                // Not this zone stopping every other: the rest go on, and the token stays, so
                // that the zone is listed again next time (a full disk may have passed by then).
                report.failures[zone] = SyncError(.store, "cannot add zone \(zone) to the database: \(error)")
                keepToken = true
                continue
            }
            report.added.append(zone)
            dirty.insert(zone)
        }
        report.pendingShares = pendingShares.keys.sorted()
        // Zones with local edits to push, and zones never synced (an own zone the app added).
        for zone in database.zones where !dirty.contains(zone) {
            guard let store = database.store(for: zone) else { continue }
            // A cursor once seen stays (the engine writes it): looked for on disk once per zone.
            if !syncedZones.contains(zone) {
                guard SyncCursor.exists(store: store, zone: zone) else {
                    dirty.insert(zone)
                    continue
                }
                syncedZones.insert(zone)
            }
            if (try? database.hasUnpushedEdits(in: zone)) ?? true { dirty.insert(zone) }
            // A zone whose download mask changed (or that was downloaded with a mask this engine
            // does not give it) is downloaded again. The engine is made once per zone; later
            // rounds only compare masks.
            if (try? engine(for: zone)) == nil { dirty.insert(zone) }
        }
        try saveState(token: keepToken ? state.token : changes.token, dirty: dirty.sorted())
    }

    /// Syncs the zones marked dirty, a few at a time; each one that syncs is unmarked.
    ///
    /// Under a time budget (``syncOnce(deadline:)``) zones with local edits go first, each zone
    /// syncs with `SyncEngine.syncOnce(deadline:)`, and a zone the deadline cut short stays
    /// marked (in the report's ``DatabaseSyncReport/unfinishedZones``).
    func syncDirtyZones(_ report: inout DatabaseSyncReport) async throws {
        try await syncZones(state.dirty, &report)
    }

    /// Syncs `zones` (those the database holds), a few at a time; each one that syncs is
    /// unmarked (see ``syncDirtyZones(_:)``).
    func syncZones(_ zones: [ZoneReference], _ report: inout DatabaseSyncReport) async throws {
        var queue = zones.filter { database.store(for: $0) != nil }
        // What the user did on this device reaches the server first; zones to download again
        // (their mask changed: a whole push and a new download each) last.
        let withEdits = Set(queue.filter { (try? database.hasUnpushedEdits(in: $0)) ?? true })
        let redownloads = Set(queue.filter { (try? engine(for: $0)) == nil })
        func rank(_ zone: ZoneReference) -> Int { redownloads.contains(zone) ? 2 : withEdits.contains(zone) ? 0 : 1 }
        queue = queue.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(\.element)
        let budget = SyncBudget.current
        var engines: [(ZoneReference, SyncEngine)] = []
        for zone in queue {
            do {
                engines.append((zone, try await engineRedownloading(zone)))
            } catch let spent as SyncBudget.Spent {
                // (A re-download cut short is done again from the start: see engineRedownloading.)
                _ = spent
                report.unfinishedZones.append(zone)
            } catch let error as SyncError {
                report.failures[zone] = error
            } catch {
                report.failures[zone] = SyncError(.store, "zone \(zone): \(error)")
            }
        }
        queue = []
        var outcomes: [(ZoneReference, Result<SyncReport, SyncError>)] = []
        await withTaskGroup(of: (ZoneReference, Result<SyncReport, SyncError>).self) { group in
            var next = engines.makeIterator()
            func addNext() -> Bool {
                guard let (zone, engine) = next.next() else { return false }
                group.addTask {
                    do {
                        if let budget { return (zone, .success(try await engine.syncOnce(deadline: budget.deadline))) }
                        return (zone, .success(try await engine.sync()))
                    } catch let error as SyncError {
                        return (zone, .failure(error))
                    } catch {
                        return (zone, .failure(SyncError(.store, "\(error)")))
                    }
                }
                return true
            }
            for _ in 0..<max(1, options.concurrentZones) where addNext() {}
            while let outcome = await group.next() {
                outcomes.append(outcome)
                _ = addNext()
            }
        }
        // Cancelled (continuous mode stopped, the caller's task cancelled, a background task's
        // time up): what the zones finished is kept and reported, but a zone that failed may
        // have failed because of it — not a failure to report; it stays marked and syncs next time.
        let cancelled = Task.isCancelled
        var dirty = Set(state.dirty)
        for (zone, outcome) in outcomes {
            switch outcome {
            case .success(let zoneReport):
                report.zones[zone] = zoneReport
                if zoneReport.finished {
                    dirty.remove(zone)
                } else {
                    report.unfinishedZones.append(zone)
                }
            case .failure(let error):
                if !cancelled { report.failures[zone] = error }
            }
        }
        try saveState(token: state.token, dirty: dirty.sorted())
    }

    /// Keeps the token and the dirty zones, writing the file only when they changed (an idle
    /// round writes nothing).
    func saveState(token: String?, dirty: [ZoneReference]) throws {
        var next = state
        next.token = token
        next.dirty = dirty
        guard next != savedState else {
            state = next
            return
        }
        try next.save(in: database.directory)
        state = next
        savedState = next
    }
}

/// The database's changes gathered over one answer's pages.
struct DatabaseChangeBatch: Sendable {
    /// The token the changes were asked after (`nil`: from the start).
    var start: String?
    var zones: [DatabaseZone] = []
    var removed: [RemovedZone] = []
    var reset = false
    var token: String
    /// The user the server signed the requests in as (`nil` from older servers).
    var user: String?

    /// Adds the next page. A page that begins a full listing (`reset`) drops what incremental
    /// pages before it said. A zone's last appearance is what holds: listed on one page and removed
    /// on a later one (its grant taken while the pages were read), it is removed; removed and then
    /// listed again (shared again), it is listed with its latest token. Within one page a listing
    /// outranks a removal, as the server lists a zone it removed and gave back in one answer.
    init(start: String?) {
        self.start = start
        token = start ?? ""
    }

    mutating func add(_ page: DatabaseChanges) {
        if page.reset && !reset {
            // A full listing begins (the token expired between pages): what earlier pages said
            // incrementally is superseded by it.
            zones = []
            removed = []
        }
        let removedNow = Set(page.removed.map { Self.key($0.owner, $0.name) })
        let listedNow = Set(page.zones.map { Self.key($0.owner, $0.name) })
        zones.removeAll { removedNow.contains(Self.key($0.owner, $0.name)) || listedNow.contains(Self.key($0.owner, $0.name)) }
        removed.removeAll { listedNow.contains(Self.key($0.owner, $0.name)) || removedNow.contains(Self.key($0.owner, $0.name)) }
        zones += page.zones
        removed += page.removed
        reset = reset || page.reset
        token = page.token
        user = page.user ?? user
    }

    private static func key(_ owner: String, _ name: String) -> String { owner + "/" + name }
}

/// The user a database engine's requests say they are for (see `SyncTransport.expecting(user:)`).
final class BoundUser: Sendable {
    private let user = Mutex<String?>(nil)
    var value: String? {
        get { user.withLock { $0 } }
        set { user.withLock { $0 = newValue } }
    }
}
