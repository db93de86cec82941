extension PostgresSchema {
    /// Version 6: `strata_append_planned(…)` takes over from `strata_append_if_unchanged` (versions 2
    /// and 4), which decided part of a push itself (the stored-bytes quota) and compared the
    /// replica's ledger by whether its row existed. The new function decides nothing: under the
    /// zone's and the owner's row locks it compares the basis the caller planned the push from
    /// (`AppendInputs.basis`: the zone's end, chain, access and grants as stored, the owner's
    /// stored bytes when a quota was in force, the replica's owner, highest sequence and
    /// unchecked sequences, a missing row reading as no owner and zeros) with what it reads, and
    /// only when they are equal writes the plan's rows: the transactions, the zone's end, chain
    /// and counters, the replica's ledger, and the announcement. Otherwise it changes nothing and
    /// answers `false`, and the caller plans again under the lock. Its statements run one after
    /// the other, so the ledger is read after the locks are held.
    ///
    /// `strata_append_if_unchanged` (version 4's) stays: instances of the older version still call
    /// it during a rolling upgrade, and it is as safe as it was (access, grants and quota checked
    /// under the same locks).
    static let appendPlanned: [String] = [
        """
        CREATE FUNCTION strata_append_planned(
            p_zone bigint, p_owner text, p_end bigint, p_chain bigint, p_access text, p_grants text, p_used bigint,
            p_replica_high bigint, p_replica_low bigint, p_ledger_owner text, p_acknowledged bigint, p_unchecked_through bigint,
            p_new_owner text, p_new_acknowledged bigint, p_new_unchecked_through bigint, p_adding bigint, p_new_chain bigint,
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
            held_acknowledged bigint := 0;
            held_unchecked bigint := 0;
        BEGIN
            SELECT z.end_position, z.chain, z.access, z.grants, o.stored_bytes INTO zone_end, zone_chain, zone_access, zone_grants, used
            FROM strata_zones z JOIN strata_owners o ON o.owner = z.owner
            WHERE z.zone_id = p_zone AND z.owner = p_owner
            FOR UPDATE OF z, o;
            IF NOT FOUND OR zone_end <> p_end OR zone_chain <> p_chain OR zone_access <> p_access OR zone_grants <> p_grants
                OR (p_used IS NOT NULL AND used <> p_used) THEN
                RETURN false;
            END IF;
            SELECT owner, acknowledged, unchecked_through INTO held_owner, held_acknowledged, held_unchecked
            FROM strata_replicas
            WHERE zone_id = p_zone AND replica_high = p_replica_high AND replica_low = p_replica_low;
            IF NOT FOUND THEN
                held_owner := NULL;
                held_acknowledged := 0;
                held_unchecked := 0;
            END IF;
            IF held_owner IS DISTINCT FROM p_ledger_owner OR held_acknowledged <> p_acknowledged OR held_unchecked <> p_unchecked_through THEN
                RETURN false;
            END IF;
            INSERT INTO strata_transactions
                (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
            SELECT p_zone, t.p, p_replica_high, p_replica_low, t.f, t.l, t.dh, t.dl, t.c, t.b
            FROM unnest(p_positions, p_firsts, p_lasts, p_digest_highs, p_digest_lows, p_chains, p_bytes) AS t(p, f, l, dh, dl, c, b);
            UPDATE strata_zones SET end_position = p_end + cardinality(p_positions), chain = p_new_chain,
                stored_bytes = stored_bytes + p_adding
            WHERE zone_id = p_zone;
            UPDATE strata_owners SET stored_bytes = stored_bytes + p_adding WHERE owner = p_owner;
            INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
            VALUES (p_zone, p_replica_high, p_replica_low, p_new_owner, p_new_acknowledged, p_new_unchecked_through)
            ON CONFLICT (zone_id, replica_high, replica_low) DO UPDATE
            SET owner = EXCLUDED.owner, acknowledged = EXCLUDED.acknowledged, unchecked_through = EXCLUDED.unchecked_through;
            PERFORM pg_notify(p_channel, p_announcement);
            RETURN true;
        END
        $$
        """,
    ]
}
