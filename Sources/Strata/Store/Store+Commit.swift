import Synchronization
import Foundation
import StrataLog
public import StrataCore

extension Store {
    /// Runs `body` against the current objects and commits its changes atomically, as one log
    /// record. A thrown error rolls everything back and nothing is written.
    ///
    /// Returns once the commit is as durable as the store's ``StoreOptions/durability`` promises;
    /// observers get its changes in commit order.
    ///
    /// Runs on the caller's actor (`nonisolated(nonsending)`): called from the main actor, as
    /// SwiftUI code is, `body` may capture the caller's state without crossing an isolation
    /// boundary. The commit only waits (never blocks) for durability.
    ///
    /// - Throws: what `body` throws, or `StoreError`.
    @discardableResult
    nonisolated(nonsending)
    public func transaction<T: Sendable>(_ body: (Transaction) throws -> T) async throws -> T {
        try await commit(body)
    }

    nonisolated(nonsending)
    func commit<T: Sendable>(_ body: (Transaction) throws -> T) async throws -> T {
        let (value, waiter) = try await locked { core, turn -> (T, DurabilityWaiter?) in
            if let failure = core.failure { throw failure }
            if core.closed { throw StoreError(.storeFailed, "the store is closed") }
            let projection = core.projection
            projection.beginBatch()
            let tx = Transaction(core: core)
            let value: T
            let bytes: [UInt8]
            do {
                value = try body(tx)
                if tx.eventCount == 0 {
                    projection.rollbackBatch()
                    return (value, nil)
                }
                bytes = tx.encoder.finish(firstSequence: core.nextSequence)
                assert(bytes == (try? EventCodec.decode(bytes, position: nil)).map(EventCodec.encode),
                       "internal: a transaction's incremental encoding differs from its events' encoding")
                guard bytes.count <= log.options.maxEntrySize else {
                    throw StoreError(.invalidArgument, "the transaction encodes to \(bytes.count) bytes; the limit is \(log.options.maxEntrySize)")
                }
            } catch {
                projection.rollbackBatch()
                throw error
            }
            let changes = projection.commitBatch(report: hasObservers)
            core.nextSequence += UInt64(tx.eventCount)
            let waiter = try submit([bytes], origin: .local, changes: changes, core: core, turn: turn)
            return (value, waiter)
        }
        try await waiter?.wait()
        return value
    }

    /// Applies transactions from other replicas (what the sync engine pulls) under the merge rule.
    /// Events already applied are skipped; the new ones are stored in the log as one record, so
    /// the batch is all or nothing. Returns the number of events newly applied.
    ///
    /// A schema among them (another app version's) is merged into ``schema`` at once: this
    /// store's later inserts fill in that version's attributes with their defaults, and reads
    /// give objects that lack one its default.
    @discardableResult
    @_spi(StrataInternals)
    public func applyRemote(_ transactions: [TransactionRecord]) async throws -> Int {
        try await applyRemote(encoded: transactions.map { EventCodec.encode($0) })
    }

