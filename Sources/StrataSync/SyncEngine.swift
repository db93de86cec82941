public import Foundation
public import Logging
@_spi(StrataInternals) public import Strata
import StrataProtocol
import StrataLog

/// Where the engine is, for a status display.
public struct SyncStatus: Sendable, Hashable {
    /// What the engine is doing.
    ///
    /// ```swift
    /// for await status in await engine.statusUpdates() {
    ///     switch status.phase {
    ///     case .unauthorized: showSignInPrompt()      // resumes by itself once the tokens work
    ///     case .backingOff: showOfflineBadge(status.pending)
    ///     default: hideBanners()
    ///     }
    /// }
    /// ```
    public enum Phase: String, Sendable, Hashable {
        case idle, pushing, pulling, waiting, backingOff, stopped
        /// The server refused the credentials, and the fresh token the ``TokenProvider`` gave
        /// after that was refused too (revoked, or the user signed out): the app should let the
        /// user sign in again. Continuous mode keeps trying with a growing backoff
        /// (``SyncOptions/unauthorizedBackoff``), asking the provider for a fresh token once per
        /// try — never in a tight loop — and goes on by itself once a token works.
        case unauthorized
    }

    public var phase: Phase
    /// Local transactions with edits not yet acknowledged by the server (what
    /// `Store.unpushedChangeCount()` counts, for this engine's zone). Kept right while the server
    /// cannot be reached: counted from the store before every round and after every local
    /// commit. Records of the app's schema are pushed too but are not counted.
    public var pending: Int
    /// Why the pending transactions cannot be pushed now (read-only access to the zone); `nil`
    /// when they can, or when nothing but schema records waits.
    public var blocked: String?
    /// Transactions pushed and pulled since the engine started.
    public var pushed: Int
    public var pulled: Int
    public var lastError: SyncError?
}

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

    public init() {}
}

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

    public init() {}
}

