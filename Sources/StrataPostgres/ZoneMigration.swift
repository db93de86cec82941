import Logging
import NIOCore
import PostgresNIO
import StrataCore
import StrataProtocol
public import StrataServer

/// `strata migrate`: copies every zone of an embedded data directory into a PostgreSQL database,
/// exactly — the same epochs, merges, positions, retained history, snapshots, replica owners and
/// digests (retired ones included) — so that devices go on with the change tokens they hold, and
/// retries are still checked for forks. Each zone is copied in one database transaction (a zone
/// is in the database wholly or not at all) and verified afterwards by comparing its
/// `ZoneDigest` on both sides. A zone already in the database with the same digest is skipped
/// (a migration run again after an interruption); one that differs is refused.
///
/// The assets each zone holds are copied with it (after its log): their manifests, the chunks the
/// owner lacks in the database (read one at a time, each verified against its hash by the
/// embedded storage, counted in the owner's stored bytes), and the zone's links. A run again
/// skips what is there, so an interrupted copy of assets is finished by the next run.
public enum ZoneMigration {
    public struct Report: Sendable, Hashable {
        /// The zones copied and verified.
        public var copied: [ZoneID] = []
        /// The zones found in the database already, with the same digest.
        public var alreadyThere: [ZoneID] = []
        /// The log entries copied (retained history) and their bytes.
        public var transactions = 0
        public var bytes: Int64 = 0
        /// The assets the zones hold (each zone's counted), and the bytes of the chunks stored
        /// for them (each chunk once per owner; none for those in the database already).
        public var assets = 0
        public var assetBytes: Int64 = 0
    }

    /// Copies every zone of `source` into `target`; `progress` hears about each zone.
    public static func copy(from source: EmbeddedZoneStorage, to target: PostgresZoneStorage,
                            progress: (String) -> Void = { _ in }) async throws -> Report {
        var report = Report()
        // The server-wide replica owners first: a replica stays its user's in the database too.
        for (replica, user) in await source.replicaOwners().sorted(by: { $0.key < $1.key }) {
            try await target.bindReplica(replica, to: user)
        }
        for zone in try await source.zones() {
            let id = zone.id
            let expected = try await ZoneDigest(zone: id, in: source)
            if try await target.zone(id) != nil {
                let found = try await ZoneDigest(zone: id, in: target)
                guard found == expected else {
                    throw ZoneStorageError(.zoneExists, "zone \(id) is in the database already and differs from the data directory's (database: \(found); directory: \(expected)); nothing of it was copied",
                                           zone: id.description)
                }
                report.alreadyThere.append(id)
                progress("zone \(id): in the database already, the same (\(expected.end) positions)")
                try await copyAssets(of: id, from: source, to: target, into: &report, progress: progress)
                continue
            }
            let (transactions, bytes) = try await target.importZone(try await source.export(zone: id), from: source)
            let copied = try await ZoneDigest(zone: id, in: target)
            guard copied == expected else {
                throw ZoneStorageError(.storageFailure, "zone \(id): the copy does not verify (database: \(copied); directory: \(expected))", zone: id.description)
            }
            report.copied.append(id)
            report.transactions += transactions
            report.bytes += bytes
            progress("zone \(id): copied and verified, \(transactions) transactions from position \(expected.start), \(expected.replicas.count) replicas, state \(expected.state.prefix(16))")
            try await copyAssets(of: id, from: source, to: target, into: &report, progress: progress)
        }
        return report
    }

    private static func copyAssets(of id: ZoneID, from source: EmbeddedZoneStorage, to target: PostgresZoneStorage,
                                   into report: inout Report, progress: (String) -> Void) async throws {
        let (assets, bytes) = try await target.importAssets(of: id, from: source)
        guard assets > 0 else { return }
        report.assets += assets
        report.assetBytes += bytes
        progress("zone \(id): \(assets) asset(s) held, \(bytes) bytes of chunks stored")
    }
}

