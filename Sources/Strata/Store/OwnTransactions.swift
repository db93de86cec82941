import StrataLog
import Synchronization
public import StrataCore

/// Where the store's own transactions (of its current replica) are in its log: their sequences
/// and positions, kept under the store's lock. The push path asks it which transactions a server
/// has not acknowledged yet and reads only those entries, so that a sync costs what changed, not
/// the whole history (before, every sync read and decoded the log from position 0).
///
/// Built on open from what the open reads anyway (the replay past the snapshot) and the retained
/// part of the log before the snapshot (kept for sync: what some engine has not pushed), then
/// noted on every submit. Entries every sync engine has had acknowledged are dropped when the
/// pins move (``drop(acknowledgedThrough:)``), so memory follows what is unpushed; an engine
/// asking for less than that (a new zone, a lost cursor) reads the log instead.
struct OwnTransactions: Sendable {
    struct Entry: Sendable, Hashable {
        var first: UInt64
        var last: UInt64
        var position: UInt64
        /// The objects the transaction's events change, learned from its bytes the first time
        /// someone asks (``Store/unpushedChangeCount()``, the status of a sync engine) and kept:
        /// empty for a transaction of schema records only, which is pushed but is no edit of the
        /// user's. `nil` until then.
        var objects: Set<ObjectID>?
    }

    /// The replica whose transactions are noted.
    private(set) var replica: ReplicaID
    /// In log order.
    private(set) var entries: [Entry] = []
    /// Entries with a last sequence at or below this were dropped.
    private(set) var droppedThrough: UInt64 = 0

    init(replica: ReplicaID) {
        self.replica = replica
    }

    /// Notes the transaction at `position` when it is of ``replica`` and has events.
    mutating func note(_ header: TransactionHeader, position: UInt64) {
        guard header.replica == replica, header.eventCount > 0 else { return }
        let last = header.firstSequence + header.eventCount - 1
        guard last > droppedThrough else { return }
        entries.append(Entry(first: header.firstSequence, last: last, position: position))
    }

    /// Forgets the transactions every sync engine has had acknowledged.
    mutating func drop(acknowledgedThrough sequence: UInt64) {
        guard sequence > droppedThrough else { return }
        droppedThrough = sequence
        entries.removeAll { $0.last <= sequence }
    }

    /// The transactions with a last sequence above `acknowledged` at positions in `range`, in log
    /// order; `nil` when some may have been dropped (`acknowledged` is below what was dropped).
    func pending(after acknowledged: UInt64, in range: Range<UInt64>) -> [Entry]? {
        guard acknowledged >= droppedThrough else { return nil }
        return entries.filter { $0.last > acknowledged && range.contains($0.position) }
    }

    /// Keeps what was learned of the objects the transactions at these positions change, when
    /// they are still ``replica``'s (a fork meanwhile started another index).
    mutating func learn(_ objects: [UInt64: Set<ObjectID>], of replica: ReplicaID) {
        guard replica == self.replica, !objects.isEmpty else { return }
        for index in entries.indices where entries[index].objects == nil {
            if let learned = objects[entries[index].position] { entries[index].objects = learned }
        }
    }

    /// The objects an encoded transaction's events change (none for schema records).
    static func objects(changedBy bytes: [UInt8], position: UInt64) throws -> Set<ObjectID> {
        let decoded = try EventCodec.decodeRaw(bytes, position: position)
        var objects = Set<ObjectID>()
        for event in decoded.events where event.kind != .schema { objects.insert(event.object) }
        return objects
    }
}

/// One of the store's own transactions as stored, for a push: its bytes (local-only attributes
/// stripped), its sequences and its position in the log.
package struct PendingTransaction: Sendable, Hashable {
    package var replica: ReplicaID
    package var sequences: ClosedRange<UInt64>
    package var position: UInt64
    package var bytes: [UInt8]
}