    /// Applies transactions in their binary encoding (as sync receives them): decoded once into
    /// tables, applied with names interned once per transaction, and stored as received.
    ///
    /// - Throws: `StoreError.Code.corruptEvent` (nothing applied) when one does not decode.
    @discardableResult
    @_spi(StrataInternals)
    public func applyRemote(encoded transactions: [[UInt8]]) async throws -> Int {
        let decoded = try transactions.map { try EventCodec.decodeRaw($0, position: nil) }
        let (count, waiter) = try await locked { core, turn -> (Int, DurabilityWaiter?) in
            if let failure = core.failure { throw failure }
            if core.closed { throw StoreError(.storeFailed, "the store is closed") }
            let projection = core.projection
            // Without observers nothing needs the before-images, and the only error applying can
            // raise after decoding (too many replicas) is checked first: skip the bookkeeping.
            let report = hasObservers
            let newReplicas = Set(decoded.flatMap(\.replicas)).filter { !projection.knows($0) }.count
            guard projection.replicas.count + newReplicas <= Ref.maxReplicas else {
                throw StoreError(.invalidArgument, "a store can hold events of at most \(Ref.maxReplicas) replicas")
            }
            let schemaEventsBefore = projection.schemaEvents.count
            projection.beginBatch(tracking: report)
            var fresh: [[UInt8]] = []
            var applied = 0
            for (bytes, transaction) in zip(transactions, decoded) {
                let count: Int
                do {
                    count = try projection.apply(transaction)
                } catch {
                    if report { projection.rollbackBatch() } else { projection.commitBatch(report: false) }
                    core.failure = StoreError(.storeFailed, "applying remote transactions failed part way: \(error); reopen the store")
                    throw error
                }
                if count > 0 {
                    applied += count
                    fresh.append(bytes)
                }
            }
            guard applied > 0 else {
                projection.commitBatch(report: false)  // nothing was applied
                return (0, nil)
            }
            let entries = fresh
            let changes = projection.commitBatch(report: report)
            let schemaChanged = projection.schemaEvents.count != schemaEventsBefore
            if schemaChanged {
                // Another app version's schema arrived: merged into the running one at once (as
                // opening the store would merge it), so that this app's inserts store what the
                // other version requires and reads give its attributes their defaults.
                projection.schema = projection.recordedSchema.merged(with: projection.schema)
            }
            // Keep the local clock ahead of everything applied.
            core.clock.observe(HLC(rawValue: projection.maxHLC))
            // Events of this store's own replica that it did not author here come from another copy
            // of the store (a restored backup): never author those sequences again (the server
            // then tells the copies apart, and the one that pushes second forks).
            core.nextSequence = max(core.nextSequence, projection.highestSequence(of: core.replica) + 1)
            return (applied, try submit(entries, origin: .remote, changes: changes, schemaChanged: schemaChanged, core: core, turn: turn))
        }
        try await waiter?.wait()
        return count
    }

    /// Hands committed transactions to the log — in a store shared by processes, to the turn
    /// `locked` took. The projection already holds them; if the log cannot take them, the store
    /// fails (it must be reopened, which rebuilds the projection from what is really on disk).
    func submit(_ entries: [[UInt8]], origin: ChangeSet.Origin, changes: [ObjectChange], schemaChanged: Bool = false,
                core: StoreCore, turn: LogTurn? = nil) throws -> DurabilityWaiter {
        let waiter = DurabilityWaiter()
        let timestamp = currentLogTimestamp()
        let completion: @Sendable (Result<AppendResult, LogError>) -> Void = { [weak self] result in
            switch result {
            case .success(let appended):
                self?.deliver(ChangeSet(origin: origin, positions: appended.positions, changes: changes, schemaChanged: schemaChanged))
                waiter.complete(.success(()))
            case .failure(let error):
                let failure = StoreError(.storeFailed, "a commit could not be made durable; reopen the store", logError: error)
                self?.core.withLock { $0.failure = $0.failure ?? failure }
                waiter.complete(.failure(failure))
            }
        }
        let positions: Range<UInt64>
        do {
            let logEntries = entries.map { LogEntry($0, timestamp: timestamp) }
            if let turn {
                positions = try turn.append(logEntries, completion: completion)
            } else {
                // A shared log's own submit would skip the records other processes appended:
                // every append of a shared store goes through `locked`, which applies them first.
                guard !log.isShared else {
                    throw StoreError(.storeFailed, "internal: an append to a store shared by processes outside a turn")
                }
                positions = try log.submit(logEntries, completion: completion)
            }
        } catch let error as LogError {
            let failure = StoreError(.storeFailed, "the log refused a commit; reopen the store", logError: error)
            core.failure = failure
            throw failure
        }
        // The log past the newest snapshot grew: perhaps enough for a compaction (which runs in
        // the background; this commit does not wait for it).
        for (offset, entry) in entries.enumerated() {
            guard let header = try? TransactionHeader(decoding: entry) else { continue }
            core.autoCompaction.events += Int(header.eventCount)
            // The push path finds the store's own transactions here (the replica's, whoever
            // authored them: another copy's pulled events of it are pushed back as they came).
            core.own.note(header, position: positions.lowerBound + UInt64(offset))
        }
        core.autoCompaction.bytes += entries.reduce(0) { $0 + $1.count }
        startAutoCompactionIfDue(core: core)
        return waiter
    }
}
