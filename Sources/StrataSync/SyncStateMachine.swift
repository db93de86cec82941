import Strata
import StrataCore
import StrataProtocol

/// Every decision of the sync engine, as a pure function of what the engine was doing and what it
/// was answered: the engine actor asks one request, hands the answer here, and performs the
/// action it gets back (push, pull, fork, heal, bootstrap, back off, stop with a typed error). No
/// decision is left in the actor, so a table can state — and the tests check — what every
/// protocol code, transport failure and success leads to.
///
/// The model is PostgresNIO's `ConnectionStateMachine`: values in, actions out, no I/O. What the
/// engine's state would otherwise decide implicitly (retry counts, how many forks a push already
/// made, whether the zone is known) is part of the input.
///
/// ```swift
/// let machine = SyncStateMachine(zone: ZoneReference("notes"), policy: .init(options))
/// switch machine.next(after: .init(.pull(fromToken: true)), answered: .refused(error), environment: .init(now: 0, jitter: 1)) {
/// case .bootstrapFromSnapshot: …
/// }
/// ```
struct SyncStateMachine: Sendable {
    /// The options decisions read.
    struct Policy: Sendable, Hashable {
        var maxRetries: Int
        var initialBackoff: Duration
        var maxBackoff: Duration
        var unauthorizedBackoff: Duration
        var maxUnauthorizedBackoff: Duration

        init(maxRetries: Int = 6, initialBackoff: Duration = .milliseconds(100), maxBackoff: Duration = .seconds(10),
             unauthorizedBackoff: Duration = .seconds(2), maxUnauthorizedBackoff: Duration = .seconds(120)) {
            self.maxRetries = maxRetries
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.unauthorizedBackoff = unauthorizedBackoff
            self.maxUnauthorizedBackoff = maxUnauthorizedBackoff
        }

        init(_ options: SyncOptions) {
            self.init(maxRetries: options.maxRetries, initialBackoff: options.initialBackoff, maxBackoff: options.maxBackoff,
                      unauthorizedBackoff: options.unauthorizedBackoff, maxUnauthorizedBackoff: options.maxUnauthorizedBackoff)
        }
    }

    /// What the engine reads from outside at the moment of a decision: the device's wall clock
    /// (for a refusal for clock skew) and the jitter of a backoff, both injected by tests.
    struct Environment: Sendable, Hashable {
        /// Milliseconds since 1970 (``SyncOptions/wallClock``).
        var now: UInt64
        /// The fraction of a capped backoff to wait, clamped to `0.5...1` (``SyncOptions/jitter``).
        var jitter: Double
    }

    /// A push in progress: what it has done so far in this sync.
    struct PushProgress: Sendable, Hashable {
        /// Transactions in the batch just sent.
        var batchSize: Int
        /// The sequences of the batch's first transaction (named when it alone is too large).
        var firstSequences: ClosedRange<UInt64>?
        /// The store's replica (named in errors).
        var replica: ReplicaID
        /// The highest sequence the server acknowledged to this store.
        var acknowledged: UInt64
        /// Forks this push made already (bounded, so that a confused server cannot loop the store).
        var forks = 0
        /// Whether this push re-stamped the store's edits already (once per push).
        var restamped = false
    }

    /// The request an answer is to.
    enum Request: Sendable, Hashable {
        /// The zone and the caller's rights; `create` asks for the caller's own zone to be made,
        /// `ownZone` (no owner named) and `knownZone` (this store synced with it before) tell a
        /// deleted zone from one never made.
        case ensureZone(create: Bool, ownZone: Bool, knownZone: Bool)
        /// A batch of this store's transactions.
        case push(PushProgress)
        /// A page of the zone's log, after a token (`fromToken`) or from its start.
        case pull(fromToken: Bool)
        /// The zone's snapshot, asked because a pull was refused with `reason`.
        case snapshot(reason: SyncError)
        /// The store's whole state, to heal the zone; `claimed`: with this store's replica and
        /// how far a server acknowledged it.
        case stateUpload(claimed: Bool)
        /// Who pushed the zone's replicas.
        case replicas
    }

    /// A request and how many times it was retried already.
    struct Asked: Sendable, Hashable {
        var request: Request
        var attempt: Int

        init(_ request: Request, attempt: Int = 0) {
            self.request = request
            self.attempt = attempt
        }
    }

