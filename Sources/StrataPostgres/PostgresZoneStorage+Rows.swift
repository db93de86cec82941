import Foundation
import Logging
import NIOCore
import PostgresNIO
import StrataCore
import StrataProtocol
import StrataServer
import Synchronization

/// A zone's row in `strata_zones`.
struct ZoneRow: Sendable {
    /// The row's `zone_id`: never reused, so a recreated zone is another key.
    var key: Int64
    var info: ZoneInfo
    var start: UInt64
    var end: UInt64
    /// The history chain at `end`.
    var chain: UInt64
    var storedBytes: Int64

    static let columns = "zone_id, owner, name, epoch, access, grants, merges, start_position, end_position, chain, stored_bytes, lineage"
    /// ``columns`` of the table aliased `z`.
    static let qualifiedColumns = columns.split(separator: ",").map { "z." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
    typealias Columns = (Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64, [Int64])

    /// ``columns`` and the acceptances and change stamp (schema version 12): where a zone is
    /// described (looked up, listed, updated), not where a push reads it.
    /// And the oldest supported app schema version (schema version 13).
    static let describedColumns = columns + ", accepted, change_stamp, min_schema_version"
    typealias Described = (Int64, String, String, Int64, String, String, [Int64], Int64, Int64, Int64, Int64, [Int64], [String], Int64, Int32)
    /// The database counter's value at the zone's latest change (0 when read without it).
    var stamp: UInt64 = 0

    init(described c: Described) {
        self.init((c.0, c.1, c.2, c.3, c.4, c.5, c.6, c.7, c.8, c.9, c.10, c.11))
        info.accepted = Set(c.12)
        stamp = UInt64(bitPattern: c.13)
        info.minSchemaVersion = Int(c.14)
    }

    /// The row as read; ``decoded()`` checks its access and grants.
    private var access: String
    private var grants: String

    /// The access rule as stored (an append's compare and set compares it as text).
    var storedAccess: String { access }
    /// The grants as stored (JSON; an append's compare and set compares them as text).
    var storedGrants: String { grants }

    init(_ c: Columns) {
        key = c.0
        info = ZoneInfo(name: c.2, owner: c.1, epoch: UInt64(bitPattern: c.3), merges: c.6.map { UInt64(bitPattern: $0) })
        access = c.4
        grants = c.5
        start = UInt64(c.7)
        end = UInt64(c.8)
        chain = UInt64(bitPattern: c.9)
        storedBytes = c.10
        info.lineage = c.11.map { UInt64(bitPattern: $0) }
    }

    /// The row with its access rule and grants decoded.
    func decoded() throws(ZoneStorageError) -> ZoneRow {
        var row = self
        guard let access = ZoneAccess(rawValue: access) else {
            throw ZoneStorageError(.storageFailure, "zone \(info.id): its row has an unknown access \"\(access)\"", zone: info.id.description)
        }
        row.info.access = access
        do {
            row.info.grants = try JSONDecoder().decode([String: ZoneGrant].self, from: Data(grants.utf8))
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(info.id): its grants do not decode: \(error)", zone: info.id.description)
        }
        return row
    }
}

extension PostgresZoneStorage {
    /// Runs `body` in a database transaction on one pooled connection: committed when it returns,
    /// rolled back when it throws. Errors are ``ZoneStorageError``s saying what failed.
    func transaction<T: Sendable>(_ doing: @autoclosure () -> String, zone: ZoneID?,
                                  _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws(ZoneStorageError) -> T {
        try await withConnection(doing(), zone: zone) { connection in try await self.inTransaction(connection, body) }
    }

    /// ``transaction(_:zone:_:)`` for a body that is not `Sendable` (it holds a state being
    /// merged), without the wait for a connection bounded.
    func unboundedTransaction<T: Sendable>(_ doing: @autoclosure () -> String, zone: ZoneID?,
                                           _ body: (PostgresConnection) async throws -> T) async throws(ZoneStorageError) -> T {
        try checkOpen()
        try await readiness.wait(atMost: options.connectionWait, url: url)
        do {
            return try await client.withConnection { connection in try await self.inTransaction(connection, body) }
        } catch {
            throw PostgresFailure.map(error, doing(), zone: zone)
        }
    }

    /// `BEGIN`, `body`, then `COMMIT`, or `ROLLBACK` when it throws. Runs on its caller's
    /// executor (`nonisolated(nonsending)`), so a body that is not `Sendable` can be handed in.
    private nonisolated(nonsending) func inTransaction<T>(_ connection: PostgresConnection, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await connection.query("BEGIN", logger: logger)
        do {
            let value = try await body(connection)
            try await connection.query("COMMIT", logger: logger)
            return value
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Runs `body` on one pooled connection (no transaction: each statement on its own).
    ///
    /// The wait for a connection is bounded by ``Options/connectionWait``: with the database down
    /// (the pool retrying its connections) or every connection busy, the call fails with
    /// ``ZoneStorageError/Code/storageUnavailable`` — answered `503` with `Retry-After` — instead
    /// of holding the request. Once a connection is leased, `body` runs to its end.
    /// `wait`: the longest to wait for a connection (by default `Options.connectionWait`).
    func withConnection<T: Sendable>(_ doing: @autoclosure () -> String, zone: ZoneID?, wait: Duration? = nil,
                                     _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws(ZoneStorageError) -> T {
        try checkOpen()
        // Not before run() has migrated the schema (nor against a storage that could not open).
        try await readiness.wait(atMost: options.connectionWait, url: url)
        let client = client
        let wait = min(wait ?? options.connectionWait, options.connectionWait)
        let leased = LeaseFlag()
        do {
            return try await withThrowingTaskGroup(of: LeaseOutcome<T>.self) { group in
                group.addTask {
                    .done(try await client.withConnection { connection in
                        leased.set()
                        return try await body(connection)
                    })
                }
                group.addTask {
                    try? await Task.sleep(for: wait)
                    return .waited
                }
                while let outcome = try await group.next() {
                    switch outcome {
                    case .done(let value):
                        group.cancelAll()
                        return value
                    case .waited where !leased.isSet:
                        group.cancelAll()
                        throw ZoneStorageError(.storageUnavailable, "no PostgreSQL connection within \(wait) (the database is down or every connection is busy)",
                                               zone: zone?.description)
                    case .waited:
                        continue
                    }
                }
                throw ZoneStorageError(.storageFailure, "the connection's task ended without an outcome", zone: zone?.description)
            }
        } catch {
            throw PostgresFailure.map(error, doing(), zone: zone)
        }
    }

    func checkOpen() throws(ZoneStorageError) {
        if isClosed { throw ZoneStorageError(.storageFailure, "the PostgreSQL storage at \(url) is closed") }
    }

    /// Every row of `rows`, decoded as `T`.
    func rows<each Column: PostgresDecodable>(_ rows: PostgresRowSequence, as type: (repeat each Column).Type) async throws -> [(repeat each Column)] {
        var found: [(repeat each Column)] = []
        for try await row in rows {
            found.append(try row.decode(type, context: .default))
        }
        return found
    }

    /// The one column of every row of `rows`, decoded as `T`.
    func values<T: PostgresDecodable>(_ rows: PostgresRowSequence, as type: T.Type) async throws -> [T] {
        var found: [T] = []
        for try await row in rows {
            found.append(try row.decode(T.self))
        }
        return found
    }

    /// The zone's row (locked for the transaction when `lock`), or `nil` when there is none.
    func zoneRow(_ id: ZoneID, on connection: PostgresConnection, lock: Bool = false) async throws -> ZoneRow? {
        let found = try await rows(connection.query("""
            SELECT \(unescaped: ZoneRow.describedColumns) FROM strata_zones WHERE owner = \(id.owner) AND name = \(id.name)\(unescaped: lock ? " FOR UPDATE" : "")
            """, logger: logger), as: ZoneRow.Described.self)
        return try found.first.map { try ZoneRow(described: $0).decoded() }
    }

    /// The zone's row, or ``ZoneStorageError/Code/zoneNotFound``.
    func existingZone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneRow {
        let row = try await withConnection("looking up zone \(id)", zone: id) { connection in
            try await self.zoneRow(id, on: connection)
        }
        guard let row else { throw Self.notFound(id) }
        return row
    }

    /// What the zone holds of `replica` that a check of `pushed` needs: its owner, the highest
    /// sequence held, and the held transactions the push's first sequences could name (not the
    /// replica's whole history: a push costs what it sends).
    func ledger(of replica: ReplicaID, in zone: ZoneRow, covering pushed: [PushedTransaction],
                on connection: PostgresConnection) async throws -> ReplicaLedger {
        let (high, low) = Self.halves(replica)
        var ledger = ReplicaLedger()
        let found = try await rows(connection.query("""
            SELECT owner, acknowledged, unchecked_through FROM strata_replicas
            WHERE zone_id = \(zone.key) AND replica_high = \(high) AND replica_low = \(low)
            """, logger: logger), as: (String?, Int64, Int64).self)
        guard let row = found.first else { return ledger }
        ledger.owner = row.0
        ledger.acknowledged = UInt64(bitPattern: row.1)
        ledger.uncheckedThrough = UInt64(bitPattern: row.2)
        let firsts = pushed.map(\.firstSequence).filter { $0 <= ledger.acknowledged }
        if let lowest = firsts.min(), let highest = firsts.max() {
            ledger.transactions = try await held(replica, in: zone, from: lowest, through: highest, on: connection)
        }
        return ledger
    }

    /// How far the zone (one life of it: `zoneKey`) holds each replica whose adds `pushed`'s
    /// removes name, other than `replica`, for those the zone has a ledger of
    /// (`AppendInputs.heldThrough`); no query when they name none.
    func heldThrough(of pushed: [PushedTransaction], except replica: ReplicaID, zoneKey: Int64,
                     on connection: PostgresConnection) async throws -> [ReplicaID: UInt64] {
        var named = Set<ReplicaID>()
        for transaction in pushed { named.formUnion(transaction.namedAdds.keys) }
        named.remove(replica)
        var held: [ReplicaID: UInt64] = [:]
        for other in named {
            let (high, low) = Self.halves(other)
            let found = try await rows(connection.query("""
                SELECT acknowledged FROM strata_replicas
                WHERE zone_id = \(zoneKey) AND replica_high = \(high) AND replica_low = \(low)
                """, logger: logger), as: Int64.self)
            if let sequence = found.first { held[other] = UInt64(bitPattern: sequence) }
        }
        return held
    }

    /// The transactions the zone holds of `replica` whose first sequence is in `lowest…highest`.
    func held(_ replica: ReplicaID, in zone: ZoneRow, from lowest: UInt64, through highest: UInt64,
              on connection: PostgresConnection) async throws -> [HeldTransaction] {
        let (high, low) = Self.halves(replica)
        return try await rows(connection.query("""
            SELECT first_sequence, last_sequence, position, digest_high, digest_low FROM strata_transactions
            WHERE zone_id = \(zone.key) AND replica_high = \(high) AND replica_low = \(low)
              AND first_sequence >= \(Int64(bitPattern: lowest)) AND first_sequence <= \(Int64(bitPattern: highest))
            ORDER BY first_sequence
            """, logger: logger), as: (Int64, Int64, Int64, Int64, Int64).self).map {
            HeldTransaction(first: UInt64(bitPattern: $0.0), last: UInt64(bitPattern: $0.1), position: UInt64($0.2),
                            digest: TransactionDigest(high: UInt64(bitPattern: $0.3), low: UInt64(bitPattern: $0.4)))
        }
    }

    /// Writes the replica's owner and highest sequence.
    func saveLedger(_ ledger: ReplicaLedger, of replica: ReplicaID, in zone: ZoneRow, on connection: PostgresConnection) async throws {
        let (high, low) = Self.halves(replica)
        try await connection.query("""
            INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
            VALUES (\(zone.key), \(high), \(low), \(ledger.owner), \(Int64(bitPattern: ledger.acknowledged)), \(Int64(bitPattern: ledger.uncheckedThrough)))
            ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
            SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through
            """, logger: logger)
    }

    /// The zone's snapshot row.
    func storedSnapshot(of zone: ZoneRow, on connection: PostgresConnection) async throws -> ZoneSnapshot? {
        try await rows(connection.query("SELECT position, payload FROM strata_snapshots WHERE zone_id = \(zone.key)", logger: logger),
                       as: (Int64, ByteBuffer).self)
            .first.map { ZoneSnapshot(epoch: zone.info.epoch, position: UInt64($0.0), payload: Array($0.1.readableBytesView)) }
    }

    static func encode(_ grants: [String: ZoneGrant]) throws(ZoneStorageError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return String(decoding: try encoder.encode(grants), as: UTF8.self)
        } catch {
            throw ZoneStorageError(.invalidArgument, "the grants do not encode: \(error)")
        }
    }

    static func halves(_ replica: ReplicaID) -> (Int64, Int64) {
        (Int64(bitPattern: UInt64(truncatingIfNeeded: replica.rawValue >> 64)), Int64(bitPattern: UInt64(truncatingIfNeeded: replica.rawValue)))
    }

    static func replica(_ high: Int64, _ low: Int64) -> ReplicaID {
        ReplicaID(rawValue: UInt128(UInt64(bitPattern: high)) << 64 | UInt128(UInt64(bitPattern: low)))
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    static func notFound(_ id: ZoneID) -> ZoneStorageError {
        ZoneStorageError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name)", zone: id.description)
    }
}

/// What came first: the call's value, or the end of the wait for a connection.
private enum LeaseOutcome<T: Sendable>: Sendable {
    case done(T)
    case waited
}

/// Whether a call got its connection.
private final class LeaseFlag: Sendable {
    private let leased = Atomic<Bool>(false)
    func set() { leased.store(true, ordering: .relaxed) }
    var isSet: Bool { leased.load(ordering: .relaxed) }
}
