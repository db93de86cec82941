extension PostgresSchema {
    /// Version 12: the database changes (`GET /v1/database/changes`) and the acceptance of shares.
    ///
    /// - `strata_database_clock(life, stamp, horizon, key)`: one row, the database-wide counter
    ///   every instance shares. `life` is random, chosen when the table is made (a token of another
    ///   database gets a reset); `horizon` the newest stamp of the removals forgotten; `key` a
    ///   random secret the tokens' stamps are sealed with (they do not tell a user how many changes
    ///   the server saw).
    /// - `strata_zones.change_stamp`: the counter's value at the zone's latest change, and
    ///   `strata_zones.accepted`: the grantees who accepted the share (the grants of before the
    ///   upgrade count as accepted). `strata_deleted_zones.accepted` keeps them through a deletion
    ///   (`NULL`, as rows of before the upgrade: every grant accepted).
    /// - `strata_zone_removals(member, owner, name, reason, stamp)`: who lost which zone and why
    ///   (`revoked`, `deleted`), bounded to the latest 65,536 or so.
    /// - Constraint triggers on `strata_zones`, deferred to the commit, stamp the zone (insert; an
    ///   update of its end, access, grants, merges or acceptances; delete) in the transaction that
    ///   changes it, and record the removals (the members an update or a delete takes away: the
    ///   owner, and the grantees unless the zone is private). Every write of a zone row is stamped,
    ///   whichever instance (or older server during a rolling upgrade) makes it.
    ///
    /// Why the counter is a row and not a sequence: a sequence hands out values that commit in
    /// any order, so a reader that saw stamp 7 committed could miss stamp 6 committing after it,
    /// for good. The clock row is locked from the stamp to the commit, and the stamp is taken by a
    /// deferred trigger (the last thing a transaction does, after every other lock it takes: no
    /// deadlock), so stamps commit in order and a reader that reads the clock at `c` sees every
    /// change stamped up to `c`. The cost is that zone changes serialize across the database for
    /// the time of their commit.
    static let databaseChanges: [String] = [
        """
        CREATE TABLE strata_database_clock (
            only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
            life bigint NOT NULL,
            stamp bigint NOT NULL DEFAULT 0,
            horizon bigint NOT NULL DEFAULT 0,
            key bigint NOT NULL
        )
        """,
        // Two random 64-bit values, from an MD5 of the moment (random() alone has 52 bits).
        """
        INSERT INTO strata_database_clock (life, key)
        SELECT ('x' || substr(h, 1, 16))::bit(64)::bigint, ('x' || substr(h, 17, 16))::bit(64)::bigint
        FROM (SELECT md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text) AS h) AS seed
        """,
        "ALTER TABLE strata_zones ADD COLUMN change_stamp bigint NOT NULL DEFAULT 0, ADD COLUMN accepted text[] NOT NULL DEFAULT '{}'",
        "UPDATE strata_zones SET accepted = ARRAY(SELECT jsonb_object_keys(grants::jsonb) ORDER BY 1)",
        "CREATE INDEX strata_zones_change_stamp ON strata_zones (change_stamp)",
        "ALTER TABLE strata_deleted_zones ADD COLUMN accepted text[]",
        """
        CREATE TABLE strata_zone_removals (
            member text NOT NULL,
            owner text NOT NULL,
            name text NOT NULL,
            reason text NOT NULL,
            stamp bigint NOT NULL
        )
        """,
        "CREATE INDEX strata_zone_removals_member ON strata_zone_removals (member, stamp)",
        "CREATE INDEX strata_zone_removals_stamp ON strata_zone_removals (stamp)",
        """
        CREATE FUNCTION strata_zone_members(p_owner text, p_access text, p_grants text) RETURNS SETOF text
        LANGUAGE sql IMMUTABLE AS $$
            SELECT p_owner
            UNION
            SELECT g FROM jsonb_object_keys(CASE WHEN p_access = 'private' THEN '{}'::jsonb ELSE p_grants::jsonb END) AS g
        $$
        """,
        """
        CREATE FUNCTION strata_stamp_zone() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            next_stamp bigint;
            oldest_kept bigint;
        BEGIN
            UPDATE strata_database_clock SET stamp = stamp + 1 RETURNING stamp INTO next_stamp;
            IF TG_OP = 'DELETE' THEN
                INSERT INTO strata_zone_removals (member, owner, name, reason, stamp)
                SELECT m, OLD.owner, OLD.name, 'deleted', next_stamp FROM strata_zone_members(OLD.owner, OLD.access, OLD.grants) AS m;
            ELSE
                IF TG_OP = 'UPDATE' THEN
                    INSERT INTO strata_zone_removals (member, owner, name, reason, stamp)
                    SELECT m, OLD.owner, OLD.name, 'revoked', next_stamp FROM strata_zone_members(OLD.owner, OLD.access, OLD.grants) AS m
                    WHERE m NOT IN (SELECT strata_zone_members(NEW.owner, NEW.access, NEW.grants));
                END IF;
                UPDATE strata_zones SET change_stamp = next_stamp WHERE zone_id = NEW.zone_id;
            END IF;
            -- The removals kept are bounded: now and then the oldest beyond the bound go, and the
            -- horizon says a token older than them gets a reset.
            IF TG_OP <> 'INSERT' AND random() < 1.0 / 64 THEN
                SELECT stamp INTO oldest_kept FROM strata_zone_removals ORDER BY stamp DESC OFFSET 65536 LIMIT 1;
                IF oldest_kept IS NOT NULL THEN
                    DELETE FROM strata_zone_removals WHERE stamp <= oldest_kept;
                    UPDATE strata_database_clock SET horizon = greatest(horizon, oldest_kept);
                END IF;
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE CONSTRAINT TRIGGER strata_zones_stamp_insert AFTER INSERT ON strata_zones
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION strata_stamp_zone()
        """,
        """
        CREATE CONSTRAINT TRIGGER strata_zones_stamp_update AFTER UPDATE ON strata_zones
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        WHEN (OLD.end_position IS DISTINCT FROM NEW.end_position OR OLD.access IS DISTINCT FROM NEW.access
              OR OLD.grants IS DISTINCT FROM NEW.grants OR OLD.merges IS DISTINCT FROM NEW.merges
              OR OLD.accepted IS DISTINCT FROM NEW.accepted OR OLD.epoch IS DISTINCT FROM NEW.epoch)
        EXECUTE FUNCTION strata_stamp_zone()
        """,
        """
        CREATE CONSTRAINT TRIGGER strata_zones_stamp_delete AFTER DELETE ON strata_zones
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION strata_stamp_zone()
        """,
    ]
}
