import Foundation
import PostgresNIO
public import StrataProtocol
import StrataCore
public import StrataServer

/// The device registry in PostgreSQL (`strata_devices`, schema version 14): one row per zone life,
/// reporting user and replica, replaced by each report of that user's device.
extension PostgresZoneStorage {
    public func devices(zone id: ZoneID) async throws(ZoneStorageError) -> [DeviceEntry] {
        try await withConnection("reading the device registry of zone \(id)", zone: id) { connection in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            let texts = try await self.values(connection.query("""
                SELECT entry FROM strata_devices WHERE zone_id = \(zone.key)
                """, logger: self.logger), as: String.self)
            // A row that does not decode is left out (the registry is diagnostic), never fatal.
            return texts.compactMap { try? JSONDecoder().decode(DeviceEntry.self, from: Data($0.utf8)) }
        }
    }

    public func recordDevice(_ entry: DeviceEntry, zone id: ZoneID, epoch: UInt64, maxPerUser: Int) async throws(ZoneStorageError) {
        guard let replica = ReplicaID(entry.replica) else {
            throw ZoneStorageError(.invalidArgument, "\"\(entry.replica.prefix(64))\" is not a replica ID", zone: id.description)
        }
        let text: String
        do {
            text = String(decoding: try JSONEncoder().encode(entry), as: UTF8.self)
        } catch {
            throw ZoneStorageError(.storageFailure, "cannot encode a device entry of zone \(id): \(error)", zone: id.description)
        }
        let (high, low) = Self.halves(replica)
        let user = entry.user
        let lastSeen = Int64(bitPattern: entry.lastSeen)
        let divergent = entry.check == .divergent
        let keep = Int64(max(1, maxPerUser))
        let stored = try await withConnection("recording a device of zone \(id)", zone: id) { connection -> Bool in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            guard zone.info.epoch == epoch else { return false }
            try await connection.query("""
                INSERT INTO strata_devices (zone_id, replica_high, replica_low, user_name, last_seen, divergent, entry)
                VALUES (\(zone.key), \(high), \(low), \(user), \(lastSeen), \(divergent), \(text))
                ON CONFLICT (zone_id, user_name, replica_high, replica_low) DO UPDATE
                SET last_seen = EXCLUDED.last_seen, divergent = EXCLUDED.divergent, entry = EXCLUDED.entry
                """, logger: self.logger)
            try await connection.query("""
                DELETE FROM strata_devices WHERE zone_id = \(zone.key) AND user_name = \(user)
                AND (replica_high, replica_low) IN (
                    SELECT replica_high, replica_low FROM strata_devices WHERE zone_id = \(zone.key) AND user_name = \(user)
                    ORDER BY last_seen DESC, replica_high DESC, replica_low DESC OFFSET \(keep))
                AND NOT (replica_high = \(high) AND replica_low = \(low))
                """, logger: self.logger)
            // The zone's bounds (`DeviceRegistryBounds`): devices not seen for too long, then the
            // least recently seen beyond the zone's most.
            let expired = lastSeen - Int64(DeviceRegistryBounds.expiry)
            let perZone = Int64(DeviceRegistryBounds.maxPerZone)
            try await connection.query("""
                DELETE FROM strata_devices WHERE zone_id = \(zone.key) AND last_seen < \(expired)
                """, logger: self.logger)
            try await connection.query("""
                DELETE FROM strata_devices WHERE zone_id = \(zone.key)
                AND (user_name, replica_high, replica_low) IN (
                    SELECT user_name, replica_high, replica_low FROM strata_devices WHERE zone_id = \(zone.key)
                    ORDER BY last_seen DESC, replica_high DESC, replica_low DESC OFFSET \(perZone))
                AND NOT (user_name = \(user) AND replica_high = \(high) AND replica_low = \(low))
                """, logger: self.logger)
            return true
        }
        guard stored else {
            throw ZoneStorageError(.zoneReset, "zone \(id) was deleted and created again since the report's token", zone: id.description)
        }
    }

    public func divergentDeviceCount() async throws(ZoneStorageError) -> Int {
        try await withConnection("counting divergent devices", zone: nil) { connection in
            let counts = try await self.values(connection.query("SELECT count(*) FROM strata_devices WHERE divergent", logger: self.logger), as: Int64.self)
            return Int(counts.first ?? 0)
        }
    }
}
