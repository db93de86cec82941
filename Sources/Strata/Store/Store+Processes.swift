import Logging
import Synchronization
import StrataLog
import StrataCore

/// A store that several processes open at once (`StoreSharing.processes`): an app, its widget,
/// its share extension. They share one log, one replica and one sequence of commits; each keeps
/// its own projection and follows the others' commits.
///
/// Every append happens in a turn of the shared log (`SegmentLog.withTurn(appending:_:)`), under
/// its short cross-process commit lock: the records the other processes appended since this
/// process last looked are applied to the projection first, then the transaction runs against
/// that state, takes the next sequence numbers and a clock reading after theirs, and is written
/// after them. Between commits, a watcher on the log directory (`LogWatcher`) wakes a turn that
/// only follows, so observers here see the others' commits within milliseconds.
extension Store {
    /// Runs `work` under the store's lock. In a store shared by processes, inside a turn of the
    /// log (appending, unless `appending` is false), after the other processes' new records
    /// have been applied: `work` sees the state every earlier commit left, and appends through
    /// the turn it is given. In an exclusive store the turn is `nil`.
    nonisolated(nonsending)
    func locked<R: Sendable>(appending: Bool = true, _ work: (StoreCore, LogTurn?) throws -> R) async throws -> R {
        guard log.isShared else { return try core.withLock { try work($0, nil) } }
        // One turn at a time in this process, the others waiting suspended (not blocking a
        // thread on the log's writer lock, as they would inside `withTurn`).
        await turnGate.enter()
        defer { turnGate.leave() }
        return try lockedNow(appending: appending, work)
    }

    /// `locked` inside the turn gate (or for an exclusive store).
    private func lockedNow<R: Sendable>(appending: Bool = true, _ work: (StoreCore, LogTurn?) throws -> R) throws -> R {
        guard log.isShared else { return try core.withLock { try work($0, nil) } }
        do {
            return try log.withTurn(appending: appending) { turn in
                try core.withLock { core in
                    try applyFromOtherProcesses(turn, core: core)
                    return try work(core, turn)
                }
            }
        } catch let error as LogError {
            let failure = StoreError(.storeFailed, "cannot follow the other processes' commits in \(directory); reopen the store", logError: error)
            // The log refuses appends from now on (its view may have moved past records it
            // could not return); the store says so too, rather than failing later obscurely.
            if error.code != .closed { core.withLock { $0.failure = $0.failure ?? failure } }
            throw failure
        }
    }

    /// Applies the other processes' commits (when the watcher says the log changed; call it
    /// before reading when a notification may not have arrived yet, say in a widget's timeline
    /// provider). Does nothing in a store not shared by processes.
    ///
    /// - Throws: `StoreError` when their records do not read or apply (the store then fails:
    ///   reopen it).
    public func followOtherProcesses() async throws {
        guard log.isShared else { return }
        try await locked(appending: false) { _, _ in () }
    }

    /// Starts the watcher that follows the other processes' commits as they land.
    func watchOtherProcesses() throws {
        let scheduled = followScheduled
        let watching = try LogWatcher(directory: log.directory) { [weak self] in
            // Most notifications are this process's own writes: skipped without a turn. The
            // others' are followed in a task that waits its turn with the commits (never
            // spinning on the log's writer lock against them), one at a time: notifications
            // that arrive meanwhile are coalesced into the next.
            guard let self, self.log.othersMayHaveAppended(), !scheduled.set() else { return }
            Task {
                scheduled.clear()
                do {
                    try await self.followOtherProcesses()
                } catch {
                    let closed = self.core.withLock { $0.closed }
                    if !closed {
                        self.logger.error("following the other processes' commits failed", metadata: ["store": "\(self.directory)", "error": "\(error)"])
                    }
                }
            }
        }
        watcher.withLock { $0 = watching }
        // What the others committed between this open's read of the log and the watch's start
        // notified nobody: followed once now.
        Task { [weak self] in try? await self?.followOtherProcesses() }
    }

    /// Whether other processes may open this store for writing at the same time
    /// (`StoreOptions.sharing`, as it was opened).
    public var sharing: StoreSharing { log.isShared ? .processes : .exclusive }

    /// Refuses what a store shared by processes cannot do while they run.
    func requireExclusive(_ operation: String) throws {
        guard log.isShared else { return }
        throw StoreError(.exclusiveAccessRequired, "\(operation) rewrites what every process of the store relies on: close the others and open \(directory) with StoreSharing.exclusive")
    }

    /// Applies the records other processes appended (their commits, and what their sync
    /// pulled), as an open's replay would, and hands their changes to this process's observers
    /// in log order. A record that does not apply fails the store: the turn has moved past it,
    /// so the projection would silently lack it.
    private func applyFromOtherProcesses(_ turn: LogTurn, core: StoreCore) throws {
        let entries = turn.appendedByOthers
        guard let first = entries.first, let last = entries.last else { return }
        if let failure = core.failure { throw failure }
        let projection = core.projection
        let report = hasObservers
        let schemaEventsBefore = projection.schemaEvents.count
        projection.beginBatch(tracking: report)
        var ownNewest: UInt64 = 0
        do {
            let adopted = AdoptedStates(storeDirectory: directory)
            for entry in entries {
                if AdoptionRecord.isAdoption(entry.payload) {
                    let record = try AdoptionRecord(decoding: entry.payload, position: entry.position)
                    try projection.adopt(payload: adopted.payload(for: record, position: entry.position))
                    continue
                }
                let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                if !core.identity.lineage.isEmpty, core.identity.isAbandoned(header: header, position: entry.position) { continue }
                let transaction = try EventCodec.decodeRaw(entry.payload, position: entry.position)
                if transaction.replica == core.replica {
                    // This store's own events, from another of its processes: never stamp below them.
                    for event in transaction.events where event.hlc > ownNewest { ownNewest = event.hlc }
                }
                _ = try projection.apply(transaction)
                // Not counted towards this process's automatic compaction: the process that
                // committed it counts it, so that the processes do not all compact the same history.
                core.own.note(header, position: entry.position)
            }
        } catch {
            if report { projection.rollbackBatch() } else { projection.commitBatch(report: false) }
            let failure = StoreError(.storeFailed, "another process's commits at log positions \(first.position)..\(last.position) do not apply: \(error); reopen the store")
            core.failure = failure
            throw failure
        }
        let changes = projection.commitBatch(report: report)
        let schemaChanged = projection.schemaEvents.count != schemaEventsBefore
        if schemaChanged {
            // Another app version's schema (the other process runs another build, or pulled one).
            projection.schema = projection.recordedSchema.merged(with: projection.schema)
        }
        // This process's next commit comes after theirs: later clock, next sequence numbers.
        core.clock.observe(HLC(rawValue: projection.maxHLC))
        core.clock.advance(past: HLC(rawValue: ownNewest))
        core.nextSequence = max(core.nextSequence, projection.highestSequence(of: core.replica) + 1)
        let set = ChangeSet(origin: .otherProcess, positions: first.position..<(last.position + 1), changes: changes, schemaChanged: schemaChanged)
        turn.afterEarlierAppends { [weak self] in self?.deliver(set) }
    }
}
