import StrataLog
import Synchronization

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
            (core.replica, core.own.pending(after: acknowledged, in: log.startPosition..<log.endPosition), core.projection.schema)
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
                var cursor = try log.records(from: log.startPosition)
                while let record = try cursor.next() {
                    entriesReadForSync.add(record.entries.count, ordering: .relaxed)
                    for entry in record.entries {
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
    package func unpushedCount(after acknowledged: UInt64) throws -> Int {
        let known = core.withLock { core in core.own.pending(after: acknowledged, in: log.startPosition..<log.endPosition) }
        if let known { return known.count }
        return try unpushedTransactions(after: acknowledged).count
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
