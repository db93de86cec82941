import Foundation
import NIOCore
import PostgresNIO
public import Strata
import StrataProtocol
public import StrataServer
import Synchronization

/// A push, in two ways that give the same outcome.
///
/// The common push — only transactions the zone does not hold yet, by the replica's owner, under
/// the quota — takes two round trips: one statement reads what the check needs (the zone's end
/// and chain, the replica's ledger, the owner's stored bytes) without a lock, the check and the
/// new history chain are computed here, and `strata_append_if_unchanged` (schema version 2)
/// appends in one call, in its own transaction, only if nothing it was computed from has changed
/// meanwhile (compare and set, under the zone's and the owner's row locks). Every other push —
/// a retry, a refusal, a quota near its limit, or a zone another push changed in between — takes
/// the locked path: `BEGIN`, the row locks, the ledger read after them, the append, `COMMIT`.
/// That path decides every case on its own; the first one only saves it round trips.
extension PostgresZoneStorage {
    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        guard !pushed.isEmpty else {
            throw ZoneStorageError(.invalidArgument, "a push holds at least one transaction", zone: id.description)
        }
        if options.compareAndSetAppends, let outcome = try await appendIfUnchanged(zone: id, user: user, replica: replica, transactions: pushed, storedBytesLimit: storedBytesLimit) {
            return outcome
        }
        appendPaths.noteLocked()
        return try await appendLocked(zone: id, user: user, replica: replica, transactions: pushed, storedBytesLimit: storedBytesLimit)
    }

    /// The append by compare and set, or `nil` when the push is not the common case or the zone
    /// changed under it (nothing was written then). It starts from the basis this instance
    /// remembers from the replica's last push here (one round trip), else from a fresh read (two).
    private func appendIfUnchanged(zone id: ZoneID, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                                   storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome? {
        let remembered = appendBases.take(zone: id, replica: replica)
        return try await withConnection("appending to zone \(id)", zone: id) { connection -> AppendOutcome? in
            if let remembered,
               let (outcome, next) = try await self.appendIfUnchanged(since: remembered, zone: id, user: user, replica: replica, transactions: pushed,
                                                                     storedBytesLimit: storedBytesLimit, on: connection) {
                self.appendBases.remember(next, zone: id, replica: replica)
                self.appendPaths.noteRemembered()
                return outcome
            }
            guard let basis = try await self.readBasis(zone: id, user: user, replica: replica, on: connection),
                  let (outcome, next) = try await self.appendIfUnchanged(since: basis, zone: id, user: user, replica: replica, transactions: pushed,
                                                                        storedBytesLimit: storedBytesLimit, on: connection)
            else { return nil }
            self.appendBases.remember(next, zone: id, replica: replica)
            self.appendPaths.noteRead()
            return outcome
        }
    }

    /// What the zone holds that a push of `replica` is checked against, read without a lock.
    private func readBasis(zone id: ZoneID, user: String, replica: ReplicaID, on connection: PostgresConnection) async throws -> AppendBasis? {
        let (replicaHigh, replicaLow) = Self.halves(replica)
        let found = try await rows(connection.query("""
            SELECT z.zone_id, z.epoch, z.end_position, z.chain, o.stored_bytes, r.owner, r.acknowledged, r.unchecked_through,
                   \(unescaped: ZoneRow.qualifiedColumns)
            FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
            LEFT JOIN strata_replicas r ON r.zone_id = z.zone_id AND r.replica_high = \(replicaHigh) AND r.replica_low = \(replicaLow)
            WHERE z.owner = \(id.owner) AND z.name = \(id.name)
            """, logger: logger), as: (Int64, Int64, Int64, Int64, Int64, String?, Int64?, Int64?,
                                        Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64).self)
        guard let row = found.first else { return nil }
        var ledger = ReplicaLedger()
        ledger.owner = row.5
        ledger.acknowledged = UInt64(bitPattern: row.6 ?? 0)
        ledger.uncheckedThrough = UInt64(bitPattern: row.7 ?? 0)
        // Who may push, decided once per basis (a remembered basis keeps it) and checked again
        // by the compare and set against the access and grants it was decided from.
        let zone = try ZoneRow((row.8, row.9, row.10, row.11, row.12, row.13, row.14, row.15, row.16, row.17, row.18)).decoded()
        // `acknowledged` is never NULL in a row: NULL means the replica has none yet.
        return AppendBasis(key: row.0, epoch: UInt64(bitPattern: row.1), end: row.2, chain: UInt64(bitPattern: row.3), used: row.4,
                           hasLedger: row.6 != nil, ledger: ledger, access: row.12, grants: row.13,
                           pushers: zone.info.canPush(user) ? [user] : [])
    }

    /// Appends `pushed` if the zone is still as `basis` says (`strata_append_if_unchanged`):
    /// the outcome and the basis after it, or `nil` (nothing written).
    private func appendIfUnchanged(since basis: AppendBasis, zone id: ZoneID, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                                   storedBytesLimit: Int64?, on connection: PostgresConnection) async throws -> (AppendOutcome, AppendBasis)? {
        var ledger = basis.ledger
        // Retries need the held digests; refusals (a user who may not push included) are decided
        // under the lock.
        guard basis.pushers.contains(user), pushed.allSatisfy({ $0.firstSequence > ledger.acknowledged }),
              let fresh = try? ledger.check(pushed, user: user, replica: replica, zone: id), fresh.count == pushed.count
        else { return nil }
        let adding = fresh.reduce(Int64(0)) { $0 + Int64($1.bytes.count) }
        let limit: Int64? = storedBytesLimit.flatMap { $0 > 0 ? $0 : nil }
        if let limit, basis.used + adding > limit { return nil }
        let rows = AppendedRows(fresh, at: basis.end, after: basis.chain)
        let chain = rows.chain
        ledger.acknowledged = max(ledger.acknowledged, rows.acknowledged)
        let (replicaHigh, replicaLow) = Self.halves(replica)
        let expected = basis.ledger
        let appended = try await values(connection.query("""
            SELECT strata_append_if_unchanged(
                \(basis.key), \(id.owner), \(basis.end), \(Int64(bitPattern: basis.chain)), \(basis.access), \(basis.grants),
                \(replicaHigh), \(replicaLow), \(basis.hasLedger), \(expected.owner)::text,
                \(Int64(bitPattern: expected.acknowledged)), \(Int64(bitPattern: expected.uncheckedThrough)),
                \(user), \(Int64(bitPattern: ledger.acknowledged)), \(adding), \(limit)::bigint, \(Int64(bitPattern: chain)),
                \(rows.positions)::bigint[], \(rows.firsts)::bigint[], \(rows.lasts)::bigint[], \(rows.digestHighs)::bigint[],
                \(rows.digestLows)::bigint[], \(rows.chains)::bigint[], \(rows.bytes)::bytea[], \(Self.channel), \(announcement(id)))
            """, logger: logger), as: Bool.self)
        guard appended.first == true else { return nil }
        ledger.owner = user
        let next = AppendBasis(key: basis.key, epoch: basis.epoch, end: basis.end + Int64(fresh.count), chain: chain, used: basis.used + adding,
                               hasLedger: true, ledger: ledger, access: basis.access, grants: basis.grants, pushers: basis.pushers)
        return (AppendOutcome(epoch: basis.epoch, position: UInt64(next.end), acknowledged: ledger.acknowledged, appended: fresh.count, fingerprint: chain),
                next)
    }

    /// The append under the zone's and the owner's row locks, in one database transaction:
    /// decides every push (retries, forks, gaps, quotas) by what is committed.
    private func appendLocked(zone id: ZoneID, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                              storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        let (replicaHigh, replicaLow) = Self.halves(replica)
        return try await transaction("appending to zone \(id)", zone: id) { connection in
            // Lock the zone's row (serializing this zone's pushes across instances: what is held,
            // the check and the append below are one atomic step) and its owner's (the
            // stored-bytes counter), both read as they are once locked.
            let found = try await self.rows(connection.query("""
                SELECT \(unescaped: ZoneRow.qualifiedColumns), o.stored_bytes
                FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
                WHERE z.owner = \(id.owner) AND z.name = \(id.name)
                FOR UPDATE OF z, o
                """, logger: self.logger), as: (Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64, Int64).self)
            guard let row = found.first else { throw Self.notFound(id) }
            let zone = try ZoneRow((row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10)).decoded()
            let used = row.11
            // The access as it is under the lock: a grant revoked after the server looked the
            // zone up holds.
            try Self.checkPush(zone.info, user: user)
            // Read in a statement of its own, after the lock: a statement that waited for the
            // lock sees the other push's rows of the tables it locked, not of the others (a
            // join with the replica's row here read it as it was before, and took a retry for
            // new transactions).
            var ledger = try await self.ledger(of: replica, in: zone, covering: pushed, on: connection)
            let known = ledger.owner != nil
            let fresh = try ledger.check(pushed, user: user, replica: replica, zone: id)
            ledger.owner = user
            guard !fresh.isEmpty else {
                // The replica's owner is recorded with its first push, before anything of it is
                // acknowledged.
                if !known { try await self.saveLedger(ledger, of: replica, in: zone, on: connection) }
                return AppendOutcome(epoch: zone.info.epoch, position: zone.end, acknowledged: ledger.acknowledged, appended: 0,
                                     fingerprint: zone.end > 0 ? zone.chain : nil)
            }
            let adding = fresh.reduce(Int64(0)) { $0 + Int64($1.bytes.count) }
            if let limit = storedBytesLimit, limit > 0, used + adding > limit {
                throw ZoneStorageError.storedBytesQuota(owner: id.owner, limit: limit, used: used, adding: adding, zone: id)
            }
            let rows = AppendedRows(fresh, at: Int64(zone.end), after: zone.chain)
            let chain = rows.chain
            ledger.acknowledged = max(ledger.acknowledged, rows.acknowledged)
            // The append, the zone's new end and chain, the counters, the replica's ledger and
            // the announcement (delivered on commit): one statement, one round trip.
            try await connection.query("""
                WITH appended AS (
                    INSERT INTO strata_transactions
                        (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
                    SELECT \(zone.key), p, \(replicaHigh), \(replicaLow), f, l, dh, dl, c, b
                    FROM unnest(\(rows.positions)::bigint[], \(rows.firsts)::bigint[], \(rows.lasts)::bigint[], \(rows.digestHighs)::bigint[],
                                \(rows.digestLows)::bigint[], \(rows.chains)::bigint[], \(rows.bytes)::bytea[]) AS t(p, f, l, dh, dl, c, b)
                ), ended AS (
                    UPDATE strata_zones SET end_position = end_position + \(Int64(fresh.count)), chain = \(Int64(bitPattern: chain)),
                        stored_bytes = stored_bytes + \(adding)
                    WHERE zone_id = \(zone.key)
                ), counted AS (
                    UPDATE strata_owners SET stored_bytes = stored_bytes + \(adding) WHERE owner = \(id.owner)
                ), ledger AS (
                    INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
                    VALUES (\(zone.key), \(replicaHigh), \(replicaLow), \(user), \(Int64(bitPattern: ledger.acknowledged)), \(Int64(bitPattern: ledger.uncheckedThrough)))
                    ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
                    SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through
                )
                SELECT pg_notify(\(Self.channel), \(self.announcement(id)))
                """, logger: self.logger)
            return AppendOutcome(epoch: zone.info.epoch, position: zone.end + UInt64(fresh.count), acknowledged: ledger.acknowledged,
                                 appended: fresh.count, fingerprint: chain)
        }
    }
}

