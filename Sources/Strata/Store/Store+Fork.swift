import Foundation
import Logging
import StrataLog
import Synchronization
public import StrataCore

extension Store {
    /// Gives the store a new replica ID and re-authors under it every transaction of the current
    /// replica with a sequence above `keptThrough` (in log order, same effects, same HLCs unless
    /// `restamp`), records the lineage durably, and returns it.
    ///
    /// What sync calls when the server refuses a (replica, sequence) it holds with other content
    /// (`409 replicaForked`): another copy of this store authored the same pairs. The abandoned
    /// transactions (those of the old replica whose last sequence is above `keptThrough`; a
    /// transaction is re-authored whole, so its atomicity survives) become transactions of the
    /// new replica with sequences 1, 2, …; a remove that names one of their adds names the
    /// re-authored add instead (and, for an add at or below `keptThrough`, both). The projection
    /// is rebuilt without the abandoned transactions and with the re-authored ones, so the other
    /// copy's events of the old replica, pulled later, apply normally.
    ///
    /// Crash safety: `store.json` records the lineage entry first (with the log position the
    /// re-authored record goes to), then the re-authored transactions are appended as one record;
    /// an open that finds the record missing finishes the fork (see `finishInterruptedFork`).
    /// Finally a snapshot is written past the fork (snapshots between the first abandoned
    /// transaction and the fork still count abandoned events and are never loaded).
    ///
    /// Observers get one `ChangeSet` (origin `ChangeSet.Origin.local`) of the objects whose
    /// visible state differs afterwards — none when nothing raced and the HLCs were kept, since
    /// the re-authored events have the same effects.
    ///
    /// - Throws: `StoreError.Code.historyRetired` when abandoned transactions were retired by
    ///   compaction, or no snapshot older than the first of them covers the retired history
    ///   (nothing is changed); `StoreError.Code.clockOverflow` with `restamp` at the clock's end;
    ///   log and `store.json` errors.
    @discardableResult
    @_spi(StrataInternals)
    public func fork(keepingThrough keptThrough: UInt64, reason: ReplicaFork.Reason = .forked, restamp: Bool = false) async throws -> ReplicaFork {
        try requireExclusive("a fork")
        // The fork must read every transaction submitted before it: commits in flight are made
        // visible first, and the fork runs only when none is left (else it waits and tries again).
        while true {
            do {
                try await log.flush()
            } catch let error as LogError {
                throw StoreError(error)
            }
            let outcome = try core.withLock { core -> (ReplicaFork, DurabilityWaiter?)? in
                if let failure = core.failure { throw failure }
                if core.closed { throw StoreError(.storeFailed, "the store is closed") }
                guard log.endPosition == log.nextPosition else { return nil }
                let plan = ForkPlan(reason: reason, replica: core.replica, keptThrough: keptThrough,
                                        successor: .random(), restamp: restamp, resuming: false)
                return try perform(plan, core: core)
            }
            guard let outcome else { continue }
            let (fork, waiter) = outcome
            try await waiter?.wait()
            try await compact()
            return fork
        }
    }

    /// On open: finishes a fork whose lineage entry was written but whose re-authored record is
    /// not in the log (a crash between the two), or whose `before` lies past the log's end (the
    /// log lost its unsynced tail): the abandoned transactions are found by the entry's rule and
    /// re-authored again — deterministically, except that a re-stamping fork stamps again (its
    /// first stamps were never stored, so nothing saw them).
    func finishInterruptedFork() throws {
        try core.withLock { core in
            guard let last = core.identity.lineage.last, last.reason != .logLost else { return }
            let missing = last.reauthored > 0 && !core.projection.isApplied(EventID(replica: last.successor, sequence: last.reauthored))
            guard missing || log.nextPosition < last.before else { return }
            // It rewrites the projection and appends outside any turn: not under other processes.
            try requireExclusive("finishing an interrupted fork")
            logger.warning("finishing an interrupted fork", metadata: ["replica": "\(last.replica)", "successor": "\(last.successor)"])
            let plan = ForkPlan(reason: last.reason, replica: last.replica, keptThrough: last.keptThrough,
                                    successor: last.successor, restamp: last.restamped, resuming: true)
            _ = try perform(plan, core: core)
        }
    }

    /// A test hook: store directories whose forks stop after `store.json` is written and before
    /// the log append (what a crash there leaves behind).
    static let forkStopsBeforeAppend = Mutex<Set<String>>([])