extension Store {
    /// This store's own transactions (of its current replica) with a last sequence above
    /// `acknowledged`, in log order, as pushed: the stored bytes as they are, or — when the
    /// schema has local-only attributes — decoded, stripped of them and encoded again. Reads only
    /// those entries, unless `acknowledged` is below what every sync engine has had acknowledged
    /// (a new zone, a lost cursor): then it reads the log from its start.
    package func unpushedTransactions(after acknowledged: UInt64) throws -> [PendingTransaction] {
        let (replica, known, schema) = core.withLock { core in
            (core.replica, core.own.pending(after: acknowledged, in: log.startPosition..<log.durableEndPosition), core.projection.schema)
        }
        let strip = schema.hasLocalOnlyAttributes
        var result: [PendingTransaction] = []
        func take(_ entry: StoredEntry, _ header: TransactionHeader) throws {
            guard header.replica == replica, header.eventCount > 0 else { return }
            let last = header.firstSequence + header.eventCount - 1
            guard last > acknowledged else { return }
            var bytes = entry.payload
            if strip {
                bytes = try EventCodec.decode(bytes, position: entry.position).strippingLocalOnly(schema).encoded()
            }
            result.append(PendingTransaction(replica: replica, sequences: header.firstSequence...last, position: entry.position, bytes: bytes))
        }
        do {
            if let known {
                // Runs of consecutive positions are read together.
                var index = known.startIndex
                while index < known.endIndex {
                    var end = index + 1
                    while end < known.endIndex, known[end].position == known[end - 1].position + 1 { end += 1 }
                    let entries = try log.entries(from: known[index].position, limit: end - index)
                    entriesReadForSync.add(entries.count, ordering: .relaxed)
                    for entry in entries { try take(entry, try TransactionHeader(decoding: entry.payload, position: entry.position)) }
                    index = end
                }
            } else {
                let identity = core.withLock { $0.identity }
                // A shared log may hold records not synced yet (see `durableEndPosition`).
                let durable = log.durableEndPosition
                var cursor = try log.records(from: log.startPosition)
                while let record = try cursor.next() {
                    entriesReadForSync.add(record.entries.count, ordering: .relaxed)
                    for entry in record.entries where entry.position < durable {
                        let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                        if !identity.lineage.isEmpty, identity.isAbandoned(header: header, position: entry.position) { continue }
                        try take(entry, header)
                    }
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        return result
    }

    /// How many of this store's own transactions have a last sequence above `acknowledged`
    /// (reads the log only when the index cannot say: see ``unpushedTransactions(after:)``).
    /// Schema records count: see ``unpushedEdits(after:)`` for what counts as the user's edits.
    package func unpushedCount(after acknowledged: UInt64) throws -> Int {
        let known = core.withLock { core in core.own.pending(after: acknowledged, in: log.startPosition..<log.durableEndPosition) }
        if let known { return known.count }
        return try unpushedTransactions(after: acknowledged).count
    }

    /// This store's own transactions with a last sequence above `acknowledged` that edit objects,
    /// by log position, with the objects each changes. A transaction of schema records only (an
    /// open recording the app's schema) is left out: it is pushed with the rest — other devices
    /// learn schemas through the zone's log — but it is not an edit the user waits for, nor one
    /// a reader is blocked from sending.
    ///
    /// What each transaction changes is read from the log once and kept in the index; when the
    /// index cannot say (`acknowledged` is below what every engine had acknowledged), the log is
    /// read as ``unpushedTransactions(after:)`` reads it.
    package func unpushedEdits(after acknowledged: UInt64) throws -> [UInt64: Set<ObjectID>] {
        let (replica, known) = core.withLock { core in
            (core.replica, core.own.pending(after: acknowledged, in: log.startPosition..<log.durableEndPosition))
        }
        var edits: [UInt64: Set<ObjectID>] = [:]
        guard let known else {
            for transaction in try unpushedTransactions(after: acknowledged) {
                let objects = try OwnTransactions.objects(changedBy: transaction.bytes, position: transaction.position)
                if !objects.isEmpty { edits[transaction.position] = objects }
            }
            return edits
        }
        var learned: [UInt64: Set<ObjectID>] = [:]
        let unknown = known.filter { $0.objects == nil }
        do {
            // Runs of consecutive positions are read together.
            var index = unknown.startIndex
            while index < unknown.endIndex {
                var end = index + 1
                while end < unknown.endIndex, unknown[end].position == unknown[end - 1].position + 1 { end += 1 }
                for entry in try log.entries(from: unknown[index].position, limit: end - index) {
                    learned[entry.position] = try OwnTransactions.objects(changedBy: entry.payload, position: entry.position)
                }
                index = end
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        if !learned.isEmpty { core.withLock { $0.own.learn(learned, of: replica) } }
        for entry in known {
            if let objects = entry.objects ?? learned[entry.position], !objects.isEmpty { edits[entry.position] = objects }
        }
        return edits
    }

    /// How many of this store's own transactions with a last sequence above `acknowledged` edit
    /// objects (``unpushedEdits(after:)``: schema records are not counted).
    package func unpushedEditCount(after acknowledged: UInt64) throws -> Int {
        try unpushedEdits(after: acknowledged).count
    }

    /// The highest own sequence every sync engine of the store has had acknowledged by its
    /// server (0 when none has synced yet, or since a fork started a new replica).
    private var acknowledgedBySync: UInt64 {
        core.withLock { core in
            core.syncPins.replica == core.replica ? core.syncPins.acknowledgedByAll : 0
        }
    }

    /// How many local transactions with edits have not been pushed yet: the store's own
    /// transactions that some sync engine of the store (one per zone) has not had acknowledged by
    /// its server. Records of the app's schema are pushed too, but are not counted: a store that
    /// was only opened has no unpushed changes.
    ///
    /// For a badge or an "offline" hint; a `SyncEngine` (StrataSync) reports the same count for its own zone
    /// in its status. Reads only the unpushed part of the log, once (what each transaction
    /// changes is then remembered).
    ///
    /// ```swift
    /// let waiting = try store.unpushedChangeCount()
    /// label.text = waiting == 0 ? "Synced" : "\(waiting) change(s) not synced yet"
    /// ```
    ///
    /// - Throws: `StoreError` when the log cannot be read.
    public func unpushedChangeCount() throws -> Int {
        try unpushedEditCount(after: acknowledgedBySync)
    }

    /// Whether a local change to the object `id` (an insert, an update, a delete, a to-many add
    /// or remove of it) has not been pushed yet: some sync engine of the store has not had a
    /// transaction that changes it acknowledged by its server. Changes that other devices made
    /// and this store pulled are never unpushed.
    ///
    /// ```swift
    /// if try store.hasUnpushedChanges(note.id) { cell.showCloudSlashIcon() }
    /// ```
    ///
    /// - Throws: `StoreError` when the log cannot be read.
    public func hasUnpushedChanges(_ id: ObjectID) throws -> Bool {
        try unpushedEdits(after: acknowledgedBySync).values.contains { $0.contains(id) }
    }

    /// The first sequence of this store's own transactions the log still holds (`nil`: none).
    package func firstOwnSequenceInLog() throws -> UInt64? {
        try firstOwnTransaction(after: 0, before: log.endPosition)?.first
    }

    /// The first of the current replica's transactions below `end` with a last sequence above
    /// `acknowledged`: from the index when it can say, else read from the log (headers only).
    func firstOwnTransaction(after acknowledged: UInt64, before end: UInt64) throws -> OwnTransactions.Entry? {
        let (replica, identity, known) = core.withLock { core in
            (core.replica, core.identity, core.own.pending(after: acknowledged, in: log.startPosition..<end))
        }
        if let known { return known.first }
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries where entry.position < end {
                    let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    guard header.replica == replica, header.eventCount > 0,
                          header.firstSequence + header.eventCount - 1 > acknowledged,
                          identity.lineage.isEmpty || !identity.isAbandoned(header: header, position: entry.position) else { continue }
                    return OwnTransactions.Entry(first: header.firstSequence, last: header.firstSequence + header.eventCount - 1,
                                                 position: entry.position)
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        return nil
    }

    /// Log entries the push path has read since the store opened (a test hook: a push after a
    /// long history reads only what is unpushed).
    package var entriesReadForSyncCount: Int { entriesReadForSync.load(ordering: .relaxed) }
}