extension PostgresZoneStorage {
    /// Writes a zone exported from an embedded storage (its log entries read from `source`), in
    /// one transaction. Returns the log entries and bytes copied.
    ///
    /// - Throws: `ZoneStorageError.Code.zoneExists` when the database has the zone already.
    func importZone(_ export: ZoneExport, from source: EmbeddedZoneStorage) async throws(ZoneStorageError) -> (Int, Int64) {
        let id = export.info.id
        let grants = try Self.encode(export.info.grants)
        return try await transaction("copying zone \(id) into the database", zone: id) { connection -> (Int, Int64) in
            try await connection.query("INSERT INTO strata_owners (owner) VALUES (\(id.owner)) ON CONFLICT DO NOTHING", logger: self.logger)
            try await connection.query("SELECT 1 FROM strata_owners WHERE owner = \(id.owner) FOR UPDATE", logger: self.logger)
            if try await self.zoneRow(id, on: connection) != nil {
                throw ZoneStorageError(.zoneExists, "zone \(id) is in the database already", zone: id.description)
            }
            let merges = export.info.merges.map { Int64(bitPattern: $0) }
            let key = try await self.values(connection.query("""
                INSERT INTO strata_zones (owner, name, epoch, access, grants, merges, start_position, end_position, chain, lineage, accepted, min_schema_version)
                VALUES (\(id.owner), \(id.name), \(Int64(bitPattern: export.info.epoch)), \(export.info.access.rawValue), \(grants), \(merges),
                        \(Int64(export.start)), \(Int64(export.end)), \(Int64(bitPattern: export.chain.last ?? 0)),
                        \(export.info.lineage.map { Int64(bitPattern: $0) }), \(export.info.accepted.intersection(export.info.grants.keys).sorted()),
                        \(Int32(clamping: export.info.minSchemaVersion)))
                RETURNING zone_id
                """, logger: self.logger), as: Int64.self).first ?? 0
            // Replicas, and the digests of retired transactions (rows without bytes): the fork
            // check of retries, and (just below the start) the chain a token at the start has.
            for (replica, ledger) in export.ledgers {
                let (high, low) = Self.halves(replica)
                try await connection.query("""
                    INSERT INTO strata_replicas (zone_id, replica_high, replica_low, owner, acknowledged, unchecked_through)
                    VALUES (\(key), \(high), \(low), \(ledger.owner), \(Int64(bitPattern: ledger.acknowledged)), \(Int64(bitPattern: ledger.uncheckedThrough)))
                    """, logger: self.logger)
                let retired = ledger.transactions.filter { $0.position < export.start }
                guard !retired.isEmpty else { continue }
                let chains = retired.map { Int64(bitPattern: $0.position + 1 == export.start ? export.chain.first ?? 0 : 0) }
                try await connection.query("""
                    INSERT INTO strata_transactions
                        (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain)
                    SELECT \(key), p, \(high), \(low), f, l, dh, dl, c
                    FROM unnest(\(retired.map { Int64($0.position) })::bigint[], \(retired.map { Int64(bitPattern: $0.first) })::bigint[],
                                \(retired.map { Int64(bitPattern: $0.last) })::bigint[], \(retired.map { Int64(bitPattern: $0.digest.high) })::bigint[],
                                \(retired.map { Int64(bitPattern: $0.digest.low) })::bigint[], \(chains)::bigint[]) AS t(p, f, l, dh, dl, c)
                    """, logger: self.logger)
            }
            // The retained log, a page at a time.
            var copied = 0
            var bytes: Int64 = 0
            var position = export.start
            while position < export.end {
                let page = try await source.read(zone: id, epoch: export.info.epoch, after: position, limit: 1000)
                var positions: [Int64] = [], highs: [Int64] = [], lows: [Int64] = [], firsts: [Int64] = [], lasts: [Int64] = []
                var digestHighs: [Int64] = [], digestLows: [Int64] = [], chains: [Int64] = [], payloads: [ByteBuffer] = []
                for entry in page.transactions {
                    let header = try TransactionHeader(decoding: entry.bytes, position: entry.position)
                    let digest = TransactionDigest(of: entry.bytes)
                    let (high, low) = Self.halves(header.replica)
                    let index = Int(entry.position - export.start) + 1
                    guard index < export.chain.count else {
                        throw ZoneStorageError(.storageFailure, "zone \(id): position \(entry.position) is past the exported history", zone: id.description)
                    }
                    positions.append(Int64(entry.position))
                    highs.append(high)
                    lows.append(low)
                    firsts.append(Int64(bitPattern: header.firstSequence))
                    lasts.append(Int64(bitPattern: header.firstSequence + max(header.eventCount, 1) - 1))
                    digestHighs.append(Int64(bitPattern: digest.high))
                    digestLows.append(Int64(bitPattern: digest.low))
                    chains.append(Int64(bitPattern: export.chain[index]))
                    payloads.append(ByteBuffer(bytes: entry.bytes))
                    bytes += Int64(entry.bytes.count)
                }
                try await connection.query("""
                    INSERT INTO strata_transactions
                        (zone_id, position, replica_high, replica_low, first_sequence, last_sequence, digest_high, digest_low, chain, bytes)
                    SELECT \(key), p, rh, rl, f, l, dh, dl, c, b
                    FROM unnest(\(positions)::bigint[], \(highs)::bigint[], \(lows)::bigint[], \(firsts)::bigint[], \(lasts)::bigint[],
                                \(digestHighs)::bigint[], \(digestLows)::bigint[], \(chains)::bigint[], \(payloads)::bytea[])
                         AS t(p, rh, rl, f, l, dh, dl, c, b)
                    """, logger: self.logger)
                copied += page.transactions.count
                guard page.nextPosition > position else { break }
                position = page.nextPosition
            }
            if let snapshot = export.snapshot {
                try await connection.query("""
                    INSERT INTO strata_snapshots (zone_id, position, payload) VALUES (\(key), \(Int64(snapshot.position)), \(ByteBuffer(bytes: snapshot.payload)))
                    """, logger: self.logger)
                bytes += Int64(snapshot.payload.count)
            }
            try await connection.query("UPDATE strata_zones SET stored_bytes = \(bytes) WHERE zone_id = \(key)", logger: self.logger)
            try await connection.query("UPDATE strata_owners SET stored_bytes = stored_bytes + \(bytes) WHERE owner = \(id.owner)", logger: self.logger)
            return (copied, bytes)
        }
    }
}

