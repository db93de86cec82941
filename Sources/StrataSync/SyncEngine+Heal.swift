@_spi(StrataInternals) import Strata
import StrataCore
import Logging
import StrataLog
import StrataProtocol

/// Healing a zone that holds less than this store has seen: the state upload, the check of a
/// push no pull has confirmed, and forks of the store's replica.
extension SyncEngine {
    /// ``healIfNeeded(_:)``, returning (not throwing) a refusal the machine defers (the device's
    /// clock).
    @discardableResult
    func healOrDefer(_ report: inout SyncReport) async throws -> SyncError? {
        do {
            try await healIfNeeded(&report)
            return nil
        } catch let error as SyncError {
            switch machine.next(after: .heal, failed: error) {
            case .deferError: return error
            case .fail: throw error
            }
        }
    }

    /// Uploads the store's whole state when the zone was found to hold less than the store has
    /// seen (``SyncCursor/healPending``): the server merges it into the zone, so that what this
    /// device holds but cannot push as events — history it compacted away, other devices' edits
    /// — is back in the zone. Every other device adopts the merged state on its next pull. A
    /// device that may only read the zone keeps the heal pending until it may write.
    func healIfNeeded(_ report: inout SyncReport) async throws {
        guard machine.heals(cursorFacts) else { return }
        // What the zone still holds comes first (cheap: it lost history), so that the upload
        // names the zone's end and the server can say the merged state is this store's own —
        // else the store would download the snapshot it has just sent.
        if machine.healPullsFirst(cursorFacts) { try await pullAll(wait: nil, &report) }
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
        // A first sequence of 0 (never written, but read from disk) claims nothing rather than wrap.
        let claim = min(cursor.healClaim, own, firstInLog.map { $0 > 0 ? $0 - 1 : 0 } ?? .max)
        // The assets the state names go first, as for a push: a zone that lost its history may
        // have lost its assets' links too (a server restored from a backup).
        let named = Self.assetsNamed(byState: state)
        try await uploadAssets(named)
        var answer: StateUploadResult
        var claimed = true
        while true {
            let request = SyncStateMachine.Request.stateUpload(claimed: claimed)
            let (owner, claiming) = claimed ? (Optional(replica), claim) : (nil, 0)
            switch try await ask(request, {
                try await self.transport.uploadState(zone: self.zoneReference, state: state, replica: owner, claim: claiming, after: basis)
            }) {
            case .answered(let merged):
                answer = merged
                // The zone's snapshot names the state's assets now: they may leave the device.
                zoneKeeps(named)
                if !claimed { answer.acknowledged = 0 }
            case .redirected(.holdPushes, _):
                canPush = false
                return
            case .redirected(.uploadWithoutClaim, let refusal):
                options.logger.notice("the replica is another user's; uploading the state without a claim", metadata: ["zone": "\(zoneReference)", "error": "\(refusal)"])
                claimed = false
                continue
            case .redirected(_, let refusal):
                throw refusal
            }
            break
        }
        options.logger.notice("state uploaded to heal the zone", metadata: [
            "zone": "\(zoneReference)", "bytes": "\(state.count)", "upToDate": "\(answer.upToDate)",
        ])
        cursor.healPending = false
        cursor.healClaim = 0
        // The zone now holds this replica's history through the claim (as state where it lost
        // the events): pushes go on after it.
        cursor.acknowledged = max(cursor.acknowledged, min(answer.acknowledged, claim))
        let then = next(after: .stateUpload(claimed: claimed), answered: .stateUploaded(upToDate: answer.upToDate))
        // Up to date: this store holds the merged state. Otherwise its token is now before the
        // zone's history, so the next pull adopts the merged snapshot.
        if then == .done {
            cursor.token = answer.token
            // The token fingerprints a history that holds this replica through what the server
            // answered: a later restore that loses it is answered `410 zoneRewound`.
            cursor.pulledBack = max(cursor.pulledBack, min(answer.acknowledged, cursor.acknowledged))
        }
        try cursor.save(store: store, zone: zoneReference)
        report.stateUploads += 1
        report.stateBytes += state.count
        if then == .pullMerged { try await pullAll(wait: nil, &report) }
    }