    /// Does the fork under the store's lock. Nothing changes until `store.json` is written; the
    /// projection is swapped only once the log has taken the record.
    private func perform(_ plan: ForkPlan, core: StoreCore) throws -> (ReplicaFork, DurabilityWaiter?) {
        let before = log.nextPosition
        var previous = core.identity
        if plan.resuming { previous.lineage.removeLast() }
        let abandoned = try abandonedTransactions(plan, identity: previous, end: before)
        if !plan.resuming {
            try checkCoverage(abandoned, plan: plan, core: core)
        }
        let count = UInt64(abandoned.reduce(0) { $0 + $1.transaction.events.count })
        let fork = ReplicaFork(reason: plan.reason, replica: plan.replica, keptThrough: plan.keptThrough, before: before,
                               successor: plan.successor, reauthored: count, date: Store.forkDate(),
                               abandonedFrom: abandoned.first?.position ?? before, restamped: plan.restamp)
        var identity = previous
        identity.lineage.append(fork)
        identity.replicaID = plan.successor

        // The new projection, built before anything is written (it may show the fork impossible).
        var report = OpenReport()
        let projection: Projection
        do {
            projection = try Store.loadProjection(log, identity: identity, logger: logger, report: &report)
        } catch let error as StoreError where error.code == .corruptSnapshot {
            throw StoreError(.historyRetired, "cannot fork: no snapshot older than the first abandoned transaction (position \(fork.abandonedFrom)) covers the history the log retired")
        }
        // Re-stamping (the device's clock was wrong when it stamped the abandoned events): the
        // clock starts again from what the store holds without them — else it would still be as
        // far ahead as they were, and stamp the re-authored events there again.
        var clock = core.clock
        if plan.restamp {
            clock = HybridClock(now: core.clock.now, maxLead: core.clock.maxLead)
            clock.observe(HLC(rawValue: projection.maxHLC))
        }
        let reauthored = try reauthor(abandoned.map(\.transaction), plan: plan, clock: &clock)
        projection.beginBatch(tracking: false)
        for transaction in reauthored {
            for event in transaction.events { try projection.apply(event) }
        }
        projection.commitBatch(report: false)
        projection.schema = projection.recordedSchema.merged(with: core.projection.schema)
        projection.appSchema = core.projection.appSchema

        try StoreIdentityFile.write(identity, in: directory)
        // From here on `store.json` names the successor: if the append does not happen, this
        // store object must not author again under the old replica; a reopen finishes the fork.
        let changes = hasObservers ? visibleChanges(from: core.projection, to: projection, abandoned: abandoned.map(\.transaction)) : []
        var waiter: DurabilityWaiter?
        do {
            if Store.forkStopsBeforeAppend.withLock({ $0.contains(directory) }) {
                throw StoreError(.storeFailed, "test hook: the fork stopped before its log append")
            }
            // The successor's transactions are the re-authored ones, appended now.
            core.own = OwnTransactions(replica: plan.successor)
            if !reauthored.isEmpty {
                waiter = try submit(reauthored.map(EventCodec.encode), origin: .local, changes: changes, core: core)
            }
        } catch {
            core.failure = core.failure ?? StoreError(.storeFailed, "a fork was interrupted before its log append (\(error)); reopen the store to finish it")
            throw error
        }
        core.identity = identity
        core.projection = projection
        core.clock = clock
        core.nextSequence = count + 1
        return (fork, waiter)
    }

    private struct Abandoned {
        var position: UInt64
        var transaction: TransactionRecord
    }

    /// The transactions of `plan.replica` with a last sequence above `keptThrough`, in log order,
    /// below `end`, that no earlier lineage entry abandoned already.
    private func abandonedTransactions(_ plan: ForkPlan, identity: StoreIdentity, end: UInt64) throws -> [Abandoned] {
        let rule = ReplicaFork(reason: plan.reason, replica: plan.replica, keptThrough: plan.keptThrough, before: end,
                               successor: plan.successor, reauthored: 0, date: Date())
        var found: [Abandoned] = []
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries where entry.position < end {
                    let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    guard rule.abandons(header: header, position: entry.position),
                          !identity.isAbandoned(header: header, position: entry.position) else { continue }
                    found.append(Abandoned(position: entry.position, transaction: try EventCodec.decode(entry.payload, position: entry.position)))
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        return found
    }

    /// Every sequence of the old replica above `keptThrough` that the store applied must be in an
    /// abandoned transaction still in the log: otherwise compaction retired it and re-authoring
    /// would lose it.
    private func checkCoverage(_ abandoned: [Abandoned], plan: ForkPlan, core: StoreCore) throws {
        let highest = core.projection.appliedSummary().first { $0.replica == plan.replica }?.highest ?? 0
        guard highest > plan.keptThrough else { return }
        // While sync pins this replica's unpushed transactions, compaction kept every one above
        // what the server acknowledged; a fork keeps at least that much, so whatever of the
        // replica above `keptThrough` is missing from the log was never authored here — another
        // copy's events, adopted with a zone snapshot — and is not this store's to re-author.
        if core.retainsUnpushed, core.syncPins.replica == plan.replica, !core.syncPins.pins.isEmpty,
           core.syncPins.acknowledgedByAll <= plan.keptThrough {
            return
        }
        var covered = plan.keptThrough
        for range in abandoned.compactMap(\.transaction.sequences).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            guard range.lowerBound <= covered + 1 else { break }
            covered = max(covered, range.upperBound)
        }
        guard covered >= highest else {
            throw StoreError(.historyRetired, "cannot fork: events \(covered + 1)...\(highest) of replica \(plan.replica) above sequence \(plan.keptThrough) are no longer in the log (compacted); re-authoring them would lose them")
        }
    }

