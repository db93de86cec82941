public import Foundation

/// Who a store is: the replica it authors under now, the segment log it belongs with, and the
/// replicas it authored under before (its lineage). Kept in `store.json` (see
/// `Store.identity(ofStoreAt:)` and the store directory in the event format article of `Strata`).
public struct StoreIdentity: Sendable, Hashable {
    /// The replica this store authors under now.
    public var replicaID: ReplicaID
    /// The segment log's ID (`LogID`'s description), cross-checked on open; `nil` in a format-1
    /// `store.json`, which did not record it.
    public var logID: String?
    /// The replicas abandoned so far, oldest first.
    public var lineage: [ReplicaFork]

    /// The replicas this store authored under: its own and those it forked from.
    package var ownReplicas: Set<ReplicaID> { Set([replicaID] + lineage.map(\.replica)) }

    public init(replicaID: ReplicaID, logID: String? = nil, lineage: [ReplicaFork] = []) {
        self.replicaID = replicaID
        self.logID = logID
        self.lineage = lineage
    }

    /// The rule every reader of history applies: a transaction of a lineage entry's replica with
    /// a last sequence above `keptThrough`, stored at a position before the entry's `before`, was
    /// abandoned by a fork (its events were re-authored under the successor, or, for a lost log,
    /// there is nothing to abandon) and is not part of the store's history.
    package func isAbandoned(header: TransactionHeader, position: UInt64) -> Bool {
        lineage.contains { $0.abandons(header: header, position: position) }
    }

    /// Whether a projection snapshot at `position` may hold abandoned transactions that a fork
    /// re-authored: one written after the first of them and at or before the fork's position.
    /// Such a snapshot counts the abandoned sequences as applied, so readers must not load it.
    public func isTainted(snapshotAt position: UInt64) -> Bool {
        lineage.contains { $0.reauthored > 0 && position > $0.abandonedFrom && position <= $0.before }
    }
}

/// One abandoned replica: a fork (the store was copied and the server refused a sequence), a lost
/// log, or a re-stamp after a wrong clock.
public struct ReplicaFork: Sendable, Hashable, Codable {
    public enum Reason: String, Sendable, Codable {
        /// Another copy of the store authored the same (replica, sequence) pairs.
        case forked
        /// `store.json` outlived its log (or names another log): the replica's sequences cannot be
        /// continued without reusing ones already sent.
        case logLost
        /// The replica's events were re-stamped because the device's clock was wrong.
        case clockRestamp
    }

    public var reason: Reason
    /// The abandoned replica.
    public var replica: ReplicaID
    /// Its sequences 1...keptThrough stay (the server holds them).
    public var keptThrough: UInt64
    /// Log position: transactions of `replica` with lastSequence > keptThrough at positions
    /// < before are abandoned. The re-authored transactions are stored at `before`.
    public var before: UInt64
    public var successor: ReplicaID
    /// Number of events re-authored under `successor` (its sequences 1...reauthored).
    public var reauthored: UInt64
    /// When (for display).
    public var date: Date
    /// The log position of the first abandoned transaction (`before` when there was none): a
    /// snapshot at a position in `abandonedFrom + 1 ... before` counts abandoned events and is
    /// never loaded.
    public var abandonedFrom: UInt64
    /// Whether the re-authored events got fresh HLCs. An interrupted re-stamping fork is finished
    /// by stamping again: the first stamps were never stored, so nobody saw them.
    public var restamped: Bool

    public init(reason: Reason, replica: ReplicaID, keptThrough: UInt64, before: UInt64, successor: ReplicaID,
                reauthored: UInt64, date: Date, abandonedFrom: UInt64? = nil, restamped: Bool = false) {
        self.reason = reason
        self.replica = replica
        self.keptThrough = keptThrough
        self.before = before
        self.successor = successor
        self.reauthored = reauthored
        self.date = date
        self.abandonedFrom = abandonedFrom ?? before
        self.restamped = restamped
    }

    /// This entry's share of `StoreIdentity.isAbandoned(header:position:)`.
    package func abandons(header: TransactionHeader, position: UInt64) -> Bool {
        header.replica == replica && position < before && header.eventCount > 0
            && header.firstSequence + header.eventCount - 1 > keptThrough
    }

    package enum CodingKeys: String, CodingKey {
        case reason, replica, keptThrough, before, successor, reauthored, abandonedFrom, restamped
        case date = "dateMilliseconds"
    }

    // The date as integer milliseconds since 1970, so that the encoding is canonical (the
    // checksum of `store.json` covers its bytes).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        reason = try c.decode(Reason.self, forKey: .reason)
        replica = try c.decode(ReplicaID.self, forKey: .replica)
        keptThrough = try c.decode(UInt64.self, forKey: .keptThrough)
        before = try c.decode(UInt64.self, forKey: .before)
        successor = try c.decode(ReplicaID.self, forKey: .successor)
        reauthored = try c.decode(UInt64.self, forKey: .reauthored)
        date = Date(timeIntervalSince1970: Double(try c.decode(Int64.self, forKey: .date)) / 1000)
        abandonedFrom = try c.decode(UInt64.self, forKey: .abandonedFrom)
        restamped = try c.decode(Bool.self, forKey: .restamped)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(reason, forKey: .reason)
        try c.encode(replica, forKey: .replica)
        try c.encode(keptThrough, forKey: .keptThrough)
        try c.encode(before, forKey: .before)
        try c.encode(successor, forKey: .successor)
        try c.encode(reauthored, forKey: .reauthored)
        try c.encode(Int64((date.timeIntervalSince1970 * 1000).rounded()), forKey: .date)
        try c.encode(abandonedFrom, forKey: .abandonedFrom)
        try c.encode(restamped, forKey: .restamped)
    }
}