    /// An answer, as far as decisions need it.
    enum Answer: Sendable {
        /// The zone and what the caller may do there.
        case zone(canPush: Bool)
        /// A batch was acknowledged; `remaining` transactions wait.
        case pushed(remaining: Int)
        /// A page arrived; `moreComing` when the server holds more after it.
        case pulled(moreComing: Bool)
        /// The zone's snapshot, or none (`found` false).
        case snapshot(found: Bool)
        /// The state was merged; `upToDate` when the store holds the merged state already.
        case stateUploaded(upToDate: Bool)
        /// The zone's replicas and their authors.
        case replicas
        /// A typed refusal: a protocol code from the server, or the transport's own failure
        /// (``SyncError/Code/transport``, ``SyncError/Code/untrustedServer``, …).
        case refused(SyncError)
        /// Anything else the request threw (a cancelled task: `CancellationError`).
        case failed(any Error)
    }

    /// What the engine does next.
    enum Action: Sendable, Hashable {
        /// The request is answered and its step goes on as planned (the zone is known, the
        /// replicas recorded, the snapshot adopted).
        case proceed
        /// Push the next batch.
        case pushNext
        /// Pull the next page.
        case pullNext
        /// The step is done: nothing more to push, nothing more to pull, the state merged and held.
        case done
        /// Pull what the merged state changed (the upload's answer was not up to date).
        case pullMerged
        /// Wait `delay` (phase ``SyncStatus/Phase/backingOff``, the refusal as the last error),
        /// then send the same request again.
        case retry(after: Duration)
        /// The server expects `expected` next: the push goes on from there (the server holds
        /// less of this replica than the cursor said).
        case resumePush(expected: UInt64)
        /// Fewer transactions per push.
        case splitBatch(to: Int)
        /// Take a new replica ID, keep the old one's transactions through `keepingThrough`,
        /// re-author the rest (re-stamped when `restamp`), and push again.
        case fork(keepingThrough: UInt64, reason: ReplicaFork.Reason, restamp: Bool)
        /// The caller may only read the zone: local edits wait, sync goes on pull-only.
        case holdPushes
        /// The token is older than the zone's history: adopt the zone's snapshot.
        case bootstrapFromSnapshot
        /// The zone was deleted and recreated: start over against it and push all our history.
        case startOver
        /// The server holds less than this store has seen: pull from the start, push again
        /// everything of ours, and heal what only the state holds.
        case rewind
        /// The replica is another user's: upload the state without claiming it.
        case uploadWithoutClaim
        /// The server holds less of this replica than it acknowledged: push everything of ours
        /// again and heal the zone by upload.
        case pushAgainAndHeal
        /// End the step with this typed error.
        case stop(SyncError)
        /// End the step by throwing what the request threw (a cancellation, a foreign error).
        case propagate
    }

    /// Where a sync is when a step fails: healing, or pushing (in continuous mode, or in a sync
    /// asked for once).
    enum Stage: Sendable, Hashable {
        case heal
        case push(continuous: Bool)
    }

    /// What a sync does with a step's failure.
    enum StageAction: Sendable, Hashable {
        /// Keep the error, go on with the sync (the pull still runs), and end the sync with it.
        case deferError
        /// Fail the sync (or the round) now.
        case fail
    }

    /// Continuous mode's memory between rounds.
    struct LoopState: Sendable, Hashable {
        /// Failed rounds in a row.
        var failures = 0
        /// Refusals of the credentials in a row (they back off on their own, longer schedule).
        var refusals = 0
        /// Whether the engine knows the server's limits (it asks on the first round).
        var knowsLimits = false
    }

    /// How a round of continuous mode ended.
    enum RoundOutcome: Sendable {
        /// The server answered the round (its long poll ended, or a local commit cut it short).
        case answered
        case refused(SyncError)
        case failed(any Error)
    }

    /// What continuous mode does after a round.
    enum LoopAction: Sendable, Hashable {
        /// The next round, at once.
        case nextRound
        /// Wait `delay` in `phase`, with `lastError` in the status (`nil`: the status keeps what
        /// it says), then the next round.
        case backOff(Duration, phase: SyncStatus.Phase?, lastError: SyncError?)
        /// The engine was stopped.
        case stop
    }

    /// The zone the engine syncs (named in the errors it stops with).
    let zone: ZoneReference
    let policy: Policy

    // MARK: Answers

