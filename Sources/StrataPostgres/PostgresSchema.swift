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
/// Version 2:
///
/// - `strata_append_if_unchanged(…)`: the common push in one call (one round trip, its own
///   transaction). It takes the zone's and the owner's row locks, checks that the zone's end and
///   history chain, the replica's ledger and the stored-bytes quota are what the caller computed
///   the append from, and only then appends the transactions, moves the zone's end, chain and
///   counters, writes the ledger and announces the change; otherwise it changes nothing and
///   answers `false` (the caller then takes the locked path). Its statements run one after the
///   other, so the ledger is read after the locks are held.
///
/// Version 3:
///
/// - `strata_deleted_zones(owner, name, access, grants, deleted_order)`: the access and grants of
///   deleted zones, kept for their recreation (`ZoneStorage.deletedZoneRules(_:)`): a delete
///   writes the row, a create of that owner and name reads and removes it, both in their own
///   transaction (a create under the owner's row lock). At most
///   `ZoneStorage.keptDeletedZoneRulesPerOwner` rows per owner, the latest deleted.
///
/// Version 4:
///
/// - `strata_append_if_unchanged(…)` replaced: it also takes the zone's access and grants as the
///   caller read them (and decided from them that the user may push) and appends only if they are
///   unchanged, so that a grant revoked after the basis was read refuses the push (the locked
///   path then decides it under the row lock, as the zone is then).
///
/// Version 5:
///
/// - `strata_limit_buckets(name, key, tokens, updated, taken)`: the token buckets of the rate
///   limit and the failed-authentication limit, shared by every instance
///   (`PostgresZoneStorage.take(_:limit:always:)`): how many tokens a bucket held at `updated`
///   (the database's clock, seconds since 1970) and whether its last take took one. `UNLOGGED`:
///   a crash of the database forgets them (every bucket full again), and counting a request
///   costs no WAL flush.
///
/// Version 6:
///
/// - `strata_append_planned(…)` takes over from `strata_append_if_unchanged(…)` (which stays, for
///   older instances during a rolling upgrade): the push is decided in
///   Swift (`AppendPlan`), and the function only compares the basis the plan was made from with
///   the rows under the lock and writes the plan's rows (see `PostgresSchema.appendPlanned`).
///
/// Version 7:
///
/// - `strata_replica_owners(replica_high, replica_low, owner)`: which user each replica belongs
///   to, server-wide (`PostgresZoneStorage.claimReplica(_:for:zone:on:)`): the first user to push
///   a replica to any zone, or upload a state for it, owns it everywhere, for good. Filled from
///   `strata_replicas` for replicas one user owns in every zone that holds them (a replica older
///   servers let several users own stays unbound and is checked per zone as before).
///
/// Version 8:
///
/// - `strata_zones.lineage`: the epochs of the earlier lives a recreated zone continues, the
///   latest first (`ZoneInfo.lineage`); empty for a new zone.
/// - `strata_deleted_zones.epoch` and `.lineage`: those of the deleted life, for a recreation that
///   continues it (rows are now kept for every deleted zone, not only those with rules to keep).
///
/// Version 9 (assets, see `PostgresZoneStorage+Assets.swift` and `AssetStorage`):
///
/// - `strata_asset_chunks(owner, sha256, bytes)`: a chunk's bytes, once per zone owner (inserted
///   with `ON CONFLICT DO NOTHING`: two instances storing one chunk store and count it once).
///   Stored out of line and uncompressed (`STORAGE EXTERNAL`): assets are mostly compressed
///   media already, and a 1 MiB chunk read for a download is then sliced, not decompressed.
///   `strata_owners.stored_bytes` counts these bytes too (added by the insert that stored the
///   chunk, in its transaction), so that the stored-bytes quota of pushes (the compare and set
///   of `strata_append_planned` included) and of uploads sees them.
/// - `strata_asset_manifests(owner, sha256, manifest)`: the manifest (`AssetManifest.encoded`)
///   of each complete, verified asset of an owner.
/// - `strata_asset_links(zone_id, sha256)`: the assets each zone holds. Keyed by `zone_id`,
///   one life of a zone (never reused), and deleted with the zone's row (`ON DELETE CASCADE`, in
///   the delete's transaction): a zone deleted and created again holds nothing of its earlier life.
/// - `strata_asset_uploads(zone_id, sha256, manifest, received)`: an upload in progress into a
///   zone: its manifest and the indexes of the chunks received; deleted with the zone's row.
///
/// Version 10 (the sweep of unreferenced assets, `AssetStorage.sweepAssets(grace:)`):
///
/// - `strata_asset_links.confirmed_at`: when the link was last confirmed (made, or checked by a
///   push about to append a transaction naming it), in milliseconds since 1970 of the server's
///   clock. A sweep removes only links the zone's history does not name and not confirmed within
///   the grace, so that a push between its check and its append keeps its link.
/// - `strata_asset_uploads.touched_at`: when the upload was last begun or sent a chunk; one
///   untouched for longer than the grace is abandoned.
///
/// Rows of before the upgrade count as confirmed at the upgrade.
///
/// Version 11 (uploads per uploader):
///
/// - `strata_asset_uploads.uploader`: the user whose upload it is, in the key
///   (`zone_id, sha256, uploader`): a manifest is its uploader's claim until the whole asset
///   verifies, so that nothing one user begins can reset or block another's upload of the same
///   asset. Uploads of before the upgrade become the zone owner's. Indexed by uploader, for the
///   cap on a user's unfinished uploads.
///
/// Version 12 (the database changes and the acceptance of shares): see
/// `PostgresSchema.databaseChanges`.
///
/// Version 14 (the device registry, see `PostgresZoneStorage+Devices.swift`):
///
/// - `strata_devices(zone_id, replica_high, replica_low, user_name, last_seen, divergent, entry)`:
///   each device's last report in a zone's life, by reporting user and replica (`entry`: the
///   wire's `DeviceEntry` as JSON), deleted with the zone's row. `divergent` is indexed for the count `/metrics` answers.
///
/// 64-bit unsigned numbers (epochs, sequences, chains, digests, merge IDs) are stored as
/// `bigint` with the same bits.
enum PostgresSchema {
    /// The newest version this server writes.
    static let version = 14

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
        2: [
            """
            CREATE FUNCTION strata_append_if_unchanged(
                p_zone bigint, p_owner text, p_end bigint, p_chain bigint,
                p_replica_high bigint, p_replica_low bigint, p_had_ledger boolean, p_ledger_owner text,
                p_acknowledged bigint, p_unchecked_through bigint,
                p_user text, p_new_acknowledged bigint, p_adding bigint, p_limit bigint, p_new_chain bigint,
                p_positions bigint[], p_firsts bigint[], p_lasts bigint[], p_digest_highs bigint[], p_digest_lows bigint[],
                p_chains bigint[], p_bytes bytea[], p_channel text, p_announcement text
            ) RETURNS boolean LANGUAGE plpgsql AS $$
            DECLARE
                zone_end bigint;
                zone_chain bigint;
                used bigint;
                held_owner text;
                held_acknowledged bigint;
                held_unchecked bigint;
                has_ledger boolean;
            BEGIN
                SELECT z.end_position, z.chain, o.stored_bytes INTO zone_end, zone_chain, used
                FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
                WHERE z.zone_id = p_zone AND z.owner = p_owner
                FOR UPDATE OF z, o;
                IF NOT FOUND OR zone_end <> p_end OR zone_chain <> p_chain THEN
                    RETURN false;
                END IF;
                IF p_limit IS NOT NULL AND used + p_adding > p_limit THEN
                    RETURN false;
                END IF;
                SELECT owner, acknowledged, unchecked_through INTO held_owner, held_acknowledged, held_unchecked
                FROM strata_replicas
                WHERE zone_id = p_zone AND replica_high = p_replica_high AND replica_low = p_replica_low;
                has_ledger := FOUND;
                IF has_ledger <> p_had_ledger OR (has_ledger AND (held_owner IS DISTINCT FROM p_ledger_owner
                    OR held_acknowledged <> p_acknowledged OR held_unchecked <> p_unchecked_through)) THEN
                    RETURN false;
                END IF;
                INSERT INTO strata_transactions
                    (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
                SELECT p_zone, t.p, p_replica_high, p_replica_low, t.f, t.l, t.dh, t.dl, t.c, t.b
                FROM unnest(p_positions, p_firsts, p_lasts, p_digest_highs, p_digest_lows, p_chains, p_bytes) AS t(p, f, l, dh, dl, c, b);
                UPDATE strata_zones SET end_position = end_position + cardinality(p_positions), chain = p_new_chain,
                    stored_bytes = stored_bytes + p_adding
                WHERE zone_id = p_zone;
                UPDATE strata_owners SET stored_bytes = stored_bytes + p_adding WHERE owner = p_owner;
                INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
                VALUES (p_zone, p_replica_high, p_replica_low, p_user, p_new_acknowledged, p_unchecked_through)
                ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
                SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through;
                PERFORM pg_notify(p_channel, p_announcement);
                RETURN true;
            END
            $$
            """,
        ],
        3: [
            """
            CREATE TABLE strata_deleted_zones (
                owner text NOT NULL,
                name text NOT NULL,
                access text NOT NULL,
                grants text NOT NULL,
                deleted_order bigserial NOT NULL,
                PRIMARY KEY (owner, name)
            )
            """,
        ],
        4: [
            // Version 2's function, whose compare and set did not look at who may push, is
            // replaced by one that also checks the zone's access and grants are those the
            // caller decided from (a grant revoked after the basis was read is noticed).
            """
            DROP FUNCTION strata_append_if_unchanged(
                bigint, text, bigint, bigint, bigint, bigint, boolean, text, bigint, bigint, text, bigint, bigint, bigint, bigint,
                bigint[], bigint[], bigint[], bigint[], bigint[], bigint[], bytea[], text, text)
            """,
            """
            CREATE FUNCTION strata_append_if_unchanged(
                p_zone bigint, p_owner text, p_end bigint, p_chain bigint, p_access text, p_grants text,
                p_replica_high bigint, p_replica_low bigint, p_had_ledger boolean, p_ledger_owner text,
                p_acknowledged bigint, p_unchecked_through bigint,
                p_user text, p_new_acknowledged bigint, p_adding bigint, p_limit bigint, p_new_chain bigint,
                p_positions bigint[], p_firsts bigint[], p_lasts bigint[], p_digest_highs bigint[], p_digest_lows bigint[],
                p_chains bigint[], p_bytes bytea[], p_channel text, p_announcement text
            ) RETURNS boolean LANGUAGE plpgsql AS $$
            DECLARE
                zone_end bigint;
                zone_chain bigint;
                zone_access text;
                zone_grants text;
                used bigint;
                held_owner text;
                held_acknowledged bigint;
                held_unchecked bigint;
                has_ledger boolean;
            BEGIN
                SELECT z.end_position, z.chain, z.access, z.grants, o.stored_bytes INTO zone_end, zone_chain, zone_access, zone_grants, used
                FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
                WHERE z.zone_id = p_zone AND z.owner = p_owner
                FOR UPDATE OF z, o;
                IF NOT FOUND OR zone_end <> p_end OR zone_chain <> p_chain OR zone_access <> p_access OR zone_grants <> p_grants THEN
                    RETURN false;
                END IF;
                IF p_limit IS NOT NULL AND used + p_adding > p_limit THEN
                    RETURN false;
                END IF;
                SELECT owner, acknowledged, unchecked_through INTO held_owner, held_acknowledged, held_unchecked
                FROM strata_replicas
                WHERE zone_id = p_zone AND replica_high = p_replica_high AND replica_low = p_replica_low;
                has_ledger := FOUND;
                IF has_ledger <> p_had_ledger OR (has_ledger AND (held_owner IS DISTINCT FROM p_ledger_owner
                    OR held_acknowledged <> p_acknowledged OR held_unchecked <> p_unchecked_through)) THEN
                    RETURN false;
                END IF;
                INSERT INTO strata_transactions
                    (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
                SELECT p_zone, t.p, p_replica_high, p_replica_low, t.f, t.l, t.dh, t.dl, t.c, t.b
                FROM unnest(p_positions, p_firsts, p_lasts, p_digest_highs, p_digest_lows, p_chains, p_bytes) AS t(p, f, l, dh, dl, c, b);
                UPDATE strata_zones SET end_position = end_position + cardinality(p_positions), chain = p_new_chain,
                    stored_bytes = stored_bytes + p_adding
                WHERE zone_id = p_zone;
                UPDATE strata_owners SET stored_bytes = stored_bytes + p_adding WHERE owner = p_owner;
                INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
                VALUES (p_zone, p_replica_high, p_replica_low, p_user, p_new_acknowledged, p_unchecked_through)
                ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
                SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through;
                PERFORM pg_notify(p_channel, p_announcement);
                RETURN true;
            END
            $$
            """,
        ],
        5: [
            """
            CREATE UNLOGGED TABLE strata_limit_buckets (
                name text NOT NULL,
                key text NOT NULL,
                tokens double precision NOT NULL,
                updated double precision NOT NULL,
                taken boolean NOT NULL,
                PRIMARY KEY (name, key)
            )
            """,
        ],
        6: appendPlanned,
        7: [
            """
            CREATE TABLE strata_replica_owners (
                replica_high bigint NOT NULL,
                replica_low bigint NOT NULL,
                owner text NOT NULL,
                PRIMARY KEY (replica_high, replica_low)
            )
            """,
            """
            INSERT INTO strata_replica_owners (replica_high, replica_low, owner)
            SELECT replica_high, replica_low, min(owner) FROM strata_replicas WHERE owner IS NOT NULL
            GROUP BY replica_high, replica_low HAVING count(DISTINCT owner) = 1
            """,
        ],
        8: [
            "ALTER TABLE strata_zones ADD COLUMN lineage bigint[] NOT NULL DEFAULT '{}'",
            "ALTER TABLE strata_deleted_zones ADD COLUMN epoch bigint, ADD COLUMN lineage bigint[] NOT NULL DEFAULT '{}'",
        ],
        9: [
            // No foreign key to strata_owners: its check would share-lock the owner's row for the
            // whole insert of a 1 MiB chunk, holding up the owner's pushes (which lock that row).
            """
            CREATE TABLE strata_asset_chunks (
                owner text NOT NULL,
                sha256 bytea NOT NULL,
                bytes bytea NOT NULL,
                PRIMARY KEY (owner, sha256)
            )
            """,
            "ALTER TABLE strata_asset_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL",
            """
            CREATE TABLE strata_asset_manifests (
                owner text NOT NULL,
                sha256 bytea NOT NULL,
                manifest bytea NOT NULL,
                PRIMARY KEY (owner, sha256)
            )
            """,
            """
            CREATE TABLE strata_asset_links (
                zone_id bigint NOT NULL REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                sha256 bytea NOT NULL,
                PRIMARY KEY (zone_id, sha256)
            )
            """,
            """
            CREATE TABLE strata_asset_uploads (
                zone_id bigint NOT NULL REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                sha256 bytea NOT NULL,
                manifest bytea NOT NULL,
                received integer[] NOT NULL DEFAULT '{}',
                PRIMARY KEY (zone_id, sha256)
            )
            """,
        ],
        10: [
            // now() is the same for every row (no table rewrite); rows written later carry the
            // server's clock.
            "ALTER TABLE strata_asset_links ADD COLUMN confirmed_at bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint",
            "ALTER TABLE strata_asset_uploads ADD COLUMN touched_at bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint",
        ],
        11: [
            "ALTER TABLE strata_asset_uploads ADD COLUMN uploader text NOT NULL DEFAULT ''",
            "UPDATE strata_asset_uploads u SET uploader = z.owner FROM strata_zones z WHERE z.zone_id = u.zone_id",
            "ALTER TABLE strata_asset_uploads ALTER COLUMN uploader DROP DEFAULT",
            "ALTER TABLE strata_asset_uploads DROP CONSTRAINT strata_asset_uploads_pkey, ADD PRIMARY KEY (zone_id, sha256, uploader)",
            "CREATE INDEX strata_asset_uploads_uploader ON strata_asset_uploads (uploader)",
        ],
        12: databaseChanges,
        // A zone's oldest supported app schema version (`ZoneSettings.minSchemaVersion`).
        13: ["ALTER TABLE strata_zones ADD COLUMN min_schema_version integer NOT NULL DEFAULT 1"],
        // The zones' device registries (`PostgresZoneStorage+Devices.swift`).
        14: [
            """
            CREATE TABLE strata_devices (
                zone_id bigint NOT NULL REFERENCES strata_zones (zone_id) ON DELETE CASCADE,
                replica_high bigint NOT NULL,
                replica_low bigint NOT NULL,
                user_name text NOT NULL,
                last_seen bigint NOT NULL,
                divergent boolean NOT NULL,
                entry text NOT NULL,
                PRIMARY KEY (zone_id, user_name, replica_high, replica_low)
            )
            """,
            "CREATE INDEX strata_devices_divergent ON strata_devices (divergent) WHERE divergent",
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
