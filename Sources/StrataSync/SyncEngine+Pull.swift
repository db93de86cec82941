@_spi(StrataInternals) import Strata
import StrataCore
import Logging
import StrataProtocol

/// Pulling: pages of the zone's log applied to the store, and what a refusal leads to (decided by
/// the ``SyncStateMachine``): a snapshot bootstrap for an expired token, starting over against a
/// recreated zone, a rewind against a server restored from a backup.
extension SyncEngine {
    func pullAll(wait: Duration?, _ report: inout SyncReport) async throws {
        // The page after the one being applied, already asked for (see `PullReadAhead`). Ended
        // — and waited for — before the pull returns or throws: no request of the engine's
        // outlives its sync (the app may stop the engine, or sign out, right after).
        var ahead: PullReadAhead?
        do {
            try await pullPages(wait: wait, ahead: &ahead, &report)
        } catch {
            await ahead?.drop()
            throw error
        }
        await ahead?.drop()
    }

    private func pullPages(wait: Duration?, ahead: inout PullReadAhead?, _ report: inout SyncReport) async throws {
        pullFinished = false
        update { $0.phase = wait == nil ? .pulling : .waiting }
        var pageWait = wait
        while true {
            let thisWait = pageWait
            let token = cursor.token
            let request = SyncStateMachine.Request.pull(fromToken: token != nil)
            let page: PullResult
            // Used only when it is the request this pull would send: after the token the cursor
            // is at now, for this replica and mask. (Only the page applied last sets it, and
            // nothing moves the cursor between there and here; the check says so rather than
            // relying on it.)
            let readAhead = thisWait == nil ? ahead.flatMap { $0.continues(after: token, replica: store.replicaID, mask: options.downloadMask) ? $0 : nil } : nil
            if readAhead == nil, let stale = ahead { await stale.drop() }
            // Kept until answered, so that a throw before its answer is taken still ends it.
            ahead = readAhead
            // Continuous mode's long poll gives up its turn while it waits, so that a local
            // commit is pushed meanwhile (see `longPoll()`); it takes the turn again to use the
            // answer.
            let turn = thisWait == nil ? nil : pollTurn
            turn?.leave()
            let reply: Reply<PullResult>
            do {
                reply = try await ask(request, {
                    if let page = try await readAhead?.take() { return page }
                    return try await self.transport.pull(zone: self.zoneReference, after: token, limit: self.options.pullLimit, wait: thisWait,
                                                         omitting: self.options.downloadMask, replica: self.store.replicaID)
                })
                ahead = nil
                await turn?.enter()
            } catch {
                await turn?.enter()
                throw error
            }
            // A push meanwhile may have started the zone over (a new token, or none): the answer
            // is of what the cursor no longer follows. Asked again, without waiting.
            if turn != nil, cursor.token != token {
                pageWait = nil
                continue
            }
            switch reply {
            case .answered(let answer):
                page = answer
            case .redirected(.bootstrapFromSnapshot, let refusal):
                try await bootstrap(after: refusal, &report)
                continue
            case .redirected(.startOver, let refusal):
                try await startOver(after: refusal, &report)
                continue
            case .redirected(.rewind, let refusal):
                try await rewind(after: refusal, &report)
                continue
            case .redirected(_, let refusal):
                throw refusal
            }
            pageWait = nil
            // More is coming: ask for it now, so that it downloads while this page is applied.
            if page.moreComing && options.pullReadAhead {
                ahead = askAhead(after: page.nextToken)
            }
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
                let behind = noteClock(page.transactions)
                update { $0.pulled += count; $0.clockBehind = behind }
            }
            cursor.token = page.nextToken
            try cursor.save(store: store, zone: zoneReference)
            if next(after: request, answered: .pulled(moreComing: page.moreComing)) == .done {
                pullFinished = true
                return
            }
        }
    }

    /// Asks for the page after `token` now, without waiting (see ``PullReadAhead``).
    func askAhead(after token: String) -> PullReadAhead {
        let (transport, zone, limit, mask, replica) = (transport, zoneReference, options.pullLimit, options.downloadMask, store.replicaID)
        return PullReadAhead(after: token, replica: replica, mask: mask) {
            try await transport.pull(zone: zone, after: token, limit: limit, wait: nil, omitting: mask, replica: replica)
        }
    }

    /// The server no longer holds the history after our token (it was compacted away): adopt the
    /// zone's snapshot — merged into the store, so unpushed local edits stay and remote deletes
    /// arrive — then go on from its token and push what the server lacks.
    func bootstrap(after error: SyncError, _ report: inout SyncReport) async throws {
        // Not worth downloading a snapshot a shared store would refuse to adopt.
        guard store.sharing == .exclusive else {
            throw SyncError(.exclusiveAccessRequired, "the zone's history this store needs has expired (\(error.code)): adopting the zone's snapshot needs the store opened exclusively (it is shared by processes); close it everywhere, open it exclusively and sync once")
        }
        options.logger.notice("bootstrapping", metadata: ["zone": "\(zone)", "reason": "\(error.code)"])
        let request = SyncStateMachine.Request.snapshot(reason: error)
        let answer: ZoneSnapshotPayload?
        switch try await ask(request, { try await self.transport.snapshot(zone: self.zoneReference, omitting: self.options.downloadMask) }) {
        case .answered(let snapshot): answer = snapshot
        case .redirected(_, let refusal): throw refusal
        }
        // Without a snapshot nothing replaces the history: the machine stops with a typed error.
        if case .stop(let refusal) = next(after: request, answered: .snapshot(found: answer != nil)) { throw refusal }
        guard let snapshot = answer else { throw error }
        do {
            try await store.adoptSnapshot(snapshot.payload, origin: "zone \(zoneReference) snapshot at \(snapshot.token) (\(error.code))")
        } catch let refusal as StoreError where refusal.code == .exclusiveAccessRequired {
            throw SyncError(.exclusiveAccessRequired, "the zone's history this store needs has expired (\(error.code)): adopting the zone's snapshot needs the store opened exclusively (it is shared by processes); close it everywhere, open it exclusively and sync once")
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
        if machine.pushesAfterBootstrap(cursorFacts) { try await pushOrHold(&report) }
    }

    /// The zone was deleted and recreated: when the new life continues the one this store
    /// synced with (its owner's device recreated it with ``recreateZone()``), start over against
    /// it and push all our history; otherwise it is a new zone, and what this store holds of the
    /// deleted one stays out of it: ``SyncError/Code/zoneDeleted``.
    func startOver(after error: SyncError, _ report: inout SyncReport) async throws {
        let access = try await existingZone()
        try requireContinuedLife(access, status: error.status)
        options.logger.notice("bootstrapping", metadata: ["zone": "\(zone)", "reason": "\(error.code)"])
        cursor = cursor.startingOver(replica: store.replicaID, logID: store.identity.logID)
        cursor.lineage = access.lineage
        cursor.life = access.epoch
        try cursor.save(store: store, zone: zoneReference)
        canPush = access.canPush
        try await healOrDefer(&report)
        try await pushOrHold(&report)
    }

    /// The server was restored from an older copy: everything of ours goes out again (it
    /// acknowledges what it still holds, byte for byte, and appends what it lost), and the zone is
    /// pulled from its start — the store skips what it has.
    func rewind(after error: SyncError, _ report: inout SyncReport) async throws {
        options.logger.notice("the zone was rewound; pulling it from the start", metadata: ["zone": "\(zoneReference)", "error": "\(error)"])
        // What the zone lost but this store holds only as state goes back by upload.
        cursor.needHeal(replica: store.replicaID)
        cursor.token = nil
        cursor.forgetAcknowledged()
        try cursor.save(store: store, zone: zoneReference)
        report.rewinds += 1
        try await healOrDefer(&report)
        try await pushOrHold(&report)
    }

    /// Raises ``SyncCursor/pulledBack`` to the highest of this store's own sequences in a pulled
    /// page (saved with the page's token). Sequences of a replica are held without gaps, so the
    /// highest one stands for all before it.
    func notePulledBack(_ transactions: [[UInt8]]) {
        let replica = store.replicaID
        guard cursor.replica == replica else { return }
        for bytes in transactions {
            guard let header = try? TransactionHeader(decoding: bytes), header.replica == replica, header.eventCount > 0 else { continue }
            cursor.pulledBack = max(cursor.pulledBack, header.firstSequence + header.eventCount - 1)
        }
    }

    /// Refuses to go on into a life of the zone that does not continue the one this store's
    /// token is of (a zone deleted and created again as a new zone): ``SyncError/Code/zoneDeleted``.
    func requireContinuedLife(_ access: ZoneAccessInfo, status: Int?) throws {
        // A transport that does not say the zone's epoch cannot tell lives apart: the zone is
        // taken as continuing (what every engine did before zones had lives).
        guard !recreating, let epoch = access.epoch, let previous = cursor.lifeEpoch, epoch != previous,
              !access.lineage.contains(previous) else { return }
        // A life this store's own continued: the zone was restored to it (from a backup).
        if cursor.lineage.contains(epoch) { return }
        throw SyncError(.zoneDeleted, "zone \(zoneReference) was deleted and created again as a new zone since this store last synced (epoch \(previous)); what this store holds of the deleted zone is not pushed into the new one. The zone's owner can seed it with this store's contents (SyncEngine.recreateZone(), strata sync --recreate-zone); otherwise sync a new store with it",
                        status: status)
    }

    /// Checked when a sync looks the zone up, before anything is pushed: a zone in another life
    /// than this store's token (deleted and created again) is gone into only when it continues
    /// that life — then the store starts over with it (its cursor reset: everything of its own
    /// is pushed, its state uploaded, the zone pulled from its start) — and is otherwise
    /// ``SyncError/Code/zoneDeleted``. (Without this, a device of the previous life would push
    /// its history into a new zone, answered `sequenceGap` from 1; the push's own `epoch` then
    /// catches only a recreation between this look-up and the push.)
    func followLife(of access: ZoneAccessInfo) throws {
        guard let epoch = access.epoch, !recreating else { return }
        guard let previous = cursor.lifeEpoch, epoch != previous else {
            // The same life (or the first sync): remember it and what it continues (saved with
            // the next token). A recreation that reached the server is done.
            cursor.life = epoch
            cursor.continuing = nil
            if cursor.lineage != access.lineage { cursor.lineage = Array(access.lineage.prefix(64)) }
            return
        }
        try requireContinuedLife(access, status: 410)
        options.logger.notice("the zone was recreated continuing this store's life; starting over", metadata: ["zone": "\(zoneReference)"])
        cursor = cursor.startingOver(replica: store.replicaID, logID: store.identity.logID)
        cursor.lineage = access.lineage
        cursor.life = epoch
        try cursor.save(store: store, zone: zoneReference)
    }

    /// Notes the newest stamp of pulled transactions and says how far the wall clock is behind
    /// it, when by more than ``SyncOptions/clockBehindWarning`` (logged once per finding).
    func noteClock(_ transactions: [[UInt8]]) -> Duration? {
        for bytes in transactions {
            if let header = try? TransactionHeader(decoding: bytes), !header.isAdoption {
                newestPulled = max(newestPulled, header.baseHLC.milliseconds)
            }
        }
        let now = options.wallClock()
        // Saturating: the threshold is the app's, and any Duration is one.
        let seconds = options.clockBehindWarning.components.seconds
        let product = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1000)
        let warning = seconds < 0 ? 0 : (product.overflow ? UInt64.max : product.partialValue)
        guard newestPulled > now, newestPulled - now > warning else { return nil }
        let behind = Duration.milliseconds(Int64(clamping: newestPulled - now))
        if status.clockBehind == nil {
            options.logger.warning("this device's clock is behind the zone's newest change; edits stay ordered, but the device's time is wrong", metadata: [
                "zone": "\(zoneReference)", "behindMilliseconds": "\(newestPulled - now)",
            ])
        }
        return behind
    }
}