    /// The abandoned transactions as the successor's: sequences from 1, removes of re-authored
    /// adds remapped, HLCs kept (or fresh ones, in order, with `restamp`).
    private func reauthor(_ abandoned: [TransactionRecord], plan: ForkPlan, clock: inout HybridClock) throws -> [TransactionRecord] {
        var mapping: [UInt64: UInt64] = [:]
        var next: UInt64 = 1
        for transaction in abandoned {
            for event in transaction.events {
                mapping[event.id.sequence] = next
                next += 1
            }
        }
        var sequence: UInt64 = 0
        return try abandoned.map { transaction in
            let events = try transaction.events.map { event -> Event in
                sequence += 1
                var change = event.change
                if case .remove(let entity, let object, let relationship, let target, let adds) = change {
                    var named: [EventID] = []
                    for add in adds {
                        guard add.replica == plan.replica, let moved = mapping[add.sequence] else {
                            named.append(add)
                            continue
                        }
                        // An add at or below keptThrough also exists under the old ID (the server has it).
                        if add.sequence <= plan.keptThrough { named.append(add) }
                        named.append(EventID(replica: plan.successor, sequence: moved))
                    }
                    change = .remove(entity: entity, object: object, relationship: relationship, target: target, adds: named)
                }
                return Event(id: EventID(replica: plan.successor, sequence: sequence),
                             hlc: plan.restamp ? try clock.tick() : event.hlc, change: change)
            }
            return TransactionRecord(replica: plan.successor, events: events)
        }
    }

    /// The objects whose visible state differs between the projection before and after the fork,
    /// among those the abandoned events touched (only they can differ).
    private func visibleChanges(from old: Projection, to new: Projection, abandoned: [TransactionRecord]) -> [ObjectChange] {
        var touched = Set<ObjectID>()
        for event in abandoned.lazy.flatMap(\.events) {
            if let object = event.change.object { touched.insert(object) }
            switch event.change {
            case .add(_, _, _, let target), .remove(_, _, _, let target, _): touched.insert(target)
            default: break
            }
        }
        var changes: [ObjectChange] = []
        for id in touched.sorted() {
            let before = old.appSnapshot(id, includeToMany: true)
            let after = new.appSnapshot(id, includeToMany: true)
            guard before != after else { continue }
            switch (before, after) {
            case (nil, let after?):
                changes.append(ObjectChange(id: id, entity: after.entity, kind: .inserted, keys: []))
            case (let before?, nil):
                changes.append(ObjectChange(id: id, entity: before.entity, kind: .deleted, keys: []))
            case (let before?, let after?):
                var keys = Set(before.values.keys).union(after.values.keys).filter { before.values[$0] != after.values[$0] }
                keys.formUnion(Set(before.toMany.keys).union(after.toMany.keys).filter { before.toMany[$0] != after.toMany[$0] })
                changes.append(ObjectChange(id: id, entity: after.entity, kind: .updated, keys: keys))
            case (nil, nil):
                break
            }
        }
        return changes
    }

    /// Now, to the millisecond (what `store.json` keeps, so a read-back date is equal).
    static func forkDate() -> Date {
        Date(timeIntervalSince1970: Double(Int64(Date().timeIntervalSince1970 * 1000)) / 1000)
    }
}

/// What a fork does, whether new or being finished.
private struct ForkPlan {
    var reason: ReplicaFork.Reason
    var replica: ReplicaID
    var keptThrough: UInt64
    var successor: ReplicaID
    var restamp: Bool
    var resuming: Bool
}