extension PostgresZoneStorage {
    /// Copies the assets zone `id` holds in `source`: for each, the chunks its owner lacks here (a
    /// chunk at a time, each in its own transaction with its count), then the owner's manifest
    /// and the zone's link. Returns the assets and the bytes of the chunks stored.
    func importAssets(of id: ZoneID, from source: EmbeddedZoneStorage) async throws(ZoneStorageError) -> (Int, Int64) {
        var bytes: Int64 = 0
        let held = try await source.heldAssets(zone: id)
        for asset in held {
            guard let manifest = try await source.heldAsset(zone: id, sha256: asset) else { continue }
            for (index, chunk) in manifest.chunks.enumerated() {
                let present = try await withConnection("looking up chunk \(index) of asset \(asset)", zone: id) { connection in
                    try await self.hasChunk(chunk, owner: id.owner, on: connection)
                }
                if present { continue }
                // Verified against its hash by the embedded storage as it is read.
                guard let data = try await source.assetChunk(zone: id, sha256: asset, index: index) else {
                    throw ZoneStorageError(.storageFailure, "zone \(id): chunk \(index) of asset \(asset) could not be read from the data directory", zone: id.description)
                }
                let stored = try await transaction("copying chunk \(index) of asset \(asset) into the database", zone: id) { connection in
                    try await self.insertChunk(data, hash: chunk, owner: id.owner, on: connection) != nil
                }
                if stored { bytes += Int64(data.count) }
            }
            let encoded = ByteBuffer(bytes: manifest.encoded)
            let hash = ByteBuffer(bytes: asset.bytes)
            try await transaction("copying asset \(asset) of zone \(id) into the database", zone: id) { connection in
                guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
                try await connection.query("""
                    INSERT INTO strata_asset_manifests (owner, sha256, manifest) VALUES (\(id.owner), \(hash), \(encoded)) ON CONFLICT DO NOTHING
                    """, logger: self.logger)
                try await connection.query("INSERT INTO strata_asset_links (zone_id, sha256) VALUES (\(zone.key), \(hash)) ON CONFLICT DO NOTHING",
                                           logger: self.logger)
            }
        }
        return (held.count, bytes)
    }
}