    /// Forks the store (see `Store.fork(keepingThrough:reason:restamp:)`), starts counting the
    /// new replica's acknowledged sequences from 0, and pulls the zone again from its start.
    func fork(keepingThrough kept: UInt64, reason: ReplicaFork.Reason, restamp: Bool, after refusal: SyncError) async throws -> ReplicaFork {
        let old = store.replicaID
        // Before anything changes (the token below): a shared store cannot fork, and a cleared
        // token would make every later round pull from the start only to be refused again.
        guard store.sharing == .exclusive else {
            throw SyncError(.exclusiveAccessRequired, "the server answered \(refusal): the store must fork, which needs it opened exclusively (it is shared by processes); close it everywhere, open it exclusively and sync once")
        }
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
    func verifyUnconfirmedPush(_ report: inout SyncReport) async throws {
        guard machine.verifiesAcknowledgedPush(cursorFacts) else { return }
        let replica = store.replicaID
        let authors: [ReplicaAuthor]
        do {
            authors = try await zoneReplicas()
        } catch let error as SyncError where (error.code == SyncError.Code("notFound") || error.code == .malformedResponse)
                    && cursor.token != nil && !cursor.pushUnconfirmed {
            // Only the cursor's first-sync check asked (see `cursorVerified`), and the server
            // cannot answer it (one from before the replica list): go on unchecked rather than
            // never sync. A count raised by hand still meets the push's `sequenceGap`.
            options.logger.notice("the server cannot list the zone's replicas; the cursor goes unchecked", metadata: [
                "zone": "\(zoneReference)", "error": "\(error.code)",
            ])
            cursorVerified = true
            return
        }
        let held = authors.first { $0.replica == replica }?.acknowledged ?? 0
        cursorVerified = true
        guard machine.next(afterServerHolds: held, of: cursorFacts) == .pushAgainAndHeal else { return }
        options.logger.notice("the server holds less of this replica than it acknowledged; pushing it again", metadata: [
            "zone": "\(zoneReference)", "acknowledged": "\(cursor.acknowledged)", "held": "\(held)",
        ])
        // As after a `410 zoneRewound`: a server that holds less than it acknowledged was
        // restored (or the cursor claimed more than it was told), so the token is not believed
        // either — else the pull would meet the rewind again, and heal twice.
        cursor.needHeal(replica: replica)
        cursor.token = nil
        cursor.forgetAcknowledged()
        try cursor.save(store: store, zone: zoneReference)
        report.rewinds += 1
    }

    /// Asks the server who pushed the replicas the store has events of but no author for, and
    /// records the answer in the store (for the tools: `strata log`, blame, diff). The server
    /// names other users' replicas only to the zone's owner: in another user's zone only the
    /// store's own replica is asked about (so that a grantee does not ask after every sync).
    func refreshAuthors(_ report: SyncReport) async {
        guard report.pulledTransactions > 0 || report.pushedTransactions > 0 || report.bootstraps > 0 else { return }
        let known = store.authors()
        let seen = zoneReference.owner == nil ? store.appliedSequences().map(\.replica) : [store.replicaID]
        guard seen.contains(where: { known[$0] == nil }) else { return }
        do {
            let authors = try await zoneReplicas()
            var learned: [ReplicaID: String] = [:]
            for author in authors { if let user = author.user, known[author.replica] == nil { learned[author.replica] = user } }
            if !learned.isEmpty { try store.recordAuthors(learned) }
        } catch {
            // A display aid: a failure here never fails the sync.
            options.logger.debug("could not learn the zone's authors", metadata: ["error": "\(error)"])
        }
    }

    /// Who pushed the zone's replicas.
    func zoneReplicas() async throws -> [ReplicaAuthor] {
        switch try await ask(.replicas, { try await self.transport.replicas(zone: self.zoneReference) }) {
        case .answered(let authors): return authors
        case .redirected(_, let refusal): throw refusal
        }
    }
}
