import Foundation
import NIOCore
import PostgresNIO
public import StrataCore
import StrataProtocol
public import StrataServer
import Synchronization

/// A push: the inputs of `AppendPlan` read, the plan made here, its rows written. The plan decides
/// everything (access, the replica's owner, retries, forks, gaps, the quota); the database only
/// holds the rows and the locks. Two ways to read the inputs give the same outcome:
///
/// - The common push — only transactions the zone does not hold yet, allowed by the plan — is
///   planned from the inputs the replica's last push through this instance left (or from one
///   unlocked read of them), and `strata_append_planned` (schema version 6) writes the plan's rows
///   in one call, in its own transaction, only if the plan's basis (`AppendInputs.basis`: the
///   zone's end, chain, access and grants, the replica's ledger, the owner's stored bytes under a
///   quota) is still what it reads under the zone's and the owner's row locks: one round trip.
/// - Every other push — a retry, a refusal, a basis another push changed — is planned under the
///   lock: `BEGIN`, the row locks, the ledger read after them, the plan, its rows, `COMMIT`.
extension PostgresZoneStorage {
    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: id, epoch: nil, user: user, replica: replica, transactions: pushed, storedBytesLimit: storedBytesLimit)
    }

    public func append(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        if options.compareAndSetAppends,
           let outcome = try await appendIfUnchanged(zone: id, epoch: expected, user: user, replica: replica, transactions: pushed, storedBytesLimit: storedBytesLimit) {
            return outcome
        }
        appendPaths.noteLocked()
        return try await appendLocked(zone: id, epoch: expected, user: user, replica: replica, transactions: pushed, storedBytesLimit: storedBytesLimit)
    }

    /// The append by compare and set, or `nil` when its plan is not a whole append or the basis
    /// changed under it (nothing was written then). It starts from the basis this instance
    /// remembers from the replica's last push here (one round trip), else from a fresh read (two).
    private func appendIfUnchanged(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                                   storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome? {
        guard !pushed.isEmpty else { return nil }
        let remembered = appendBases.take(zone: id, replica: replica)
        return try await withConnection("appending to zone \(id)", zone: id) { connection -> AppendOutcome? in
            if let remembered,
               let (outcome, next) = try await self.appendIfUnchanged(since: remembered, epoch: expected, user: user, transactions: pushed,
                                                                     storedBytesLimit: storedBytesLimit, on: connection) {
                self.appendBases.remember(next, zone: id, replica: replica)
                self.appendPaths.noteRemembered()
                return outcome
            }
            guard let basis = try await self.readBasis(zone: id, replica: replica, on: connection),
                  let (outcome, next) = try await self.appendIfUnchanged(since: basis, epoch: expected, user: user, transactions: pushed,
                                                                        storedBytesLimit: storedBytesLimit, on: connection)
            else { return nil }
            self.appendBases.remember(next, zone: id, replica: replica)
            self.appendPaths.noteRead()
            return outcome
        }
    }

    /// The inputs a push of `replica` is planned from, read without a lock (the replica's ledger
    /// without held digests).
    private func readBasis(zone id: ZoneID, replica: ReplicaID, on connection: PostgresConnection) async throws -> AppendBasis? {
        let (replicaHigh, replicaLow) = Self.halves(replica)
        let found = try await rows(connection.query("""
            SELECT o.stored_bytes, r.owner, r.acknowledged, r.unchecked_through, \(unescaped: ZoneRow.qualifiedColumns)
            FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
            LEFT JOIN strata_replicas r ON r.zone_id = z.zone_id AND r.replica_high = \(replicaHigh) AND r.replica_low = \(replicaLow)
            WHERE z.owner = \(id.owner) AND z.name = \(id.name)
            """, logger: logger), as: (Int64, String?, Int64?, Int64?,
                                        Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64, [Int64]).self)
        guard let row = found.first else { return nil }
        var ledger = ReplicaLedger()
        ledger.owner = row.1
        ledger.acknowledged = UInt64(bitPattern: row.2 ?? 0)
        ledger.uncheckedThrough = UInt64(bitPattern: row.3 ?? 0)
        let stored = ZoneRow((row.4, row.5, row.6, row.7, row.8, row.9, row.10, row.11, row.12, row.13, row.14, row.15))
        let zone = try stored.decoded()
        return AppendBasis(key: zone.key, access: stored.storedAccess, grants: stored.storedGrants,
                           inputs: AppendInputs(zone: id, info: zone.info, end: zone.end, chain: zone.chain, user: "", replica: replica, ledger: ledger,
                                                storedBytes: row.0, storedBytesLimit: nil, transactions: []))
    }

    /// Plans the push from `basis` and, when the plan appends all of it, writes its rows if the
    /// basis still holds under the lock (`strata_append_planned`): the outcome and the basis
    /// after it, or `nil` (nothing written).
    private func appendIfUnchanged(since basis: AppendBasis, epoch expected: UInt64?, user: String, transactions pushed: [PushedTransaction],
                                   storedBytesLimit: Int64?, on connection: PostgresConnection) async throws -> (AppendOutcome, AppendBasis)? {
        var inputs = basis.inputs
        inputs.epoch = expected
        inputs.user = user
        inputs.transactions = pushed
        inputs.storedBytesLimit = storedBytesLimit
        // Read fresh (not remembered): a replica's held sequences in a zone row (one life of the
        // zone) only grow, so this read, whenever it happens, never lets through a remove of an
        // add the zone does not hold when the basis is compared.
        inputs.heldThrough = try await heldThrough(of: pushed, except: inputs.replica, zoneKey: basis.key, on: connection)
        // A basis holds no digests of held transactions: a plan that skips some (a retry) or
        // refuses (from inputs that may be stale) is made again under the lock.
        guard case .append(let write) = AppendPlan.decide(inputs), write.entries.count == pushed.count,
              let planned = inputs.basis else { return nil }
        try await claimReplica(inputs.replica, for: user, zone: inputs.zone, on: connection)
        let rows = AppendedRows(write)
        let (replicaHigh, replicaLow) = Self.halves(inputs.replica)
        let appended = try await values(connection.query("""
            SELECT strata_append_planned(
                \(basis.key), \(inputs.zone.owner), \(Int64(planned.end)), \(Int64(bitPattern: planned.chain)), \(basis.access), \(basis.grants),
                \(planned.storedBytes)::bigint, \(replicaHigh), \(replicaLow), \(planned.replicaOwner)::text,
                \(Int64(bitPattern: planned.acknowledged)), \(Int64(bitPattern: planned.uncheckedThrough)),
                \(write.ledger.owner)::text, \(Int64(bitPattern: write.ledger.acknowledged)), \(Int64(bitPattern: write.ledger.uncheckedThrough)),
                \(write.adding), \(Int64(bitPattern: write.chain)),
                \(rows.positions)::bigint[], \(rows.firsts)::bigint[], \(rows.lasts)::bigint[], \(rows.digestHighs)::bigint[],
                \(rows.digestLows)::bigint[], \(rows.chains)::bigint[], \(rows.bytes)::bytea[], \(Self.channel), \(announcement(inputs.zone)))
            """, logger: logger), as: Bool.self)
        guard appended.first == true else { return nil }
        var next = basis
        next.inputs.end = write.end
        next.inputs.chain = write.chain
        next.inputs.storedBytes += write.adding
        next.inputs.ledger = write.ledger
        // What is remembered stays small: the digests are read under the lock when needed.
        next.inputs.ledger.transactions = []
        next.inputs.transactions = []
        return (write.outcome, next)
    }

    /// The append under the zone's and the owner's row locks, in one database transaction: the
    /// plan made from what is committed, whatever the push.
    private func appendLocked(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID, transactions pushed: [PushedTransaction],
                              storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        let (replicaHigh, replicaLow) = Self.halves(replica)
        return try await transaction("appending to zone \(id)", zone: id) { connection in
            // Lock the zone's row (serializing this zone's pushes across instances: the inputs,
            // the plan and its rows below are one atomic step) and its owner's (the stored-bytes
            // counter), both read as they are once locked: a grant revoked after the server
            // looked the zone up holds.
            let found = try await self.rows(connection.query("""
                SELECT \(unescaped: ZoneRow.qualifiedColumns), o.stored_bytes
                FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
                WHERE z.owner = \(id.owner) AND z.name = \(id.name)
                FOR UPDATE OF z, o
                """, logger: self.logger), as: (Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64, [Int64], Int64).self)
            let zone = try found.first.map { try ZoneRow(($0.0, $0.1, $0.2, $0.3, $0.4, $0.5, $0.6, $0.7, $0.8, $0.9, $0.10, $0.11)).decoded() }
            // Read in a statement of its own, after the lock: a statement that waited for the
            // lock sees the other push's rows of the tables it locked, not of the others (a
            // join with the replica's row here read it as it was before, and took a retry for
            // new transactions).
            var ledger = ReplicaLedger()
            if let zone { ledger = try await self.ledger(of: replica, in: zone, covering: pushed, on: connection) }
            var inputs = AppendInputs(zone: id, info: zone?.info, end: zone?.end ?? 0, chain: zone?.chain ?? 0, user: user, replica: replica,
                                      ledger: ledger, storedBytes: found.first?.12 ?? 0, storedBytesLimit: storedBytesLimit, transactions: pushed)
            inputs.epoch = expected
            if let zone { inputs.heldThrough = try await self.heldThrough(of: pushed, except: replica, zoneKey: zone.key, on: connection) }
            switch AppendPlan.decide(inputs) {
            case .refused(let error):
                throw error
            case .held(let held):
                // The replica's owner is recorded with its first push, before anything of it is
                // acknowledged (server-wide, and in the zone).
                try await self.claimReplica(replica, for: user, zone: id, on: connection)
                if held.recordsOwner, let zone { try await self.saveLedger(held.ledger, of: replica, in: zone, on: connection) }
                return held.outcome
            case .append(let write):
                guard let zone else { throw Self.notFound(id) }
                try await self.claimReplica(replica, for: user, zone: id, on: connection)
                let rows = AppendedRows(write)
                // The rows, the zone's new end and chain, the counters, the replica's ledger and
                // the announcement (delivered on commit): one statement, one round trip.
                try await connection.query("""
                    WITH appended AS (
                        INSERT INTO strata_transactions
                            (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
                        SELECT \(zone.key), p, \(replicaHigh), \(replicaLow), f, l, dh, dl, c, b
                        FROM unnest(\(rows.positions)::bigint[], \(rows.firsts)::bigint[], \(rows.lasts)::bigint[], \(rows.digestHighs)::bigint[],
                                    \(rows.digestLows)::bigint[], \(rows.chains)::bigint[], \(rows.bytes)::bytea[]) AS t(p, f, l, dh, dl, c, b)
                    ), ended AS (
                        UPDATE strata_zones SET end_position = \(Int64(write.end)), chain = \(Int64(bitPattern: write.chain)),
                            stored_bytes = stored_bytes + \(write.adding)
                        WHERE zone_id = \(zone.key)
                    ), counted AS (
                        UPDATE strata_owners SET stored_bytes = stored_bytes + \(write.adding) WHERE owner = \(id.owner)
                    ), ledger AS (
                        INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
                        VALUES (\(zone.key), \(replicaHigh), \(replicaLow), \(write.ledger.owner), \(Int64(bitPattern: write.ledger.acknowledged)),
                                \(Int64(bitPattern: write.ledger.uncheckedThrough)))
                        ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
                        SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through
                    )
                    SELECT pg_notify(\(Self.channel), \(self.announcement(id)))
                    """, logger: self.logger)
                return write.outcome
            }
        }
    }
}

