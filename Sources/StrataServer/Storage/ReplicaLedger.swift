import Crypto
public import StrataCore

/// The first 16 bytes of a transaction's SHA-256: what the server remembers of each stored
/// transaction, so that a retry of a (replica, sequence) can be told from a different
/// transaction under the same name (a copied or restored store: a fork).
public struct TransactionDigest: Sendable, Hashable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The digest of an encoded transaction.
    public init(of bytes: [UInt8]) {
        let hash = SHA256.hash(data: bytes)
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in hash.prefix(16).enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    public var description: String {
        let h = String(high, radix: 16), l = String(low, radix: 16)
        return String(repeating: "0", count: 16 - h.count) + h + String(repeating: "0", count: 16 - l.count) + l
    }
}

/// One transaction a zone holds for a replica: its sequences, where it is, and its digest.
package struct HeldTransaction: Sendable, Hashable {
    package var first: UInt64
    package var last: UInt64
    package var position: UInt64
    package var digest: TransactionDigest

    package init(first: UInt64, last: UInt64, position: UInt64, digest: TransactionDigest) {
        self.first = first
        self.last = last
        self.position = position
        self.digest = digest
    }
}

/// What a zone knows of one replica: the user it belongs to, the highest sequence held, and
/// the digest of every transaction held (retired history included, when its digests were kept).
///
/// The rules of a push live here, apart from any storage, so that every backend applies them
/// the same way (``check(_:user:replica:zone:)``).
package struct ReplicaLedger: Sendable, Hashable {
    /// The user who first pushed the replica; `nil` for a replica found in history written before
    /// owners were recorded (its next pusher claims it).
    package var owner: String?
    /// The highest sequence held.
    package var acknowledged: UInt64 = 0
    /// Sorted by `first`; transactions never overlap.
    package var transactions: [HeldTransaction] = []
    /// Sequences at or below this were held before digests were kept (a zone compacted by an
    /// older server): their retries cannot be checked and are acknowledged as before.
    package var uncheckedThrough: UInt64 = 0

    package init() {}

    /// Records a transaction the zone holds (appended, or found when opening).
    package mutating func hold(_ held: HeldTransaction) {
        if let last = transactions.last, last.first >= held.first {
            // Out of order (a retired-digest file read after the log): insert in place, once.
            let index = transactions.partitionIndex { $0.first >= held.first }
            if index < transactions.count && transactions[index].first == held.first { return }
            transactions.insert(held, at: index)
        } else {
            transactions.append(held)
        }
        acknowledged = max(acknowledged, held.last)
    }

    /// The transaction held that starts at `first`.
    /// The held transaction at log position `position` (positions grow with sequences within a
    /// replica, so the list is sorted by both).
    func held(atPosition position: UInt64) -> HeldTransaction? {
        let index = transactions.partitionIndex { $0.position >= position }
        guard index < transactions.count, transactions[index].position == position else { return nil }
        return transactions[index]
    }

    func held(startingAt first: UInt64) -> HeldTransaction? {
        let index = transactions.partitionIndex { $0.first >= first }
        guard index < transactions.count, transactions[index].first == first else { return nil }
        return transactions[index]
    }

    /// Checks a push of this replica by `user` and returns the transactions to append (those the
    /// zone does not hold yet, contiguous after what it holds).
    ///
    /// - Throws: ``ZoneStorageError/Code/replicaNotYours`` when the replica belongs to another
    ///   user; ``ZoneStorageError/Code/replicaForked`` (with the first sequence whose content
    ///   differs) when a transaction the zone already holds under these sequences has other
    ///   bytes or other boundaries; ``ZoneStorageError/Code/sequenceGap`` when the push skips
    ///   sequences; ``ZoneStorageError/Code/invalidArgument`` for impossible sequences.
    package func check(_ pushed: [PushedTransaction], user: String, replica: ReplicaID, zone: ZoneID) throws(ZoneStorageError) -> [PushedTransaction] {
        if let owner, owner != user {
            throw ZoneStorageError(.replicaNotYours, "replica \(replica) belongs to user \(owner), not \(user)", zone: zone.description)
        }
        var expected = acknowledged &+ 1
        var fresh: [PushedTransaction] = []
        for (index, transaction) in pushed.enumerated() {
            guard transaction.firstSequence >= 1, transaction.firstSequence <= transaction.lastSequence else {
                throw ZoneStorageError(.invalidArgument, "transaction \(index) has sequences \(transaction.firstSequence)...\(transaction.lastSequence)", zone: zone.description)
            }
            if fresh.isEmpty && transaction.firstSequence <= acknowledged {
                // Already held under these sequences: the same transaction (a retry), or a fork.
                let held = held(startingAt: transaction.firstSequence)
                if held == nil && transaction.lastSequence <= uncheckedThrough { continue }
                guard let held, held.last == transaction.lastSequence, held.digest == transaction.digest else {
                    throw ZoneStorageError(
                        .replicaForked,
                        "replica \(replica): transaction \(index) (sequences \(transaction.firstSequence)...\(transaction.lastSequence)) differs from the one the zone holds under those sequences; the store was copied or restored and must take a new replica ID",
                        zone: zone.description, sequence: transaction.firstSequence)
                }
                continue
            }
            guard transaction.firstSequence == expected else {
                throw ZoneStorageError(
                    .sequenceGap,
                    "replica \(replica): transaction \(index) starts at sequence \(transaction.firstSequence) but the zone expects \(expected)",
                    zone: zone.description, expected: expected)
            }
            fresh.append(transaction)
            expected = transaction.lastSequence &+ 1
        }
        return fresh
    }
}

extension Array {
    /// The index of the first element for which `belongs` holds, for an array partitioned so that
    /// it holds for a suffix (binary search).
    func partitionIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