    /// The next action after `asked` was answered with `answer`.
    func next(after asked: Asked, answered answer: Answer, environment: Environment) -> Action {
        switch answer {
        case .zone, .replicas:
            return .proceed
        case .pushed(let remaining):
            return remaining > 0 ? .pushNext : .done
        case .pulled(let moreComing):
            return moreComing ? .pullNext : .done
        case .snapshot(let found):
            guard !found else { return .proceed }
            // The server says the history is gone but serves nothing that replaces it: pulling
            // again would be refused the same way, and starting past it would miss it.
            guard case .snapshot(let reason) = asked.request else { return .done }
            return .stop(SyncError(ErrorCode.tokenExpired, "zone \(zone) no longer holds the history after the token and serves no snapshot of it: \(reason.message)", status: reason.status))
        case .stateUploaded(let upToDate):
            // Up to date: this store holds the merged state. Otherwise its token is now before
            // the zone's history, so the next pull adopts the merged snapshot.
            return upToDate ? .done : .pullMerged
        case .failed:
            return .propagate
        case .refused(let error):
            return next(after: asked, refused: error, environment: environment)
        }
    }

    private func next(after asked: Asked, refused error: SyncError, environment: Environment) -> Action {
        // Network trouble, overload and server failures are retried, whatever was asked, with a
        // growing backoff (the server's Retry-After when it gives one); then they end the step.
        if error.isTransient {
            guard asked.attempt < policy.maxRetries else { return .stop(error) }
            return .retry(after: backoff(asked.attempt + 1, retryAfter: error.retryAfter, jitter: environment.jitter))
        }
        guard let code = error.code.protocolCode else {
            // The client's own conditions (an untrusted server, a malformed answer, the store)
            // and codes of a newer server: nothing here can fix them.
            return .stop(error)
        }
        switch asked.request {
        case .ensureZone(let create, let ownZone, let knownZone):
            guard code == .zoneNotFound else { return .stop(error) }
            if !create && ownZone {
                return .stop(SyncError(.zoneDeleted, "zone \(zone) was deleted on the server; it is recreated only when asked (SyncEngine.recreateZone(), strata sync --recreate-zone)", status: error.status))
            }
            if knownZone {
                return .stop(SyncError(.zoneDeleted, "zone \(zone) was deleted by its owner, or this user may no longer read it (the server answers both alike)", status: error.status))
            }
            return .stop(error)
        case .push(let push):
            return next(after: push, refused: error, code: code, environment: environment)
        case .pull(let fromToken):
            switch code {
            case .tokenExpired: return .bootstrapFromSnapshot
            case .zoneReset: return .startOver
            // The server was restored from an older copy. Without a token there is nothing to
            // rewind from: the refusal stands.
            case .zoneRewound: return fromToken ? .rewind : .stop(error)
            default: return .stop(error)
            }
        case .stateUpload(let claimed):
            switch code {
            // Write access revoked meanwhile: the heal waits until it comes back.
            case .forbidden: return .holdPushes
            // The replica is another user's in this zone: the state goes without a claim, and the
            // push that follows forks the store away from the replica (as any push of it would).
            case .replicaNotYours where claimed: return .uploadWithoutClaim
            default: return .stop(error)
            }
        case .snapshot, .replicas:
            return .stop(error)
        }
    }

    private func next(after push: PushProgress, refused error: SyncError, code: ErrorCode, environment: Environment) -> Action {
        switch code {
        case .forbidden:
            // Write access revoked since the sync asked: treated as read-only access.
            return .holdPushes
        case .sequenceGap:
            // The server holds a different amount of our history than the cursor says (a lost
            // cursor, say): go on from what it expects. (A gap always means the server holds
            // less than the push assumed: a push over sequences it holds is checked against them.)
            guard let expected = error.expectedSequence, expected >= 1 else { return .stop(error) }
            return .resumePush(expected: expected)
        case .tooLarge:
            // Fewer transactions per push, down to one; a single transaction the server cannot
            // take is named.
            guard push.batchSize <= 1 else { return .splitBatch(to: max(1, push.batchSize / 2)) }
            let sequences = push.firstSequences.map { "\($0.lowerBound)...\($0.upperBound)" } ?? "?"
            return .stop(SyncError(ErrorCode.tooLarge, "the transaction of replica \(push.replica) with sequences \(sequences) is larger than the server accepts: \(error.message)", status: error.status))
        case .replicaForked, .replicaNotYours:
            // Another store wrote under our replica ID (we are a copy, or restored from a
            // backup), or the replica is another user's: take a new replica ID and re-author what
            // the server does not hold. Bounded, so a confused server cannot loop us.
            guard push.forks < 3 else { return .stop(error) }
            // A fork keeps what precedes the first differing sequence (a server naming sequence
            // 0, which no replica has, keeps nothing rather than wrapping around).
            let kept = code == .replicaForked ? max(error.sequence ?? 1, 1) - 1 : push.acknowledged
            return .fork(keepingThrough: kept, reason: .forked, restamp: false)
        case .clockSkew:
            // Our edits are stamped ahead of the server's clock. If the device's clock agrees
            // with the server's now, they were stamped while it was wrong: re-stamp them (a fork
            // with fresh timestamps) and push. Otherwise they wait, and the caller is told.
            guard !push.restamped, let serverTime = error.serverTime, let maxOffset = error.maxOffset else { return .stop(error) }
            let now = environment.now
            let lead = now > serverTime ? now - serverTime : serverTime - now
            guard lead <= maxOffset / 2 else { return .stop(error) }
            return .fork(keepingThrough: push.acknowledged, reason: .clockRestamp, restamp: true)
        case .zoneReset:
            // The zone was deleted and created again while the push was in flight (the server
            // took nothing of it): start over against the new zone, as a pull would.
            return .startOver
        default:
            return .stop(error)
        }
    }

