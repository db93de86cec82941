@_spi(StrataInternals) import Strata
import Logging

/// Continuous mode for a database: a sync, then one long poll of the database's changes for
/// every zone, local commits in any zone pushed while it waits; backoff between failed rounds.
extension DatabaseSyncEngine {
    /// Keeps every zone in sync until ``stop()``. Calling it while it runs does nothing.
    public func start() {
        guard loop == nil else { return }
        stoppedWith = nil
        updateStatus { $0.stoppedWith = nil; $0.phase = .syncing }
        let commits = database.changes()
        loopNumber += 1
        let number = loopNumber
        loop = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await change in commits {
                        if case .changes(let set) = change.kind, set.origin != .remote { await self.localCommitted() }
                    }
                }
                group.addTask { await self.runRounds() }
                await group.next()
                group.cancelAll()
            }
            // Ended by itself (another user signed in): `start()` may begin it again.
            self.loopEnded(number)
        }
    }

    private func loopEnded(_ number: UInt64) {
        if loopNumber == number { loop = nil }
    }

    /// Ends continuous mode; returns once it has stopped (at once when called from inside one of
    /// its rounds, such as a `whenRemovingZone` hook: the round ends when the hook returns).
    public func stop() async {
        let task = loop
        loop = nil
        task?.cancel()
        updateStatus { $0.phase = .stopped }
        if insideRunningRound { return }
        await task?.value
        for engine in engines.values { await engine.stop() }
        // A round ending as it was cancelled may have written its phase meanwhile.
        if loop == nil { updateStatus { $0.phase = .stopped } }
    }

    /// A local commit: the next round does not wait, and while a long poll waits it is pushed.
    func localCommitted() {
        localDirty = true
        waker?.yield(())
    }

    func runRounds() async {
        var backoff = options.sync.initialBackoff
        var unauthorizedBackoff = options.sync.unauthorizedBackoff
        var first = true
        // After a round in which zones failed: the next long poll waits no longer than this, so
        // the failing zones are tried again then, while the other zones' changes still come at
        // once (a poll answers at the first change of any zone).
        var retryFailingZonesAfter: Duration?
        // After a backoff slept (shorter than a poll can wait): the failing zones are tried
        // again at once, not after the next poll's whole wait.
        var retryNow = false
        while !Task.isCancelled {
            var report = DatabaseSyncReport()
            do {
                // The first round, and one after a local commit, ask without waiting; otherwise
                // one long poll covers every zone.
                // The long poll waits outside `exclusively` (a `sync()` meanwhile goes ahead);
                // what it brings is applied inside, unless such a sync ran meanwhile.
                var polled: DatabaseChangeBatch?
                let roundsBefore = roundNumber
                // Push rounds during the poll (they apply no batch of changes).
                var pushRounds: UInt64 = 0
                if first || localDirty || retryNow {
                    first = false
                    localDirty = false
                    retryNow = false
                } else {
                    updateStatus { $0.phase = .waiting }
                    let wait = min(retryFailingZonesAfter ?? options.sync.longPoll, options.sync.longPoll)
                    polled = try await pollPushing(&report, wait: wait, pushRounds: &pushRounds)
                }
                updateStatus { $0.phase = .syncing }
                try await exclusively {
                    // Applied only if no round but its own push rounds ran while it waited (a
                    // `sync()`): that round may have re-added a zone the batch still lists as
                    // removed.
                    let changes = if let polled, roundNumber == roundsBefore + pushRounds + 1 { polled } else {
                        try await fetchChanges(after: state.token, &report)
                    }
                    try await apply(changes, &report)
                    try await syncDirtyZones(&report)
                }
                // Stopped meanwhile: the status says so, and keeps saying it.
                try Task.checkCancellation()
                roundEnded(report, failure: nil)
                unauthorizedBackoff = options.sync.unauthorizedBackoff
                if report.failures.isEmpty {
                    backoff = options.sync.initialBackoff
                    retryFailingZonesAfter = nil
                } else {
                    // A zone that keeps failing (a full disk, a default zone gone from the
                    // server) is retried less and less often, as a failed round is.
                    options.sync.logger.warning("zones failed to sync", metadata: ["zones": "\(report.failures.keys.map(\.description).sorted())"])
                    let delay = backoff * options.sync.jitter()
                    backoff = min(backoff * 2, options.sync.maxBackoff)
                    if delay >= .seconds(1) {
                        // Waited in the next long poll: the other zones do not wait with them.
                        retryFailingZonesAfter = delay
                    } else {
                        // Shorter than a poll can wait (whole seconds): slept, cut short by a
                        // local commit so that the other zones' edits go up at once.
                        retryFailingZonesAfter = nil
                        try await sleepUnlessWoken(delay)
                        retryNow = true
                    }
                }
            } catch let error as SyncError where error.code == .anotherUser {
                // Another user signed in on the device: no round can succeed until the app signs
                // the database's user in again or gives the new one a database; retrying would
                // only ask the server again and again.
                options.sync.logger.error("database sync stopped", metadata: ["error": "\(error)"])
                if !Task.isCancelled {
                    // Not running any more from this moment: `start()` right after the app
                    // sees `stoppedWith` begins it again.
                    stoppedWith = error
                    loop = nil
                    updateStatus { $0.stoppedWith = error; $0.lastError = error; $0.phase = .stopped }
                }
                return
            } catch {
                if Task.isCancelled { return }
                let failure = error as? SyncError ?? SyncError(.transport, "\(error)")
                options.sync.logger.warning("database sync round failed", metadata: ["error": "\(failure)"])
                roundEnded(report, failure: failure)
                if failure.code == .unauthorized {
                    // The credentials and a fresh token were refused: the provider is asked again
                    // only this often (the user may have signed out, or been removed).
                    try? await options.sync.clock.sleep(for: unauthorizedBackoff * options.sync.jitter())
                    unauthorizedBackoff = min(unauthorizedBackoff * 2, options.sync.maxUnauthorizedBackoff)
                } else {
                    try? await options.sync.clock.sleep(for: backoff * options.sync.jitter())
                    backoff = min(backoff * 2, options.sync.maxBackoff)
                }
            }
        }
    }

    /// Sleeps for `duration`, or until a local commit (or cancellation), whichever comes first.
    private func sleepUnlessWoken(_ duration: Duration) async throws {
        let (wakes, waker) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.waker = waker
        defer { self.waker = nil }
        if localDirty { return }
        let clock = options.sync.clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: duration) }
            group.addTask { for await _ in wakes { return } }
            await group.next()
            group.cancelAll()
        }
        try Task.checkCancellation()
    }

    /// The long poll of the database's changes, while local commits are pushed as they come (a
    /// push round of the zones with edits, on another connection): the poll is not cut short —
    /// cancelling it would close its connection, one per commit, and the changes others make
    /// meanwhile would wait for the next poll. A push lands in its zone, so the poll then answers
    /// with it (and whatever else came). `pushRounds` counts the push rounds that ran.
    ///
    /// When the poll ends — answered or failed — no push round starts any more, and one under
    /// way finishes: cancelling it would leave its answer unknown (and report its zones as
    /// failed). A push round in which a zone failed ends the poll, so that the round that
    /// follows tries the zone again and backs off as for any failing zone; a push round that
    /// throws ends it too.
    ///
    /// `nil`: run a round now, without a batch (a commit came before the poll began, or a
    /// push round's zone failed).
    private func pollPushing(_ report: inout DatabaseSyncReport, wait: Duration, pushRounds: inout UInt64) async throws -> DatabaseChangeBatch? {
        let (wakes, waker) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.waker = waker
        pollEnded = false
        defer {
            self.waker = nil
            waker.finish()
        }
        if localDirty {
            localDirty = false
            return nil
        }
        let token = state.token
        let transport = self.transport
        let pageSize = options.databaseChangesPageSize
        var polled: DatabaseChanges?
        var failure: (any Error)?
        var pushes: UInt64 = 0
        // The poll was cut short on purpose (a push round's zone failed): its error is not one.
        var roundNow = false
        await withTaskGroup(of: PollPart.self) { group in
            group.addTask {
                let part: PollPart
                do { part = .polled(try await transport.databaseChanges(after: token, limit: pageSize, wait: wait)) } catch {
                    part = .failed(error as? SyncError ?? SyncError(.transport, "\(error)"))
                }
                // Marked ended at once: a push round waiting for its turn then starts nothing.
                await self.pollHasEnded()
                return part
            }
            group.addTask {
                var rounds: UInt64 = 0
                for await _ in wakes {
                    do {
                        let outcome = try await self.pushRound()
                        // A round that took its turn counts, also one that then found the poll
                        // ended (the applied batch's check counts every turn taken).
                        if outcome != .skipped { rounds += 1 }
                        if outcome == .zoneFailed { return .pushesEnded(rounds: rounds, zoneFailed: true) }
                        if outcome == .skipped || outcome == .pollEnded { break }
                    } catch {
                        return .pushFailed(error, rounds: rounds)
                    }
                }
                return .pushesEnded(rounds: rounds, zoneFailed: false)
            }
            while let part = await group.next() {
                switch part {
                case .polled(let page):
                    // (The poll marked itself ended.) A push round under way finishes.
                    polled = page
                    waker.finish()
                case .failed(let error):
                    if !roundNow { failure = failure ?? error }
                    waker.finish()
                case .pushFailed(let error, let rounds):
                    pushes += rounds
                    failure = failure ?? error
                    group.cancelAll()
                case .pushesEnded(let rounds, let zoneFailed):
                    pushes += rounds
                    if zoneFailed, polled == nil, failure == nil {
                        roundNow = true
                        group.cancelAll()
                    }
                }
            }
        }
        pushRounds += pushes
        if let failure { throw failure }
        if roundNow { return nil }
        guard let polled else { throw CancellationError() }
        // The rest of the pages from the first one's token; the kept token moves only once
        // `apply` has taken the whole batch (a failure part way asks again from where it was).
        return try await fetchChanges(after: token, first: polled, &report)
    }

    /// A round that pushes the zones with local edits (and pulls them, as a zone's sync does),
    /// in its turn with other rounds (`exclusively`). Zones already failing are left to the
    /// rounds, which retry them on their backoff: a commit in another zone does not retry them
    /// (nor end the poll for them).
    private func pushRound() async throws -> PushRoundOutcome {
        guard !pollEnded else { return .skipped }
        var report = DatabaseSyncReport()
        var synced = false
        let ran = try await exclusively {
            guard !pollEnded else { return false }
            localDirty = false
            let failing = status.failingZones
            let zones = database.zones.filter { failing[$0] == nil && ((try? database.hasUnpushedEdits(in: $0)) ?? true) }
            synced = !zones.isEmpty
            try await syncZones(zones, &report)
            return true
        }
        guard ran else { return .pollEnded }
        // Stopped meanwhile: the status says so, and keeps saying it.
        try Task.checkCancellation()
        // (A round with nothing to push — only failing zones had edits — is not a round to report.)
        if synced { roundEnded(report, failure: nil) }
        return report.failures.isEmpty ? .pushed : .zoneFailed
    }

    private func pollHasEnded() { pollEnded = true }
}

/// What a push round during the database's long poll did.
private enum PushRoundOutcome {
    /// Not run: the poll had ended before it asked for its turn.
    case skipped
    /// It took its turn, then found the poll ended (and pushed nothing).
    case pollEnded
    case pushed
    /// A zone failed in it.
    case zoneFailed
}

/// How a part of the database's long poll ended.
private enum PollPart: Sendable {
    case polled(DatabaseChanges)
    case failed(SyncError)
    case pushFailed(any Error, rounds: UInt64)
    case pushesEnded(rounds: UInt64, zoneFailed: Bool)
}
