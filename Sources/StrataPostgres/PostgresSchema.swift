import Logging
import PostgresNIO
import StrataServer

/// The tables of a ``PostgresZoneStorage``, created and migrated by the server itself.
///
/// Each migration runs once, in its own transaction, and is recorded in
/// `strata_schema_migrations`; instances that start together serialize on an advisory lock, so
/// that exactly one of them migrates. A database migrated by a newer server (a version this one
/// does not know) is refused rather than written with an older idea of the schema.
///
/// Version 1:
///
/// - `strata_owners(owner, stored_bytes)`: one row per zone owner, the counter of the stored-bytes
///   quota; a create or an append locks it (`FOR UPDATE`), so that the quotas hold across
///   instances.
/// - `strata_zones`: one row per zone: its name, owner, access, grants (JSON), epoch, merges,
///   the first position its log holds, its end, the history chain at the end, its stored bytes.
///   `zone_id` is never reused, so a zone deleted and recreated under the same name is another
///   row. An append, a merge or a delete locks the zone's row (`FOR UPDATE`): pushes to one zone
///   are serialized across instances, which makes the exactly-once check atomic.
/// - `strata_transactions`: the zone log, one row per transaction: its position, replica,
///   sequences, digest (two 64-bit halves), the history chain after it, and its bytes — `NULL`
///   once compaction retired it (the row stays, so that retries of retired history are still
///   checked for forks and tokens of it are still recognised).
/// - `strata_replicas`: per zone and replica, the user it belongs to, the highest sequence held
///   and the sequences held without digests (claimed by a merged state).
/// - `strata_snapshots`: each zone's newest snapshot (its state at a position).
///
/// 64-bit unsigned numbers (epochs, sequences, chains, digests, merge IDs) are stored as
/// `bigint` with the same bits.
enum PostgresSchema {
    /// The newest version this server writes.
    static let version = 1

    /// The key of the advisory lock held while migrating.
    static let migrationLock: Int64 = 0x5354_5241_5441_0001

    static let migrations: [Int: [String]] = [
        1: [
            """
            CREATE TABLE strata_owners (
                owner text PRIMARY KEY,
                stored_bytes bigint NOT NULL DEFAULT 0
            )
            """,
            """
            CREATE TABLE strata_zones (
                zone_id bigserial PRIMARY KEY,
                owner text NOT NULL REFERENCES strata_owners (owner),
                name text NOT NULL,
                epoch bigint NOT NULL,
                access text NOT NULL,
                grants text NOT NULL,
                merges bigint[] NOT NULL DEFAULT '{}',
                start_position bigint NOT NULL DEFAULT 0,
                end_position bigint NOT NULL DEFAULT 0,
                chain bigint NOT NULL DEFAULT 0,
                stored_bytes bigint NOT NULL DEFAULT 0,
                UNIQUE (owner, name)
            )
            """,
            """
            CREATE TABLE strata_transactions (
                zone_id bigint NOT NULL REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                position bigint NOT NULL,
                replica_high bigint NOT NULL,
                replica_low bigint NOT NULL,
                first_sequence bigint NOT NULL,
                last_sequence bigint NOT NULL,
                digest_high bigint NOT NULL,
                digest_low bigint NOT NULL,
                chain bigint NOT NULL,
                bytes bytea,
                PRIMARY KEY (zone_id, position)
            )
            """,
            "CREATE INDEX strata_transactions_by_replica ON strata_transactions (zone_id, replica_high, replica_low, first_sequence)",
            """
            CREATE TABLE strata_replicas (
                zone_id bigint NOT NULL REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                replica_high bigint NOT NULL,
                replica_low bigint NOT NULL,
                owner text,
                acknowledged bigint NOT NULL DEFAULT 0,
                unchecked_through bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (zone_id, replica_high, replica_low)
            )
            """,
            """
            CREATE TABLE strata_snapshots (
                zone_id bigint PRIMARY KEY REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                position bigint NOT NULL,
                payload bytea NOT NULL
            )
            """,
        ],
    ]

    /// Brings the database to ``version``; returns the version it was at.
    @discardableResult
    static func migrate(_ client: PostgresClient, logger: Logger) async throws(ZoneStorageError) -> Int {
        do {
            return try await client.withConnection { connection in
                try await connection.query("SELECT pg_advisory_lock(\(migrationLock))", logger: logger)
                do {
                    let found = try await migrateLocked(connection, logger: logger)
                    try await connection.query("SELECT pg_advisory_unlock(\(migrationLock))", logger: logger)
                    return found
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(\(migrationLock))", logger: logger)
                    throw error
                }
            }
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw PostgresFailure.map(error, "migrating the database schema")
        }
    }

    private static func migrateLocked(_ connection: PostgresConnection, logger: Logger) async throws -> Int {
        try await connection.query("""
            CREATE TABLE IF NOT EXISTS strata_schema_migrations (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        var current = 0
        for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM strata_schema_migrations", logger: logger)
            .decode(Int.self) {
            current = version
        }
        guard current <= version else {
            throw ZoneStorageError(.storageFailure, "the database's Strata schema is version \(current), newer than this server's (\(version)); run a newer strata serve")
        }
        for next in (current + 1)...max(current + 1, version) where next <= version {
            guard let statements = migrations[next] else { continue }
            try await connection.query("BEGIN", logger: logger)
            do {
                for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.query("INSERT INTO strata_schema_migrations (version) VALUES (\(next))", logger: logger)
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
            logger.notice("database schema migrated", metadata: ["version": "\(next)"])
        }
        return current
    }
}