    // MARK: Before a request

    /// What the engine's cursor and the server's last word say, for the decisions taken before a
    /// request is sent.
    struct CursorFacts: Sendable, Hashable {
        /// The highest sequence of this store's replica the server acknowledged.
        var acknowledged: UInt64 = 0
        /// Whether the cursor counts the store's current replica (not one it forked away from).
        var countsStoreReplica = true
        /// Whether the cursor holds a change token.
        var hasToken = true
        /// Whether a push was acknowledged that no pull has brought back yet.
        var pushUnconfirmed = false
        /// Whether the zone was found to hold less than the store has seen (a state upload is due).
        var healPending = false
        /// Whether the caller may push to the zone, as the server last said.
        var canPush = true
        /// Whether `acknowledged` was checked against the server since the cursor was read from
        /// disk (or came from the server's own answer).
        var verified = true
    }

    /// Whether a round first asks the server how far it holds this store's replica: a push the
    /// server acknowledged that no pull has confirmed (or a cursor with no token at all) gives the
    /// server nothing to answer `410 zoneRewound` to, so a server restored since would silently
    /// hold less than the cursor says. So does a cursor read from disk that no answer of the
    /// server has confirmed yet: the file is outside the store's checks, and an acknowledged count
    /// raised by hand (its checksum recomputed) would hold back this store's edits for good (a
    /// pending heal re-establishes the replica's count by itself: its upload says how far it goes).
    func verifiesAcknowledgedPush(_ facts: CursorFacts) -> Bool {
        facts.acknowledged > 0 && facts.countsStoreReplica && (!facts.hasToken || facts.pushUnconfirmed || (!facts.verified && !facts.healPending))
    }

    /// After the server said it holds the replica through `held`: when that is less than it
    /// acknowledged, everything of ours goes out again (the server skips what it has, byte for
    /// byte) and what only the state still holds is healed by upload.
    func next(afterServerHolds held: UInt64, of facts: CursorFacts) -> Action {
        held < facts.acknowledged ? .pushAgainAndHeal : .proceed
    }

    /// Whether a state upload is due now: the zone holds less than the store has seen, and the
    /// caller may write (a reader keeps the heal pending until it may).
    func heals(_ facts: CursorFacts) -> Bool { facts.healPending && facts.canPush }

    /// Whether a heal pulls first: without a token, what the zone still holds comes first (cheap:
    /// it lost history), so that the upload names the zone's end and the server can say the
    /// merged state is this store's own — else the store would download the state it just sent.
    func healPullsFirst(_ facts: CursorFacts) -> Bool { !facts.hasToken }

    /// Whether a snapshot bootstrap pushes at once: a pending heal pushes after its upload instead
    /// (which says how far this replica goes).
    func pushesAfterBootstrap(_ facts: CursorFacts) -> Bool { !facts.healPending }

    // MARK: Stages of a sync