/// The rows of `strata_transactions` an append writes, as the arrays its statement unnests: each
/// transaction's position (from `end` on), sequences, digest, its bytes and the history chain
/// after it.
struct AppendedRows {
    var positions: [Int64] = [], firsts: [Int64] = [], lasts: [Int64] = []
    var digestHighs: [Int64] = [], digestLows: [Int64] = [], chains: [Int64] = []
    var bytes: [ByteBuffer] = []
    /// The history chain after the last transaction.
    var chain: UInt64
    /// The highest sequence appended.
    var acknowledged: UInt64 = 0

    init(_ transactions: [PushedTransaction], at end: Int64, after chain: UInt64) {
        self.chain = chain
        for (offset, transaction) in transactions.enumerated() {
            self.chain = HistoryChain.link(self.chain, transaction.digest)
            positions.append(end + Int64(offset))
            firsts.append(Int64(bitPattern: transaction.firstSequence))
            lasts.append(Int64(bitPattern: transaction.lastSequence))
            digestHighs.append(Int64(bitPattern: transaction.digest.high))
            digestLows.append(Int64(bitPattern: transaction.digest.low))
            chains.append(Int64(bitPattern: self.chain))
            bytes.append(ByteBuffer(bytes: transaction.bytes))
            acknowledged = max(acknowledged, transaction.lastSequence)
        }
    }
}

