import NIOCore
import PostgresNIO
import StrataCore
import StrataServer

extension PostgresZoneStorage {
    /// Refuses a new upload of `user`'s into zone `zoneKey` past `limits` (one already begun, begun
    /// again, passes). The counts are taken under transaction-scoped advisory locks of the user,
    /// then of the zone (always in that order, so no two begins wait on each other in a cycle),
    /// held until the caller's transaction commits the upload's row: begins on several instances
    /// at once cannot both take the last place.
    func checkUnfinished(_ limits: UnfinishedUploadLimits, zone zoneKey: Int64, asset: AssetHash, user: String, id: ZoneID,
                         on connection: PostgresConnection) async throws {
        guard limits.perUser > 0 || limits.perZone > 0 else { return }
        let key = ByteBuffer(bytes: asset.bytes)
        let begun = try await values(connection.query("""
            SELECT 1 FROM strata_asset_uploads WHERE zone_id = \(zoneKey) AND sha256 = \(key) AND uploader = \(user)
            """, logger: logger), as: Int32.self)
        guard begun.isEmpty else { return }
        if limits.perUser > 0 {
            let lock = "strata.unfinished-uploads.user:" + user
            _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(lock), 0))", logger: logger)
            let count = try await values(connection.query("SELECT count(*) FROM strata_asset_uploads WHERE uploader = \(user)", logger: logger),
                                         as: Int64.self).first ?? 0
            if count >= Int64(limits.perUser) {
                throw UnfinishedUploadLimits.refusal("unfinishedUploadsPerUser", limit: limits.perUser, count: Int(count), asset: asset, zone: id, user: user)
            }
        }
        // The zone's cap counts the other users' uploads and never refuses its owner (bounded by
        // the per-user cap): else a few grantees could fill it and lock the owner out of uploads
        // into their own zone.
        if limits.perZone > 0, user != id.owner {
            let lock = "strata.unfinished-uploads.zone:" + String(zoneKey)
            _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(lock), 0))", logger: logger)
            let count = try await values(connection.query("SELECT count(*) FROM strata_asset_uploads WHERE zone_id = \(zoneKey) AND uploader <> \(id.owner)",
                                                          logger: logger), as: Int64.self).first ?? 0
            if count >= Int64(limits.perZone) {
                throw UnfinishedUploadLimits.refusal("unfinishedUploadsPerZone", limit: limits.perZone, count: Int(count), asset: asset, zone: id, user: user)
            }
        }
    }
}