/// Syncs one store with one zone of a log server: pushes the store's unpushed local
/// transactions, pulls the zone's changes and applies them under the merge rule.
///
/// ```swift
/// let engine = SyncEngine(store: store, server: URL(string: "http://localhost:8080")!, zone: "notes", credentials: token)
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
    private var cursor: SyncCursor
    private var status: SyncStatus
    private var statusContinuations: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]
    private var loop: Task<Void, Never>?

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
        self.store = store
        self.transport = transport
        self.zone = zone
        self.zoneReference = ZoneReference(zone, owner: owner)
        self.options = options
        self.knowsZone = FileManager.default.fileExists(atPath: SyncCursor.path(store: store, zone: ZoneReference(zone, owner: owner)))
        self.cursor = try SyncCursor.load(store: store, zone: zoneReference, logger: options.logger)
        // From now on compaction keeps what this engine has not pushed.
        try store.pinUnpushed(SyncCursor.fileName(zoneReference), acknowledged: cursor.acknowledged)
        self.status = SyncStatus(phase: .idle, pending: 0, blocked: nil, pushed: 0, pulled: 0, lastError: nil)
    }

    /// The persisted cursor (token and acknowledged sequence).
    public var currentCursor: SyncCursor { cursor }

    /// The engine's status now (``statusUpdates()`` follows it).
    public var currentStatus: SyncStatus { status }

    /// Status updates, starting with the current one.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream<SyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        statusContinuations[id] = continuation
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeObserver(id) }
        }
        return stream
    }

    private func removeObserver(_ id: UUID) { statusContinuations[id] = nil }

    private func update(_ change: (inout SyncStatus) -> Void) {
        change(&status)
        for continuation in statusContinuations.values { continuation.yield(status) }
    }

    /// Pushes every unpushed local transaction, then pulls until the server has nothing more,
    /// applying what it gets.
    @discardableResult
    public func sync() async throws -> SyncReport {
        var report = SyncReport()
        do {
            // Counted before any request, so that a sync that cannot reach the server says how
            // much waits.
            try await refreshPending()
            // Every sync asks what the caller may do: a grant can change between two syncs.
            let access = try await existingZone()
            canPush = access.canPush
            limits = access
            // A push the server refuses for the device's clock leaves the edits pending; the pull
            // still runs, and the sync then reports why they wait.
            var deferred: SyncError?
            // A heal goes first: it tells the server how far this store's own replica goes, so
            // the push then starts from what the store's log still holds. A state stamped ahead of
            // the server's clock waits for the push, which re-stamps this store's edits once the
            // device's clock is right; the heal is tried again after the pull, and only its last
            // refusal counts.
            try await verifyUnconfirmedPush(&report)
            try await healDeferringClockSkew(&report)
            do {
                try await pushOrHold(&report)
            } catch let error as SyncError where error.code == .clockSkew {
                deferred = error
            }
            try await pullAll(wait: nil, &report)
            if let refused = try await healDeferringClockSkew(&report) { deferred = deferred ?? refused }
            await refreshAuthors(report)
            if let deferred { throw deferred }
            update { $0.phase = .idle; $0.lastError = nil }
        } catch let error as SyncError {
            update { $0.phase = error.code == .unauthorized ? .unauthorized : .idle; $0.lastError = error }
            throw error
        }
        report.token = cursor.token
        return report
    }

    /// Keeps syncing: a sync, then long polls that apply changes as soon as they land (and push
    /// local commits as they happen), until ``stop()``. Errors are reported in the status and
    /// retried with backoff.
    public func start() {
        guard loop == nil else { return }
        // Local commits cut a waiting long poll short, so they go out at once.
        let commits = store.changes()
        watcher = Task { [weak self] in
            for await change in commits where change.origin == .local {
                await self?.localCommitted()
            }
        }
        loop = Task { await self.runLoop() }
    }

    /// Ends continuous mode; returns once the loop has stopped.
    public func stop() async {
        let task = loop
        loop = nil
        watcher?.cancel()
        watcher = nil
        task?.cancel()
        poll?.cancel()
        await task?.value
        update { $0.phase = .stopped }
    }

    private var watcher: Task<Void, Never>?
    private var poll: Task<Void, any Error>?
    private var dirty = false

    private func localCommitted() async {
        dirty = true
        poll?.cancel()
        // The count is right at once, also while the server cannot be reached (the loop may be
        // backing off, and pushes nothing until it is back).
        try? await refreshPending()
    }

    private func runLoop() async {
        var failures = 0
        // Refusals of the credentials in a row: they back off on their own, longer schedule.
        var refusals = 0
        while !Task.isCancelled {
            do {
                dirty = false
                var report = SyncReport()
                try await refreshPending()
                // The caller's rights and the server's limits: on the first round and after a
                // failure (a grant may have changed, the server may have been replaced).
                if limits == nil || failures > 0 {
                    let access = try await existingZone()
                    canPush = access.canPush
                    limits = access
                }
                try await verifyUnconfirmedPush(&report)
                try await healDeferringClockSkew(&report)
                try await pushOrHold(&report)
                // The server answered this round: whatever failed before (a refused token, a
                // server that was down) is over, also while the long poll below waits.
                update { $0.phase = .waiting; $0.lastError = nil }
                let waiting = Task { var r = SyncReport(); try await self.pullAll(wait: dirty ? nil : self.options.longPoll, &r) }
                poll = waiting
                do {
                    try await waiting.value
                } catch where waiting.isCancelled && !Task.isCancelled {
                    // Woken by a local commit: push it.
                }
                poll = nil
                failures = 0
                refusals = 0
                update { $0.lastError = nil }
            } catch let error as SyncError where error.code == .unauthorized {
                // The transport already asked the provider for a fresh token once, and the server
                // refused it too: waiting is all that helps (until the provider has a working
                // token), and the app is told it is a sign-in problem, not a network one.
                if Task.isCancelled { break }
                failures += 1
                refusals += 1
                update { $0.phase = .unauthorized; $0.lastError = error }
                try? await options.clock.sleep(for: backoff(refusals, retryAfter: nil,
                                                            initial: options.unauthorizedBackoff, cap: options.maxUnauthorizedBackoff))
            } catch let error as SyncError {
                if Task.isCancelled { break }
                failures += 1
                update { $0.phase = .backingOff; $0.lastError = error }
                try? await options.clock.sleep(for: backoff(failures, retryAfter: error.retryAfter))
            } catch {
                if Task.isCancelled { break }
                failures += 1
                try? await options.clock.sleep(for: backoff(failures, retryAfter: nil))
            }
        }
    }

    // MARK: Push and pull

    /// The store's own transactions the server has not acknowledged, as stored: the store reads
    /// only those entries (it knows where its own transactions are), so a push costs what changed.
    private func unpushed() async throws -> [PendingTransaction] {
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
    private func unpushedEdits() async throws -> [UInt64: Set<ObjectID>] {
        let store = self.store
        let acknowledged = cursor.replica == store.replicaID ? cursor.acknowledged : 0
        do {
            return try await BlockingIO.run { try store.unpushedEdits(after: acknowledged) }
        } catch {
            throw SyncError(.store, "cannot read the store's log: \(error)")
        }
    }

    /// Counts the status's pending edits from the store.
    private func refreshPending() async throws {
        let count = try await unpushedEdits().count
        update { $0.pending = count }
    }

    /// Whether the caller may push to the zone, as the server last said.
    private var canPush = true
    /// The server's limits, as it last said.
    private var limits: ZoneAccessInfo?
    /// Whether this store has synced with the zone before (its cursor file exists): then a
    /// missing zone was deleted, and is not silently recreated.
    private var knowsZone: Bool
    /// Set by ``recreateZone()`` for the sync that recreates a deleted zone.
    private var recreating = false

    /// The zone, created when this store never synced with it; a zone this store synced with and
    /// that is gone is ``SyncError/Code/zoneDeleted``.
    private func existingZone() async throws -> ZoneAccessInfo {
        let create = !knowsZone || recreating
        do {
            let access = try await retrying { try await self.transport.ensureZone(self.zoneReference, create: create) }
            knowsZone = true
            return access
        } catch let error as SyncError where error.code == .zoneNotFound && !create && zoneReference.owner == nil {
            throw SyncError(.zoneDeleted, "zone \(zoneReference) was deleted on the server; it is recreated only when asked (SyncEngine.recreateZone(), strata sync --recreate-zone)", status: error.status)
        } catch let error as SyncError where error.code == .zoneNotFound && knowsZone {
            throw SyncError(.zoneDeleted, "zone \(zoneReference) was deleted by its owner", status: error.status)
        }
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
        recreating = true
        defer { recreating = false }
        // Everything this store holds goes back: its own transactions as events, and its whole
        // state (history compacted away here, other devices' edits) as an upload.
        cursor = cursor.startingOver(replica: store.replicaID, logID: store.identity.logID)
        try cursor.save(store: store, zone: zoneReference)
        return try await sync()
    }

    /// Pushes, unless the caller may only read the zone: then the local transactions stay
    /// pending (counted in the report and the status, with why) and sync is pull-only. A push
    /// refused as forbidden (write access revoked meanwhile) is treated the same way.
    private func pushOrHold(_ report: inout SyncReport) async throws {
        if canPush {
            do {
                try await pushAll(&report)
                update { $0.blocked = nil }
                return
            } catch let error as SyncError where error.code == .forbidden {
                canPush = false
            }
        }
        cursor.bind(to: store.replicaID)
        // Edits only: the store's record of its schema is pushed once the caller may write, but
        // a reader is not blocked by it.
        let waiting = try await unpushedEdits().count
        report.unpushable = waiting
        let reason = "user may only read zone \(zoneReference): \(waiting) local transaction(s) wait for write access"
        update { $0.pending = waiting; $0.blocked = waiting > 0 ? reason : nil }
    }

    private func pushAll(_ report: inout SyncReport) async throws {
        cursor.bind(to: store.replicaID)
        var pending = try await unpushed()
        // Which of them are edits (the status counts those; schema records go out uncounted).
        var edits = try await unpushedEdits()
        let editCount = edits.count
        update { $0.phase = .pushing; $0.pending = editCount }
        var batchLimit = max(1, options.pushBatchSize)
        var forks = 0
        var restamped = false
        while !pending.isEmpty {
            let (batch, encoded) = try nextBatch(of: pending, count: batchLimit)
            let result: PushResult
            do {
                result = try await retrying { try await self.transport.push(zone: self.zoneReference, transactions: encoded) }
            } catch let error as SyncError where error.code == .sequenceGap {
                // The server holds a different amount of our history than the cursor says (a lost
                // cursor, say): go on from what it expects.
                // (A gap always means the server holds less than the push assumed: a push over
                // sequences it holds is checked against them instead.)
                guard let expected = error.expectedSequence, expected >= 1 else { throw error }
                cursor.acknowledged = min(cursor.acknowledged, expected - 1)
                cursor.pulledBack = min(cursor.pulledBack, cursor.acknowledged)
                try cursor.save(store: store, zone: zoneReference)
                pending = try await unpushed()
                edits = try await unpushedEdits()
                // The log must still hold the sequence the server expects, else pushing again
                // would meet the same gap forever: say what is missing instead.
                if let first = pending.first?.sequences.lowerBound, first != expected {
                    throw SyncError(.store, "the server expects sequence \(expected) of replica \(store.replicaID), which this store's log no longer holds (compacted away before it was pushed); it starts again at \(first)")
                }
                continue
            } catch let error as SyncError where error.code == .tooLarge {
                // Fewer transactions per push, down to one; a single transaction the server cannot
                // take is named.
                guard batch.count > 1 else {
                    let sequences = batch.first.map { "\($0.sequences.lowerBound)...\($0.sequences.upperBound)" } ?? "?"
                    throw SyncError(.tooLarge, "the transaction of replica \(store.replicaID) with sequences \(sequences) is larger than the server accepts: \(error.message)", status: error.status)
                }
                batchLimit = max(1, batch.count / 2)
                continue
            } catch let error as SyncError where error.code == .replicaForked || error.code == .replicaNotYours {
                // Another store wrote under our replica ID (we are a copy, or restored from a
                // backup), or the replica is another user's: take a new replica ID and re-author
                // what the server does not hold. Bounded, so a confused server cannot loop us.
                guard forks < 3 else { throw error }
                forks += 1
                let kept = error.code == .replicaForked ? (error.sequence ?? 1) - 1 : cursor.acknowledged
                report.forks.append(try await fork(keepingThrough: kept, reason: .forked, restamp: false, after: error))
                pending = try await unpushed()
                edits = try await unpushedEdits()
                continue
            } catch let error as SyncError where error.code == .clockSkew {
                // Our edits are stamped ahead of the server's clock. If the device's clock agrees
                // with the server's now, they were stamped while it was wrong: re-stamp them (a
                // fork with fresh timestamps) and push. Otherwise they wait, and the caller is told.
                guard !restamped, let serverTime = error.serverTime, let maxOffset = error.maxOffset else { throw error }
                let now = options.wallClock()
                let lead = now > serverTime ? now - serverTime : serverTime - now
                guard lead <= maxOffset / 2 else { throw error }
                restamped = true
                report.forks.append(try await fork(keepingThrough: cursor.acknowledged, reason: .clockRestamp, restamp: true, after: error))
                pending = try await unpushed()
                edits = try await unpushedEdits()
                continue
            }
            // Only what this batch holds counts as acknowledged: the server's count may include
            // sequences another copy of this store pushed (with other content), which the next
            // push of ours must meet — and be refused as a fork — rather than skip.
            let batchEnd = batch.last?.sequences.upperBound ?? 0
            cursor.acknowledged = max(cursor.acknowledged, min(result.acknowledged, batchEnd))
            try cursor.save(store: store, zone: zoneReference)
            report.pushedTransactions += batch.count
            let done = batch.count
            var editsDone = 0
            for transaction in batch where edits.removeValue(forKey: transaction.position) != nil { editsDone += 1 }
            update { $0.pushed += done; $0.pending = max(0, $0.pending - editsDone) }
            pending.removeFirst(min(batch.count, pending.count))
        }
    }

    /// The next push: at most `count` transactions from the front of `pending`, and no more bytes
    /// than the server accepts in a body (it advertises the limit). A single transaction larger
    /// than that is named in a typed error rather than sent to be refused.
    private func nextBatch(of pending: [PendingTransaction], count: Int) throws -> (batch: [PendingTransaction], encoded: [[UInt8]]) {
        let maxBytes = limits?.maxPushBytes ?? .max
        var batch: [PendingTransaction] = []
        var encoded: [[UInt8]] = []
        var bytes = 0
        for transaction in pending.prefix(count) {
            let body = transaction.bytes
            // A frame is the bytes and a varint of their length (at most 10 bytes).
            let framed = body.count + 10
            if batch.isEmpty, framed > maxBytes {
                let sequences = "\(transaction.sequences.lowerBound)...\(transaction.sequences.upperBound)"
                throw SyncError(.tooLarge, "the transaction of replica \(transaction.replica) with sequences \(sequences) is \(body.count) bytes; the server accepts pushes of at most \(maxBytes) bytes, so it cannot be pushed")
            }
            if !batch.isEmpty, bytes + framed > maxBytes { break }
            batch.append(transaction)
            encoded.append(body)
            bytes += framed
        }
        return (batch, encoded)
    }

    /// Uploads the store's whole state when the zone was found to hold less than the store has
    /// seen (``SyncCursor/healPending``): the server merges it into the zone, so that what this
    /// device holds but cannot push as events — history it compacted away, other devices' edits
    /// — is back in the zone. Every other device adopts the merged state on its next pull. A
    /// device that may only read the zone keeps the heal pending until it may write.
    private func healIfNeeded(_ report: inout SyncReport) async throws {
        guard cursor.healPending, canPush else { return }
        // What the zone still holds comes first (cheap: it lost history), so that the upload
        // names the zone's end and the server can say the merged state is this store's own —
        // else the store would download the snapshot it has just sent.
        if cursor.token == nil { try await pullAll(wait: nil, &report) }
        let state: [UInt8]
        do {
            let store = self.store
            state = try await BlockingIO.run { try store.statePayload() }
        } catch {
            throw SyncError(.store, "cannot read the store's state to heal zone \(zoneReference): \(error)")
        }
        if let maxBytes = limits?.maxStateBytes, state.count > maxBytes {
            throw SyncError(.tooLarge, "the store's state is \(state.count) bytes; the server accepts states of at most \(maxBytes) bytes, so zone \(zoneReference) cannot be healed from this device")
        }
        let basis = cursor.token
        let replica = store.replicaID
        cursor.bind(to: replica)
        // Only what a server acknowledged to this store is claimed, and only what its log no
        // longer holds as events (compacted away): whatever it still holds is pushed, so that the
        // server checks it against what another copy of the store may have pushed under the same
        // sequences meanwhile — and the copy that differs forks, rather than both claiming.
        let own = store.appliedSequences().first { $0.replica == replica }?.contiguous ?? 0
        let firstInLog: UInt64?
        do {
            firstInLog = try store.firstOwnSequenceInLog()
        } catch {
            throw SyncError(.store, "cannot read the store's log to heal zone \(zoneReference): \(error)")
        }
        let claim = min(cursor.healClaim, own, firstInLog.map { $0 - 1 } ?? .max)
        var answer: StateUploadResult
        do {
            answer = try await retrying {
                try await self.transport.uploadState(zone: self.zoneReference, state: state, replica: replica, claim: claim, after: basis)
            }
        } catch let error as SyncError where error.code == .forbidden {
            canPush = false
            return
        } catch let error as SyncError where error.code == .replicaNotYours {
            // The replica is another user's in this zone: the state goes without a claim, and the
            // push that follows forks the store away from the replica (as any push of it would).
            options.logger.notice("the replica is another user's; uploading the state without a claim", metadata: ["zone": "\(zoneReference)", "error": "\(error)"])
            answer = try await retrying {
                try await self.transport.uploadState(zone: self.zoneReference, state: state, replica: nil, claim: 0, after: basis)
            }
            answer.acknowledged = 0
        }
        options.logger.notice("state uploaded to heal the zone", metadata: [
            "zone": "\(zoneReference)", "bytes": "\(state.count)", "upToDate": "\(answer.upToDate)",
        ])
        cursor.healPending = false
        cursor.healClaim = 0
        // The zone now holds this replica's history through the claim (as state where it lost
        // the events): pushes go on after it.
        cursor.acknowledged = max(cursor.acknowledged, min(answer.acknowledged, claim))
        // Up to date: this store holds the merged state. Otherwise its token is now before the
        // zone's history, so the next pull adopts the merged snapshot.
        if answer.upToDate {
            cursor.token = answer.token
            // The token fingerprints a history that holds this replica through what the server
            // answered: a later restore that loses it is answered `410 zoneRewound`.
            cursor.pulledBack = max(cursor.pulledBack, min(answer.acknowledged, cursor.acknowledged))
        }
        try cursor.save(store: store, zone: zoneReference)
        report.stateUploads += 1
        report.stateBytes += state.count
        if !answer.upToDate { try await pullAll(wait: nil, &report) }
    }

    /// ``healIfNeeded(_:)``, returning (not throwing) a refusal for the device's clock.
    @discardableResult
    private func healDeferringClockSkew(_ report: inout SyncReport) async throws -> SyncError? {
        do {
            try await healIfNeeded(&report)
            return nil
        } catch let error as SyncError where error.code == .clockSkew {
            return error
        }
    }

    /// Forks the store (see `Store.fork(keepingThrough:reason:restamp:)`), starts counting the
    /// new replica's acknowledged sequences from 0, and pulls the zone again from its start.
    private func fork(keepingThrough kept: UInt64, reason: ReplicaFork.Reason, restamp: Bool, after refusal: SyncError) async throws -> ReplicaFork {
        let old = store.replicaID
        // The other copy's transactions of the old replica may have been pulled already and
        // skipped, as duplicates of the abandoned ones under the same sequences, so the store never
        // kept them: the zone is pulled again from its start (the store skips what it has; a
        // compacted zone answers with its snapshot). The token goes first, so that a process
        // killed right after the fork still pulls again.
        cursor.token = nil
        try cursor.save(store: store, zone: zoneReference)
        let fork: ReplicaFork
        do {
            fork = try await store.fork(keepingThrough: kept, reason: reason, restamp: restamp)
        } catch {
            throw SyncError(.store, "the server answered \(refusal) and the store could not fork: \(error)")
        }
        options.logger.notice("store forked", metadata: [
            "zone": "\(zoneReference)", "reason": "\(refusal.code)", "old": "\(old)", "new": "\(fork.successor)",
            "keptThrough": "\(kept)", "reauthored": "\(fork.reauthored)",
        ])
        cursor.bind(to: store.replicaID)
        try cursor.save(store: store, zone: zoneReference)
        return fork
    }

    /// Sequences the server acknowledged that no pull has brought back (``SyncCursor/pulledBack``:
    /// a push whose pull never finished), or a cursor with no token at all, give the server nothing
    /// to answer `410 zoneRewound` to: a server restored since from a copy taken after the token
    /// but before the push would silently hold less of this replica than the cursor says, and
    /// nothing would push it again. So the server is asked how far it holds this replica; when it
    /// holds less, the sync goes on as after a rewind — everything of ours is pushed again (the
    /// server skips what it has, byte for byte) and what only the state still holds is healed by
    /// upload. (Found by the lifecycle simulation: seed 3071333369622103560 — a push acknowledged,
    /// the answer to its pull dropped, then the server rolled back to a copy whose end was where
    /// the device had pulled to; seed 5814988614578235037 — the same after an earlier pull.)
    private func verifyUnconfirmedPush(_ report: inout SyncReport) async throws {
        guard cursor.acknowledged > 0, cursor.replica == store.replicaID, cursor.token == nil || cursor.pushUnconfirmed else { return }
        let replica = store.replicaID
        let authors = try await retrying { try await self.transport.replicas(zone: self.zoneReference) }
        let held = authors.first { $0.replica == replica }?.acknowledged ?? 0
        guard held < cursor.acknowledged else { return }
        options.logger.notice("the server holds less of this replica than it acknowledged; pushing it again", metadata: [
            "zone": "\(zoneReference)", "acknowledged": "\(cursor.acknowledged)", "held": "\(held)",
        ])
        cursor.needHeal(replica: replica)
        cursor.forgetAcknowledged()
        try cursor.save(store: store, zone: zoneReference)
        report.rewinds += 1
    }

    /// Raises ``SyncCursor/pulledBack`` to the highest of this store's own sequences in a pulled
    /// page (saved with the page's token). Sequences of a replica are held without gaps, so the
    /// highest one stands for all before it.
    private func notePulledBack(_ transactions: [[UInt8]]) {
        let replica = store.replicaID
        guard cursor.replica == replica else { return }
        for bytes in transactions {
            guard let header = try? TransactionHeader(decoding: bytes), header.replica == replica, header.eventCount > 0 else { continue }
            cursor.pulledBack = max(cursor.pulledBack, header.firstSequence + header.eventCount - 1)
        }
    }

    /// Asks the server who pushed the replicas the store has events of but no author for, and
    /// records the answer in the store (for the tools: `strata log`, blame, diff).
    private func refreshAuthors(_ report: SyncReport) async {
        guard report.pulledTransactions > 0 || report.pushedTransactions > 0 else { return }
        let known = store.authors()
        let seen = store.appliedSequences().map(\.replica)
        guard seen.contains(where: { known[$0] == nil }) else { return }
        do {
            let authors = try await retrying { try await self.transport.replicas(zone: self.zoneReference) }
            var learned: [ReplicaID: String] = [:]
            for author in authors { if let user = author.user, known[author.replica] == nil { learned[author.replica] = user } }
            if !learned.isEmpty { try store.recordAuthors(learned) }
        } catch {
            // A display aid: a failure here never fails the sync.
            options.logger.debug("could not learn the zone's authors", metadata: ["error": "\(error)"])
        }
    }

    private func pullAll(wait: Duration?, _ report: inout SyncReport) async throws {
        update { $0.phase = wait == nil ? .pulling : .waiting }
        var pageWait = wait
        while true {
            let thisWait = pageWait
            let token = cursor.token
            let page: PullResult
            do {
                page = try await retrying {
                    try await self.transport.pull(zone: self.zoneReference, after: token, limit: self.options.pullLimit, wait: thisWait)
                }
            } catch let error as SyncError where error.code == .tokenExpired || error.code == .zoneReset {
                try await bootstrap(after: error, &report)
                continue
            } catch let error as SyncError where error.code == .zoneRewound && token != nil {
                // The server was restored from an older copy: everything of ours goes out again
                // (it acknowledges what it still holds, byte for byte, and appends what it lost),
                // and the zone is pulled from its start — the store skips what it has.
                options.logger.notice("the zone was rewound; pulling it from the start", metadata: ["zone": "\(zoneReference)", "error": "\(error)"])
                // What the zone lost but this store holds only as state goes back by upload.
                cursor.needHeal(replica: store.replicaID)
                cursor.token = nil
                cursor.forgetAcknowledged()
                try cursor.save(store: store, zone: zoneReference)
                report.rewinds += 1
                try await healDeferringClockSkew(&report)
                try await pushOrHold(&report)
                continue
            }
            pageWait = nil
            if !page.transactions.isEmpty {
                do {
                    // Apply first, then persist the token: a crash in between pulls the page
                    // again, and the store skips what it already has.
                    report.appliedEvents += try await store.applyRemote(encoded: page.transactions)
                } catch let error as StoreError where error.code == .corruptEvent {
                    throw SyncError(.malformedResponse, "a pulled transaction does not decode: \(error)")
                } catch {
                    throw SyncError(.store, "the store refused pulled transactions: \(error)")
                }
                report.pulledTransactions += page.transactions.count
                if cursor.pushUnconfirmed { notePulledBack(page.transactions) }
                let count = page.transactions.count
                update { $0.pulled += count }
            }
            cursor.token = page.nextToken
            try cursor.save(store: store, zone: zoneReference)
            if !page.moreComing { return }
        }
    }

    /// The server no longer holds the history after our token (it was compacted away), or the
    /// zone was deleted and recreated. Expired: adopt the zone's snapshot — merged into the store,
    /// so unpushed local edits stay and remote deletes arrive — then go on from its token and push
    /// what the server lacks. Reset: start over against the new zone and push all our history.
    private func bootstrap(after error: SyncError, _ report: inout SyncReport) async throws {
        options.logger.notice("bootstrapping", metadata: ["zone": "\(zone)", "reason": "\(error.code)"])
        if error.code == .zoneReset {
            cursor = cursor.startingOver(replica: store.replicaID, logID: store.identity.logID)
            try cursor.save(store: store, zone: zoneReference)
            canPush = try await existingZone().canPush
            try await healDeferringClockSkew(&report)
            try await pushOrHold(&report)
            return
        }
        guard let snapshot = try await retrying({ try await self.transport.snapshot(zone: self.zoneReference) }) else {
            // The server says the history is gone but serves nothing that replaces it: pulling
            // again would be refused the same way, and starting past it would miss it.
            throw SyncError(.tokenExpired, "zone \(zoneReference) no longer holds the history after the token and serves no snapshot of it: \(error.message)", status: error.status)
        }
        do {
            try await store.adoptSnapshot(snapshot.payload, origin: "zone \(zoneReference) snapshot at \(snapshot.token) (\(error.code))")
        } catch {
            throw SyncError(.store, "the store refused the zone's snapshot: \(error)")
        }
        report.bootstraps += 1
        // What of ours the snapshot holds; anything later is pushed again (the server skips what
        // it already has).
        let held = (try? ProjectionBuilder(snapshot: snapshot.payload).contiguousSequences()[store.replicaID]) ?? nil
        // A pending heal (and what it claims) survives the bootstrap: the upload still has to go.
        cursor = SyncCursor(token: snapshot.token, acknowledged: min(cursor.acknowledged, held ?? 0), replica: store.replicaID,
                            logID: store.identity.logID, healPending: cursor.healPending,
                            healClaim: cursor.replica == store.replicaID ? cursor.healClaim : 0)
        try cursor.save(store: store, zone: zoneReference)
        // A pending heal pushes after its upload (which says how far this replica goes).
        if !cursor.healPending { try await pushOrHold(&report) }
    }

    // MARK: Retries

    /// Runs `body`, retrying transient failures with exponential backoff and jitter (and the
    /// server's Retry-After when it gives one).
    private func retrying<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as SyncError where error.isTransient && attempt < options.maxRetries {
                attempt += 1
                options.logger.debug("retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
                update { $0.phase = .backingOff; $0.lastError = error }
                try await options.clock.sleep(for: backoff(attempt, retryAfter: error.retryAfter))
            }
        }
    }

    private func backoff(_ attempt: Int, retryAfter: Double?) -> Duration {
        backoff(attempt, retryAfter: retryAfter, initial: options.initialBackoff, cap: options.maxBackoff)
    }

    private func backoff(_ attempt: Int, retryAfter: Double?, initial: Duration, cap: Duration) -> Duration {
        if let retryAfter { return .milliseconds(Int(retryAfter * 1000)) }
        let base = initial * Int(1 << min(max(attempt, 1) - 1, 16))
        let capped = min(base, cap)
        // Full jitter: anywhere between half and all of the capped delay.
        let millis = Double(capped.components.seconds) * 1000 + Double(capped.components.attoseconds) / 1e15
        return .milliseconds(Int(millis * min(1, max(0.5, options.jitter()))))
    }
}