/// What a compare-and-set append is computed from: the zone's row (its key, epoch, end, history
/// chain), its owner's stored bytes and the replica's ledger (without held digests), as they were
/// read or as this instance's last append left them, and who may push by its access and grants.
/// Any of it may be stale;
/// `strata_append_if_unchanged` finds out under the lock.
struct AppendBasis: Sendable {
    var key: Int64
    var epoch: UInt64
    var end: Int64
    var chain: UInt64
    var used: Int64
    var hasLedger: Bool
    var ledger: ReplicaLedger
    /// The zone's access and grants as stored (the compare and set checks they are unchanged).
    var access: String
    var grants: String
    /// The users these allow to push, of those asked about (the pusher of the basis's replica).
    var pushers: Set<String>
}

/// The basis each (zone, replica) pushed through this instance left, so that its next push needs
/// one round trip. Bounded: past `capacity` entries it starts over (a forgotten basis costs one
/// read). A basis is taken out while a push uses it, so two pushes never start from the same one.
final class AppendBases: Sendable {
    private struct Key: Hashable {
        var zone: ZoneID
        var replica: ReplicaID
    }

    private let bases = Mutex<[Key: AppendBasis]>([:])
    private let capacity: Int

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    func take(zone: ZoneID, replica: ReplicaID) -> AppendBasis? {
        bases.withLock { $0.removeValue(forKey: Key(zone: zone, replica: replica)) }
    }

