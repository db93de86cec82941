import Foundation
import PostgresNIO
import StrataProtocol
public import StrataServer

/// The database changes and the acceptance of shares (schema version 12, see
/// `PostgresSchema.databaseChanges`): the counter and the removals are the database's, shared by
/// every instance, and the zone rows are stamped by the schema's triggers in the transactions that
/// change them.
extension PostgresZoneStorage {
    public func databaseClock() async throws(ZoneStorageError) -> DatabaseClock {
        try await withConnection("reading the database clock", zone: nil) { connection in
            let found = try await self.rows(connection.query("SELECT life, stamp, horizon, key FROM strata_database_clock", logger: self.logger),
                                            as: (Int64, Int64, Int64, Int64).self)
            guard let (life, stamp, horizon, key) = found.first else {
                throw ZoneStorageError(.storageFailure, "the database clock (strata_database_clock) has no row")
            }
            return DatabaseClock(life: UInt64(bitPattern: life), stamp: UInt64(bitPattern: stamp), horizon: UInt64(bitPattern: horizon),
                                 key: UInt64(bitPattern: key))
        }
    }

    public func memberZones(of user: String, after: UInt64?, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [MemberZone] {
        let after = after.map { Int64(bitPattern: $0) } ?? -1
        return try await withConnection("listing the zones of \(user)", zone: nil) { connection in
            try await self.rows(connection.query("""
                SELECT \(unescaped: ZoneRow.describedColumns) FROM strata_zones
                WHERE (owner = \(user) OR (access <> 'private' AND grants::jsonb ? \(user)))
                  AND change_stamp > \(after) AND change_stamp <= \(Int64(bitPattern: through))
                ORDER BY change_stamp, owner, name LIMIT \(max(0, limit))
                """, logger: self.logger), as: ZoneRow.Described.self).map { columns in
                let row = try ZoneRow(described: columns).decoded()
                // The chain column is the fingerprint at the log's end (0 for an empty log).
                return MemberZone(info: row.info, stamp: row.stamp, end: row.end, fingerprint: row.end == 0 ? 0 : row.chain)
            }
        }
    }

    public func removals(of user: String, after: UInt64, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [ZoneRemoval] {
        try await withConnection("reading the removals of \(user)", zone: nil) { connection in
            try await self.rows(connection.query("""
                SELECT owner, name, reason, stamp FROM strata_zone_removals
                WHERE member = \(user) AND stamp > \(Int64(bitPattern: after)) AND stamp <= \(Int64(bitPattern: through))
                ORDER BY stamp LIMIT \(max(0, limit))
                """, logger: self.logger), as: (String, String, String, Int64).self).map { owner, name, reason, stamp in
                guard let reason = ZoneRemovalReason(rawValue: reason) else {
                    throw ZoneStorageError(.storageFailure, "a removal of zone \(name) of \(owner) has an unknown reason \"\(reason)\"")
                }
                return ZoneRemoval(zone: ZoneID(owner: owner, name: name), reason: reason, stamp: UInt64(bitPattern: stamp))
            }
        }
    }

    public func acceptShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        let info = try await transaction("accepting the share of zone \(id)", zone: id) { connection in
            let row = try await self.zoneRow(id, on: connection, lock: true)
            var info = try Self.checkGrantee(row?.info, id, user: user)
            guard !info.accepted.contains(user), let key = row?.key else { return info }
            info.accepted.insert(user)
            try await connection.query("UPDATE strata_zones SET accepted = \(info.accepted.sorted()) WHERE zone_id = \(key)", logger: self.logger)
            try await self.announce(id, on: connection)
            return info
        }
        logger.info("share accepted", metadata: ["zone": "\(id)", "user": "\(user)"])
        return info
    }

    public func leaveShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        let info = try await transaction("leaving zone \(id)", zone: id) { connection in
            let row = try await self.zoneRow(id, on: connection, lock: true)
            var info = try Self.checkGrantee(row?.info, id, user: user)
            guard let key = row?.key else { return info }
            info.grants[user] = nil
            info.accepted.remove(user)
            // The trigger records the removal (the leaver is no longer a member).
            try await connection.query("""
                UPDATE strata_zones SET grants = \(try Self.encode(info.grants)), accepted = \(info.accepted.sorted()) WHERE zone_id = \(key)
                """, logger: self.logger)
            try await self.announce(id, on: connection)
            return info
        }
        logger.info("share left", metadata: ["zone": "\(id)", "user": "\(user)"])
        return info
    }
}