/// The rows of `strata_transactions` a plan appends, as the arrays its statement unnests: each
/// transaction's position, sequences, digest, its bytes and the history chain after it.
struct AppendedRows {
    var positions: [Int64] = [], firsts: [Int64] = [], lasts: [Int64] = []
    var digestHighs: [Int64] = [], digestLows: [Int64] = [], chains: [Int64] = []
    var bytes: [ByteBuffer] = []

    init(_ write: AppendPlan.Write) {
        for entry in write.entries {
            let transaction = entry.transaction
            positions.append(Int64(entry.position))
            firsts.append(Int64(bitPattern: transaction.firstSequence))
            lasts.append(Int64(bitPattern: transaction.lastSequence))
            digestHighs.append(Int64(bitPattern: transaction.digest.high))
            digestLows.append(Int64(bitPattern: transaction.digest.low))
            chains.append(Int64(bitPattern: entry.chain))
            bytes.append(ByteBuffer(bytes: transaction.bytes))
        }
    }
}

/// What a compare-and-set append is planned from: the plan's inputs (the zone, the replica's ledger
/// without held digests, the owner's stored bytes) as they were read or as this instance's last
/// append left them, the zone's row key, and its access and grants as stored (which
/// `strata_append_planned` compares). Any of it may be stale; the compare and set finds out under
/// the lock.
struct AppendBasis: Sendable {
    var key: Int64
    var access: String
    var grants: String
    var inputs: AppendInputs
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
