import Strata
import StrataCore
import Logging
import StrataProtocol

/// Continuous mode: rounds of push and long poll, a local commit cutting a waiting poll short,
/// backoffs between failed rounds. Its parts are child tasks of one task group, so that ending
/// continuous mode (``SyncEngine/stop()``, a service group's shutdown, a cancelled
/// ``SyncEngine/run()``) ends them all, and none outlives it.
extension SyncEngine {
    /// A running continuous mode.
    struct ContinuousSession {
        /// Ends it (``SyncEngine/stop()``).
        let stop: AsyncStream<Void>.Continuation
        /// Who waits for it to end.
        var ended: [CheckedContinuation<Void, Never>] = []
    }

    /// Keeps syncing: a sync, then long polls that apply changes as soon as they land (and push
    /// local commits as they happen), until ``stop()``. Errors are reported in the status and
    /// retried with backoff.
    ///
    /// For an app without a service group: this starts the one task that runs continuous mode
    /// (``run()`` runs it in the caller's task instead). Calling it while continuous mode runs
    /// does nothing.
    public func start() {
        guard let stops = beginSession() else { return }
        // The only unstructured task of the engine: `start()` returns at once by contract, so
        // something must outlive it. Everything continuous mode does is a child of this task,
        // and `stop()` ends it and waits for it.
        loop = Task { await self.syncContinuously(until: stops) }
    }

    /// Ends continuous mode (whether ``start()`` or ``run()`` began it); returns once every part
    /// of it has stopped — the long poll ended, nothing half-applied.
    public func stop() async {
        if let session {
            session.stop.yield(())
            await withCheckedContinuation { ended in
                if self.session != nil { self.session?.ended.append(ended) } else { ended.resume() }
            }
        }
        let task = loop
        loop = nil
        await task?.value
        update { $0.phase = .stopped }
    }

    /// Marks continuous mode as running; `nil` when it already runs.
    func beginSession() -> AsyncStream<Void>? {
        guard session == nil else { return nil }
        let (stops, stop) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        session = ContinuousSession(stop: stop)
        return stops
    }

    /// One part of continuous mode, as a child task of its group.
    private enum Part: Sendable {
        case commitWatcher, rounds, stopSignal
    }

    /// Continuous mode until `stops` yields (or the task is cancelled): the rounds and the watcher
    /// of local commits, as children of one group.
    func syncContinuously(until stops: AsyncStream<Void>) async {
        // Local commits cut a waiting long poll short, so they go out at once.
        let commits = store.changes()
        await withTaskGroup(of: Part.self) { group in
            group.addTask {
                for await change in commits where change.origin != .remote {
                    await self.localCommitted()
                }
                return .commitWatcher
            }
            group.addTask {
                await self.runRounds()
                return .rounds
            }
            group.addTask {
                // Ends at the first stop, or when the group is cancelled.
                for await _ in stops { break }
                return .stopSignal
            }
            // The watcher ending (the store closed its stream) leaves the rounds going; the rounds
            // end only when cancelled; the stop signal ends everything.
            while let part = await group.next() {
                if part != .commitWatcher { break }
            }
            group.cancelAll()
        }
        endSession()
    }

    /// Marks continuous mode as ended and wakes whoever waits for it.
    private func endSession() {
        guard let session else { return }
        self.session = nil
        session.stop.finish()
        update { $0.phase = .stopped }
        for waiter in session.ended { waiter.resume() }
    }

    func localCommitted() async {
        dirty = true
        pollWaker?.yield(())
        // The count is right at once, also while the server cannot be reached (the loop may be
        // backing off, and pushes nothing until it is back).
        try? await refreshPending()
    }

    /// Rounds until cancelled, backing off between failed ones as the machine says.
    func runRounds() async {
        var loopState = SyncStateMachine.LoopState()
        while !Task.isCancelled {
            loopState.knowsLimits = limits != nil
            let outcome: SyncStateMachine.RoundOutcome
            // A refusal the round waited out (an asset the server will not take): it stays the
            // status's last error between rounds, until a round goes without it.
            var waited: SyncError?
            do {
                waited = try await round(refreshingAccess: machine.refreshesAccess(loopState))
                outcome = .answered
            } catch let error as SyncError {
                outcome = .refused(error)
            } catch {
                outcome = .failed(error)
            }
            switch machine.next(after: outcome, loop: &loopState, cancelled: Task.isCancelled, environment: environment()) {
            case .nextRound:
                update { $0.lastError = waited }
            case .backOff(let delay, let phase, let lastError):
                if let phase { update { $0.phase = phase; $0.lastError = lastError } }
                try? await options.clock.sleep(for: delay)
            case .stop:
                return
            }
        }
    }

    /// One round: push what waits, then a long poll (cut short by a local commit). Returns the
    /// refusal the push waited out, if any.
    private func round(refreshingAccess: Bool) async throws -> SyncError? {
        dirty = false
        var report = SyncReport()
        try await refreshPending()
        // The caller's rights and the server's limits: on the first round and after a failure
        // (a grant may have changed, the server may have been replaced).
        if refreshingAccess {
            let access = try await existingZone()
            try followLife(of: access)
            canPush = access.canPush
            limits = access
        }
        try await verifyUnconfirmedPush(&report)
        try await healOrDefer(&report)
        // Only an asset the server will not take is deferred here (see the machine): the edits
        // wait, the status says why, and the long poll still brings everyone else's.
        let refused = try await pushOrDefer(&report, continuous: true)
        // The server answered this round: whatever failed before (a refused token, a server that
        // was down) is over, also while the long poll below waits.
        update {
            $0.phase = .waiting
            $0.lastError = refused
            if let refused { $0.blocked = "local transaction(s) wait for an asset the server did not take: \(refused)" }
        }
        try await longPoll()
        return refused
    }

    /// A pull that waits for changes — none when a local commit came since the round began —
    /// until it has them, or until a local commit cuts it short (then the round ends answered,
    /// and the next pushes the commit). Both are children of one group.
    private func longPoll() async throws {
        let wait: Duration? = dirty ? nil : options.longPoll
        // Made and stored in the same turn of the actor as `dirty` is read: a commit after it
        // reaches this poll's waker.
        let (wakes, waker) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        pollWaker = waker
        defer {
            pollWaker = nil
            waker.finish()
        }
        let pulled: Result<Void, any Error>? = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    var report = SyncReport()
                    try await self.pullAll(wait: wait, &report)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                // A local commit (or the group's cancellation) ends this child.
                for await _ in wakes { break }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        // Woken by a local commit: the round is answered and the next one pushes it. A pull
        // failing because continuous mode was stopped ends the round as cancelled.
        if case .failure(let error) = pulled, !Task.isCancelled { throw error }
    }
}
