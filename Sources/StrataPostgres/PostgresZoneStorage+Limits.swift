import PostgresNIO
public import StrataServer

/// The server's limit buckets in the database (`strata_limit_buckets`, schema version 5), shared
/// by every instance on it: the rate limit and the failed-authentication limit hold across
/// instances as they hold in one. Each call is one statement — one round trip, atomic per bucket
/// (the `UPSERT` holds the bucket's row lock while it decides) — timed by the database's clock,
/// which every instance shares.
///
/// The table is `UNLOGGED`: a counter is not worth a WAL write and a commit flush per request,
/// and a database that crashes forgets the buckets (every bucket is full again) and nothing
/// else.
extension PostgresZoneStorage: LimitBuckets {
    /// The database keeps the buckets.
    public var limitBuckets: (any LimitBuckets)? { self }

    /// `value` as an SQL `float8` literal (its text is a number's, nothing a caller can inject).
    private static func literal(_ value: Double) -> String {
        if value.isNaN { return "'NaN'::float8" }
        if value.isInfinite { return value > 0 ? "'Infinity'::float8" : "'-Infinity'::float8" }
        return "\(value)::float8"
    }

    /// The longest a limit's count waits for a connection: past it the server counts the request
    /// in the instance's own buckets (`LimitBuckets`' fallback), so that requests — a flood of
    /// bad tokens among them — never queue behind busy connections for the pushes' full wait.
    static let limitConnectionWait = Duration.milliseconds(250)

    /// The database's clock, in seconds since 1970.
    private static let databaseNow = "extract(epoch FROM clock_timestamp())::float8"

    public func take(_ bucket: LimitBucketName, limit: RateLimit, always: Bool) async throws(ZoneStorageError) -> LimitBucketTake {
        let (burst, rate) = (limit.burst, limit.requestsPerSecond)
        // A bucket never used is full: its first take leaves burst - 1.
        let first = LimitBucketTake(taken: burst >= 1 || always, tokens: max(0, burst - 1))
        let answer = try await withConnection("counting \(bucket) in the shared limits", zone: nil, wait: Self.limitConnectionWait) { connection in
            // `r` is the bucket refilled to now; the statement runs under the row's lock, so
            // two instances taking at once take two tokens. `updated` follows the database's
            // clock even backwards: a clock stepped back refills nothing for that take, and
            // refills from there on (keeping the later time froze every bucket until the clock
            // caught up).
            let r = "least(\(Self.literal(burst)), b.tokens + greatest(0, EXCLUDED.updated - b.updated) * \(Self.literal(rate)))"
            let rows = try await connection.query("""
                INSERT INTO strata_limit_buckets AS b (name, key, tokens, updated, taken)
                VALUES (\(bucket.limit), \(bucket.key), \(first.tokens), \(unescaped: Self.databaseNow), \(first.taken))
                ON CONFLICT (name, key) DO UPDATE SET
                    tokens = CASE WHEN \(unescaped: r) >= 1 THEN \(unescaped: r) - 1 WHEN \(always) THEN 0 ELSE \(unescaped: r) END,
                    taken = \(unescaped: r) >= 1 OR \(always),
                    updated = EXCLUDED.updated
                RETURNING taken, tokens
                """, logger: self.logger)
            var found: LimitBucketTake?
            for try await (taken, tokens) in rows.decode((Bool, Double).self) {
                found = LimitBucketTake(taken: taken, tokens: tokens)
            }
            return found
        }
        guard let answer else { throw ZoneStorageError(.storageFailure, "PostgreSQL: counting \(bucket) in the shared limits returned no row") }
        // Now and then, forget the buckets of this limit that are full again (untouched for as
        // long as a refill from empty takes): the table stays as large as the keys limited now.
        if rate > 0, UInt64.random(in: 0..<1024) == 0 {
            _ = try? await withConnection("forgetting full buckets of the shared limits", zone: nil) { connection in
                try await connection.query("""
                    DELETE FROM strata_limit_buckets
                    WHERE name = \(bucket.limit) AND updated < \(unescaped: Self.databaseNow) - \(burst / rate)
                    """, logger: self.logger)
            }
        }
        return answer
    }

    public func level(_ bucket: LimitBucketName, limit: RateLimit) async throws(ZoneStorageError) -> Double? {
        let (burst, rate) = (limit.burst, limit.requestsPerSecond)
        return try await withConnection("reading \(bucket) of the shared limits", zone: nil, wait: Self.limitConnectionWait) { connection in
            let rows = try await connection.query("""
                SELECT least(\(burst), tokens + greatest(0, \(unescaped: Self.databaseNow) - updated) * \(rate))
                FROM strata_limit_buckets WHERE name = \(bucket.limit) AND key = \(bucket.key)
                """, logger: self.logger)
            var level: Double?
            for try await tokens in rows.decode(Double.self) { level = tokens }
            return level
        }
    }
}