    func remember(_ basis: AppendBasis, zone: ZoneID, replica: ReplicaID) {
        bases.withLock { bases in
            if bases.count >= capacity { bases.removeAll(keepingCapacity: true) }
            bases[Key(zone: zone, replica: replica)] = basis
        }
    }
}

/// How many pushes took each path of ``PostgresZoneStorage/append(zone:user:replica:transactions:storedBytesLimit:)``:
/// for the tests (every path must be exercised) and the benchmark.
@_spi(StrataInternals) public final class AppendPathCounts: Sendable {
    private let remembered = Atomic<Int>(0)
    private let read = Atomic<Int>(0)
    private let locked = Atomic<Int>(0)

    init() {}

    func noteRemembered() { remembered.add(1, ordering: .relaxed) }
    func noteRead() { read.add(1, ordering: .relaxed) }
    func noteLocked() { locked.add(1, ordering: .relaxed) }

    /// Pushes appended by compare and set from the basis the replica's last push here left (one
    /// round trip).
    public var fromRememberedBasis: Int { remembered.load(ordering: .relaxed) }
    /// Pushes appended by compare and set after reading the basis (two round trips).
    public var afterRead: Int { read.load(ordering: .relaxed) }
    /// Pushes appended by compare and set, either way.
    public var compareAndSet: Int { fromRememberedBasis + afterRead }
    /// Pushes decided under the row locks.
    public var underLock: Int { locked.load(ordering: .relaxed) }
}
