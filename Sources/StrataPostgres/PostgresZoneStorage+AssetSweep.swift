import Logging
import NIOCore
import PostgresNIO
public import StrataCore
public import StrataServer

/// The sweep of assets nothing needs any more (`AssetStorage.sweepAssets(grace:)`), safe while
/// other instances push and upload:
///
/// 1. Each zone's retained history is read (outside any transaction); then its links neither
///    named by it nor confirmed within the grace are deleted in one statement. A push's check
///    confirms a link by updating its row: the delete waits for that row lock and re-checks
///    `confirmed_at` on the row as updated, so either the check sees no link (and refuses the
///    push) or the link stays.
/// 2. Uploads untouched for longer than the grace are deleted (an upload's step updates its row
///    under its lock: the same re-check).
/// 3. Per owner, in one transaction: the manifests no link of the owner's zones names are locked
///    for update, then deleted by a statement that checks again that no link names them (its
///    snapshot is taken after the locks, so a link made under the manifest's share lock
///    (`linkOwned`) is seen).
/// 4. Per owner, in one transaction: the chunks no manifest and no upload named are locked for
///    update; what the manifests and uploads name is read again in one statement (one snapshot:
///    an upload completing moves its chunks from its upload to its manifest at once); those
///    still unnamed are deleted, and their bytes leave `strata_owners.stored_bytes`. An owner's
///    upload counting the owner's chunks as there key-share locks them, so it waits for this
///    delete (and then sends them) or this waits for its upload row.
extension PostgresZoneStorage {
    public func sweepAssets(grace: Duration) async throws(ZoneStorageError) -> AssetSweepReport {
        var report = AssetSweepReport()
        let graceMilliseconds = AssetTimeline.milliseconds(grace)
        // Taken before any history is read: a confirmation after this is within the grace.
        let now = assetTimeline.now()
        guard now >= graceMilliseconds else { return report }
        let cutoff = Int64(clamping: now - graceMilliseconds)
        for zone in try await zones() {
            guard let named = await assetsNamedByHistory(of: zone, forgettingDeletedBefore: UInt64(cutoff)) else { continue }
            let epoch = Int64(bitPattern: zone.epoch)
            report.links += try await transaction("sweeping the asset links of zone \(zone.id)", zone: zone.id) { connection -> Int in
                try await self.values(connection.query("""
                    DELETE FROM strata_asset_links l USING strata_zones z
                    WHERE l.zone_id = z.zone_id AND z.owner = \(zone.id.owner) AND z.name = \(zone.id.name) AND z.epoch = \(epoch)
                      AND l.confirmed_at <= \(cutoff) AND NOT (l.sha256 = ANY(\(Self.buffers(named))::bytea[]))
                    RETURNING 1
                    """, logger: self.logger), as: Int32.self).count
            }
        }
        report.uploads = try await transaction("sweeping abandoned asset uploads", zone: nil) { connection -> Int in
            try await self.values(connection.query("DELETE FROM strata_asset_uploads WHERE touched_at <= \(cutoff) RETURNING 1", logger: self.logger),
                                  as: Int32.self).count
        }
        let owners = try await transaction("listing the owners of assets", zone: nil) { connection -> [String] in
            try await self.values(connection.query("""
                SELECT owner FROM strata_asset_manifests UNION SELECT owner FROM strata_asset_chunks
                """, logger: self.logger), as: String.self)
        }
        for owner in owners.sorted() {
            report.manifests += try await sweepManifests(owner: owner)
            let (chunks, bytes) = try await sweepChunks(owner: owner)
            report.chunks += chunks
            report.bytesFreed += bytes
        }
        return report
    }

