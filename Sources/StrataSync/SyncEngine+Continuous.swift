import Strata
import StrataCore
import Logging
import StrataProtocol

/// Continuous mode: rounds of push and long poll, local commits pushed while the poll waits,
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
        // Local commits go out at once, also while a long poll waits.
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

    /// One round: push what waits, then a long poll (local commits pushed while it waits). Returns the
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
    /// while local commits are pushed as they come, on a second connection. The poll is not cut
    /// short by a commit: cancelling an HTTP request closes its connection, so a device committing
    /// every few seconds would open a connection (and make the server tear one down) per commit,
    /// and the changes others push meanwhile would wait for the new poll. The push lands in the
    /// zone, so the poll then answers with it (and whatever else came), and the round ends.
    ///
    /// The push and the processing of the poll's answer both read and write the cursor and the
    /// store, and the actor interleaves them at every `await`: they take turns (an `AsyncGate`,
    /// first come first served, not cancellable — each holder ends soon once cancelled), and the
    /// poll gives up its turn only while its request waits.
    ///
    /// When the poll ends — answered or failed — no push starts any more (one waiting for its
    /// turn gives up; the round that follows pushes it), and a push under way finishes:
    /// cancelling it would leave its answer unknown. Only a push failing cuts the poll short.
    private func longPoll() async throws {
        let wait: Duration? = dirty ? nil : options.longPoll
        // Made and stored in the same turn of the actor as `dirty` is read: a commit after it
        // reaches this poll's pusher.
        let (wakes, waker) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let turn = AsyncGate()
        pollWaker = waker
        pollTurn = turn
        pollEnded = false
        defer {
            pollWaker = nil
            pollTurn = nil
            waker.finish()
        }
        var failure: (any Error)?
        await withTaskGroup(of: PollPart.self) { group in
            group.addTask {
                await turn.enter()
                var failure: (any Error)?
                do {
                    var report = SyncReport()
                    try await self.pullAll(wait: wait, &report)
                } catch {
                    failure = error
                }
                // Marked ended before the turn is given up: a pusher waiting for it then sees
                // that the poll has ended and starts nothing.
                await self.pollHasEnded()
                turn.leave()
                return .polled(failure)
            }
            group.addTask {
                for await _ in wakes {
                    await turn.enter()
                    defer { turn.leave() }
                    do { try await self.pushWhilePolling() } catch { return .pushed(error) }
                }
                return .pushed(nil)
            }
            while let part = await group.next() {
                switch part {
                case .polled(let error):
                    // (The poll marked itself ended.) A push under way finishes.
                    failure = failure ?? error
                    waker.finish()
                case .pushed(let error?):
                    failure = failure ?? error
                    group.cancelAll()
                case .pushed(nil):
                    break
                }
            }
        }
        // A pull or push failing because continuous mode was stopped ends the round as cancelled.
        if let failure, !Task.isCancelled { throw failure }
    }

    private func pollHasEnded() { pollEnded = true }

    /// How a part of the long poll ended: with the error it failed with, if any.
    private enum PollPart: Sendable {
        case polled((any Error)?)
        case pushed((any Error)?)
    }

    /// A push of local commits while the long poll waits (what a round's push does, without the
    /// checks the round made before its poll); nothing once the poll has ended.
    private func pushWhilePolling() async throws {
        guard !pollEnded else { return }
        var report = SyncReport()
        let refused = try await pushOrDefer(&report, continuous: true)
        // Back to waiting (the push set `pushing`), unless the poll has ended meanwhile and
        // its phase is the round's now.
        let stillWaiting = !pollEnded
        update {
            if stillWaiting { $0.phase = .waiting }
            $0.lastError = refused
            if let refused { $0.blocked = "local transaction(s) wait for an asset the server did not take: \(refused)" }
        }
    }
}