    /// What a sync does when a stage fails with `error`: a refusal for the device's clock leaves
    /// the edits pending while the pull still runs — always for a heal (tried again after the
    /// pull; a state stamped ahead waits for the push's re-stamp), and for a push when the sync
    /// was asked for once (``SyncEngine/sync()``; continuous mode backs off instead). An asset
    /// refusal leaves them pending in continuous mode too.
    func next(after stage: Stage, failed error: SyncError) -> StageAction {
        // A remove of an add the zone does not hold yet (`unheldAdd`) waits as an edit stamped
        // ahead does: the zone may get the add (its replica pushing it again after a restore).
        // An asset the push cannot carry (one the store does not hold and the zone lacks, one
        // over the server's size or the owner's quota, one whose bytes were damaged) keeps its
        // transaction pending the same way: the device still receives everyone else's edits.
        let assetRefusal = error.code == .assetMissing || error.code == .assetMismatch
        guard error.code == .clockSkew || error.code == .unheldAdd || assetRefusal else { return .fail }
        switch stage {
        case .heal: return .deferError
        // Continuous mode backs off from a clock refusal (the clock may be set right soon), but
        // an asset the server will not take may never go: its round goes on to the long poll,
        // so the device keeps receiving everyone's edits while its own wait.
        case .push(let continuous): return continuous && !assetRefusal ? .fail : .deferError
        }
    }

    /// The status a sync ends with: idle, or unauthorized when the server refused the
    /// credentials (and the fresh token after them), with the error it failed with.
    func status(afterSyncFailing error: SyncError?) -> (phase: SyncStatus.Phase, lastError: SyncError?) {
        guard let error else { return (.idle, nil) }
        return (error.code == .unauthorized ? .unauthorized : error.code == .schemaTooOld ? .updateRequired : .idle, error)
    }

    // MARK: Continuous mode

    /// Whether a round asks the server for the caller's rights and limits first: on the first
    /// round and after a failure (a grant may have changed, the server may have been replaced).
    func refreshesAccess(_ loop: LoopState) -> Bool { !loop.knowsLimits || loop.failures > 0 }

    /// What continuous mode does after a round ended with `outcome`, `cancelled` when the engine
    /// was stopped meanwhile.
    func next(after outcome: RoundOutcome, loop: inout LoopState, cancelled: Bool, environment: Environment) -> LoopAction {
        if cancelled { return .stop }
        switch outcome {
        case .answered:
            loop.failures = 0
            loop.refusals = 0
            return .nextRound
        case .refused(let error) where error.code == .unauthorized || error.code == .schemaTooOld:
            // Refused credentials (the transport already asked the provider for a fresh token
            // once, and the server refused it too), or an app too old for the zone: waiting is
            // all that helps — a working token, an app update, the owner lowering the minimum —
            // so it is asked again rarely, and the app is told which it is, not a network problem.
            loop.failures += 1
            loop.refusals += 1
            let delay = backoff(loop.refusals, retryAfter: nil, initial: policy.unauthorizedBackoff, cap: policy.maxUnauthorizedBackoff,
                                jitter: environment.jitter)
            return .backOff(delay, phase: error.code == .unauthorized ? .unauthorized : .updateRequired, lastError: error)
        case .refused(let error):
            loop.failures += 1
            return .backOff(backoff(loop.failures, retryAfter: error.retryAfter, jitter: environment.jitter), phase: .backingOff, lastError: error)
        case .failed:
            loop.failures += 1
            return .backOff(backoff(loop.failures, retryAfter: nil, jitter: environment.jitter), phase: nil, lastError: nil)
        }
    }

    // MARK: Backoff

    /// The longest Retry-After (seconds) the engine honours.
    static let longestRetryAfter: Double = 3600

    /// The wait before try `attempt` (from 1): the server's Retry-After when it gave one, else
    /// exponential from the initial backoff, capped, with jitter.
    func backoff(_ attempt: Int, retryAfter: Double?, jitter: Double) -> Duration {
        backoff(attempt, retryAfter: retryAfter, initial: policy.initialBackoff, cap: policy.maxBackoff, jitter: jitter)
    }

    private func backoff(_ attempt: Int, retryAfter: Double?, initial: Duration, cap: Duration, jitter: Double) -> Duration {
        // The server's word is taken when it is a number of seconds this side of an hour: it
        // comes from the network, and a `nan` or `1e300` must neither crash the conversion nor
        // park the engine for ever.
        // At least the initial backoff: a proxy that answers every request with `Retry-After: 0`
        // must not make continuous mode spin.
        if let retryAfter, retryAfter.isFinite, retryAfter >= 0 {
            return max(.milliseconds(Int(min(retryAfter, Self.longestRetryAfter) * 1000)), initial)
        }
        let base = initial * Int(1 << min(max(attempt, 1) - 1, 16))
        let capped = min(base, cap)
        // Full jitter: anywhere between half and all of the capped delay.
        let millis = Double(capped.components.seconds) * 1000 + Double(capped.components.attoseconds) / 1e15
        return .milliseconds(Int(millis * min(1, max(0.5, jitter))))
    }
}