    /// Deletes `owner`'s manifests no link names; returns how many.
    private func sweepManifests(owner: String) async throws(ZoneStorageError) -> Int {
        try await transaction("sweeping the asset manifests of \(owner)", zone: nil) { connection -> Int in
            let unlinked = try await self.hashes(connection.query("""
                SELECT m.sha256 FROM strata_asset_manifests m
                WHERE m.owner = \(owner) AND NOT EXISTS (
                    SELECT 1 FROM strata_asset_links l JOIN strata_zones z ON z.zone_id = l.zone_id WHERE z.owner = \(owner) AND l.sha256 = m.sha256)
                ORDER BY m.sha256 FOR UPDATE OF m
                """, logger: self.logger))
            guard !unlinked.isEmpty else { return 0 }
            // A new statement, a new snapshot: links committed while the locks were waited for.
            return try await self.values(connection.query("""
                DELETE FROM strata_asset_manifests m
                WHERE m.owner = \(owner) AND m.sha256 = ANY(\(Self.buffers(unlinked))::bytea[]) AND NOT EXISTS (
                    SELECT 1 FROM strata_asset_links l JOIN strata_zones z ON z.zone_id = l.zone_id WHERE z.owner = \(owner) AND l.sha256 = m.sha256)
                RETURNING 1
                """, logger: self.logger), as: Int32.self).count
        }
    }

    /// Deletes `owner`'s chunks no manifest and no upload names, uncounting their bytes; returns
    /// how many and their bytes.
    private func sweepChunks(owner: String) async throws(ZoneStorageError) -> (Int, Int64) {
        // Candidates first, without locks (most chunks are named: nothing to lock for them).
        let candidates = try await transaction("finding unnamed asset chunks of \(owner)", zone: nil) { connection -> Set<AssetHash> in
            guard let named = try await self.chunksNamed(owner: owner, on: connection) else { return [] }
            let stored = try await self.hashes(connection.query("SELECT sha256 FROM strata_asset_chunks WHERE owner = \(owner)", logger: self.logger))
            return stored.subtracting(named)
        }
        guard !candidates.isEmpty else { return (0, 0) }
        return try await transaction("sweeping the asset chunks of \(owner)", zone: nil) { connection -> (Int, Int64) in
            let locked = try await self.hashes(connection.query("""
                SELECT sha256 FROM strata_asset_chunks WHERE owner = \(owner) AND sha256 = ANY(\(Self.buffers(candidates))::bytea[])
                ORDER BY sha256 FOR UPDATE
                """, logger: self.logger))
            guard let named = try await self.chunksNamed(owner: owner, on: connection) else { return (0, 0) }
            let unnamed = locked.subtracting(named)
            guard !unnamed.isEmpty else { return (0, 0) }
            let sizes = try await self.values(connection.query("""
                DELETE FROM strata_asset_chunks WHERE owner = \(owner) AND sha256 = ANY(\(Self.buffers(unnamed))::bytea[])
                RETURNING octet_length(bytes)::bigint
                """, logger: self.logger), as: Int64.self)
            let freed = sizes.reduce(0, +)
            if freed != 0 {
                try await connection.query("UPDATE strata_owners SET stored_bytes = stored_bytes - \(freed) WHERE owner = \(owner)", logger: self.logger)
            }
            return (sizes.count, freed)
        }
    }

    /// The chunks `owner`'s manifests and uploads name, read in one statement (one snapshot);
    /// `nil` when one of them does not decode (then no chunk of the owner may be judged unnamed).
    private func chunksNamed(owner: String, on connection: PostgresConnection) async throws -> Set<AssetHash>? {
        let found = try await rows(connection.query("""
            SELECT sha256, manifest FROM strata_asset_manifests WHERE owner = \(owner)
            UNION ALL
            SELECT u.sha256, u.manifest FROM strata_asset_uploads u JOIN strata_zones z ON z.zone_id = u.zone_id WHERE z.owner = \(owner)
            """, logger: logger), as: (ByteBuffer, ByteBuffer).self)
        var named = Set<AssetHash>()
        for (hash, stored) in found {
            guard let asset = AssetHash(bytes: hash.readableBytesView),
                  let manifest = AssetManifest.decode(Array(stored.readableBytesView), expecting: asset) else {
                logger.error("an asset manifest of \(owner) does not decode: none of the owner's chunks is swept")
                return nil
            }
            named.formUnion(manifest.chunks)
        }
        return named
    }
}
