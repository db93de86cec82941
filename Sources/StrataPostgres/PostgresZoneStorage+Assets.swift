import Logging
import NIOCore
import PostgresNIO
public import StrataCore
public import StrataServer

/// Assets (`AssetStorage`) in the database (schema version 9, see `PostgresSchema`): chunks once
/// per owner, manifests of the owner's complete assets, the links of each zone life (`zone_id`),
/// the uploads in progress with the chunks each received. The rules hold across instances:
///
/// - A chunk is inserted with `ON CONFLICT DO NOTHING` and counted in the owner's stored bytes
///   by the transaction that inserted it (two instances storing one chunk store and count it
///   once), under the owner's row lock taken by that count; the quota is checked on the count
///   the lock gives, so two instances cannot both fill the last bytes of a quota.
/// - An upload is its uploader's (`uploader` in its key): a manifest is the uploader's claim until
///   the whole asset verifies, so nothing one user begins resets or blocks another's upload.
/// - The chunks an upload received are changed under the upload's row lock (`FOR UPDATE`): two
///   instances receiving the last two chunks of an asset at once both see both, and the one that
///   sees nothing missing completes it.
/// - Completing verifies the whole asset from its chunks, read one at a time (never the whole
///   asset in memory), outside any lock; then, in one transaction that share-locks the zone's row
///   first (the order a delete of the zone takes), records the owner's manifest and the zone's
///   link (`ON CONFLICT DO NOTHING`: an instance completing the same upload at once changes
///   nothing) and removes the upload.
/// - Links and uploads are rows of the zone's life (`zone_id`): deleting the zone deletes them in
///   its transaction (`ON DELETE CASCADE`), and a zone created again under the name holds nothing.
///
/// - The sweep (`PostgresZoneStorage+AssetSweep.swift`) removes links, manifests, chunks and
///   uploads no longer needed. So that it never takes what a concurrent call relies on: a push's
///   check confirms each link it finds (`confirmed_at`, an update whose row lock a sweep's delete
///   re-checks); a link to an asset the owner holds elsewhere is made under a share lock of the
///   owner's manifest, which a sweep deleting the manifest takes for update first; an owner's
///   upload counts the owner's chunks as there under a key-share lock of the chunks, which a
///   sweep deleting them takes for update first; and an upload's step touches it (`touched_at`).
extension PostgresZoneStorage {
    public func heldAsset(zone id: ZoneID, sha256: AssetHash) async throws(ZoneStorageError) -> AssetManifest? {
        try await withConnection("reading asset \(sha256) of zone \(id)", zone: id) { connection in
            try await self.heldManifest(id, sha256, on: connection).manifest
        }
    }

    public func unheldAssets(zone id: ZoneID, user: String, assets wanted: Set<AssetHash>) async throws(ZoneStorageError) -> [AssetHash] {
        guard !wanted.isEmpty else { return [] }
        let now = Int64(clamping: assetTimeline.now())
        return try await transaction("checking the assets zone \(id) holds", zone: id) { connection -> [AssetHash] in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            // Confirmed as they are found: the push appends after this answer, and a sweep in
            // between keeps a link confirmed within its grace.
            let held = try await self.hashes(connection.query("""
                UPDATE strata_asset_links SET confirmed_at = GREATEST(confirmed_at, \(now))
                WHERE zone_id = \(zone.key) AND sha256 = ANY(\(Self.buffers(wanted))::bytea[]) RETURNING sha256
                """, logger: self.logger))
            var unheld = wanted.subtracting(held)
            // The owner names what it holds through any of its zones: linked here too.
            if user == zone.info.owner, !unheld.isEmpty {
                let owned = try await self.linkOwned(unheld, zone: zone.key, owner: zone.info.owner, now: now, id: id, on: connection)
                unheld.subtract(owned)
            }
            return unheld.sorted()
        }
    }

    public func beginAssetUpload(zone id: ZoneID, user: String, manifest: AssetManifest,
                                 storedBytesLimit: Int64?, unfinishedLimits: UnfinishedUploadLimits) async throws(ZoneStorageError) -> AssetUploadState {
        let asset = manifest.sha256
        let encoded = ByteBuffer(bytes: manifest.encoded)
        let limit = storedBytesLimit.flatMap { $0 > 0 ? $0 : nil }
        let now = Int64(clamping: assetTimeline.now())
        let step = try await transaction("beginning the upload of asset \(asset) into zone \(id)", zone: id) { connection -> UploadStep in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            try Self.checkPush(zone.info, user: user)
            let owner = zone.info.owner
            let key = ByteBuffer(bytes: asset.bytes)
            let ownerWide = user == owner
            // Held (the owner's push linked it, or it is the owner's own upload of an asset it
            // holds through another zone: linked, no byte sent): an upload of the user's left
            // from before is finished, and no longer counts against the caps.
            var held = try await self.isLinked(zone.key, asset, on: connection)
            if !held, ownerWide {
                held = try await !self.linkOwned([asset], zone: zone.key, owner: owner, now: now, id: id, on: connection).isEmpty
            }
            if held {
                try await connection.query("DELETE FROM strata_asset_uploads WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user)",
                                           logger: self.logger)
                return .held
            }
            var received: [Int32]
            // The same upload begun again: touched, so that it is not abandoned.
            let found = try await self.values(connection.query("""
                UPDATE strata_asset_uploads SET touched_at = GREATEST(touched_at, \(now))
                WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user) AND manifest = \(encoded) RETURNING received
                """, logger: self.logger), as: [Int32].self)
            if let chunks = found.first {
                received = chunks
            } else {
                // A new upload (or the user's own begun with another manifest of the asset, which
                // cannot be right too: the manifest follows from the bytes. The latest begun is
                // kept, so that an abandoned upload with a wrong manifest never blocks the asset.
                // Another user's upload is another row: never touched).
                if let limit {
                    let used = try await self.values(connection.query("SELECT stored_bytes FROM strata_owners WHERE owner = \(owner)", logger: self.logger),
                                                     as: Int64.self).first ?? 0
                    let adding = Int64(clamping: manifest.byteCount)
                    if used + adding > limit {
                        throw ZoneStorageError(.quotaExceeded, "storing asset \(asset) (\(adding) bytes) would take \(owner) to \(used + adding) stored bytes; the limit is \(limit) bytes",
                                               zone: id.description)
                    }
                }
                try await self.checkUnfinished(unfinishedLimits, zone: zone.key, asset: asset, user: user, id: id, on: connection)
                try await self.linking(id) {
                    try await connection.query("""
                        INSERT INTO strata_asset_uploads (zone_id, sha256, uploader, manifest, touched_at) VALUES (\(zone.key), \(key), \(user), \(encoded), \(now))
                        ON CONFLICT (zone_id, sha256, uploader) DO UPDATE SET manifest = EXCLUDED.manifest, received = '{}', touched_at = EXCLUDED.touched_at
                        WHERE strata_asset_uploads.manifest <> EXCLUDED.manifest
                        """, logger: self.logger)
                }
                received = try await self.rows(connection.query("""
                    SELECT received FROM strata_asset_uploads WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user)
                    """, logger: self.logger), as: [Int32].self).first ?? []
            }
            let missing = try await self.missing(manifest, received: received, owner: ownerWide ? owner : nil, on: connection)
            return .pending(zone: zone.key, owner: owner, manifest: manifest, missing: missing)
        }
        return try await finish(step, zone: id)
    }

    public func putAssetChunk(zone id: ZoneID, user: String, sha256 asset: AssetHash, index: Int, bytes: [UInt8],
                              storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
        let limit = storedBytesLimit.flatMap { $0 > 0 ? $0 : nil }
        // Hashed before a connection is taken: the bytes are checked against the upload's
        // manifest once it is read.
        let chunkHash = AssetHash.of(bytes)
        let now = Int64(clamping: assetTimeline.now())
        let step = try await transaction("storing chunk \(index) of asset \(asset) in zone \(id)", zone: id) { connection -> UploadStep in
            guard let zone = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            try Self.checkPush(zone.info, user: user)
            let owner = zone.info.owner
            let key = ByteBuffer(bytes: asset.bytes)
            if try await self.isLinked(zone.key, asset, on: connection) { return .held }
            // The upload's row lock: one chunk list change at a time, across instances.
            let found = try await self.rows(connection.query("""
                SELECT manifest, received FROM strata_asset_uploads WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user) FOR UPDATE
                """, logger: self.logger), as: (ByteBuffer, [Int32]).self)
            guard let (stored, chunks) = found.first else {
                // Completed by another request meanwhile, or never begun.
                if try await self.isLinked(zone.key, asset, on: connection) { return .held }
                throw ZoneStorageError(.invalidArgument, "no upload of asset \(asset) into zone \(id) by \(user) was begun (send its manifest first)", zone: id.description)
            }
            guard let manifest = AssetManifest.decode(Array(stored.readableBytesView), expecting: asset) else {
                throw ZoneStorageError(.storageFailure, "the upload of asset \(asset) into zone \(id): its manifest does not decode", zone: id.description)
            }
            guard index >= 0, index < manifest.chunks.count else {
                throw ZoneStorageError(.invalidArgument, "asset \(asset) has \(manifest.chunks.count) chunks; there is no chunk \(index)", zone: id.description)
            }
            guard bytes.count == manifest.chunkLength(index) else {
                throw ZoneStorageError(.assetMismatch, "chunk \(index) of asset \(asset) is \(bytes.count) bytes; the manifest says \(manifest.chunkLength(index))",
                                       zone: id.description)
            }
            guard chunkHash == manifest.chunks[index] else {
                throw ZoneStorageError(.assetMismatch, "chunk \(index) of asset \(asset) does not match its hash \(manifest.chunks[index]) (got \(chunkHash)); nothing was kept",
                                       zone: id.description)
            }
            var received = chunks
            if !received.contains(Int32(index)) {
                try await self.storeChunk(bytes, hash: chunkHash, owner: owner, limit: limit, zone: id, byOwner: user == owner, on: connection)
                try await connection.query("""
                    UPDATE strata_asset_uploads SET received = array_append(received, \(Int32(index))), touched_at = GREATEST(touched_at, \(now))
                    WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user)
                    """, logger: self.logger)
                received.append(Int32(index))
            } else {
                try await connection.query("""
                    UPDATE strata_asset_uploads SET touched_at = GREATEST(touched_at, \(now)) WHERE zone_id = \(zone.key) AND sha256 = \(key) AND uploader = \(user)
                    """, logger: self.logger)
            }
            let missing = try await self.missing(manifest, received: received, owner: user == owner ? owner : nil, on: connection)
            return .pending(zone: zone.key, owner: owner, manifest: manifest, missing: missing)
        }
        return try await finish(step, zone: id)
    }

    public func assetChunk(zone id: ZoneID, sha256 asset: AssetHash, index: Int) async throws(ZoneStorageError) -> [UInt8]? {
        try await withConnection("reading chunk \(index) of asset \(asset) of zone \(id)", zone: id) { connection -> [UInt8]? in
            let (owner, manifest) = try await self.heldManifest(id, asset, on: connection)
            guard let manifest, index >= 0, index < manifest.chunks.count else { return nil }
            guard let bytes = try await self.chunk(owner, manifest.chunks[index], on: connection) else {
                throw ZoneStorageError(.storageFailure, "chunk \(index) (\(manifest.chunks[index])) of asset \(asset) of \(owner) is missing from the database",
                                       zone: id.description)
            }
            // A damaged chunk is never served as the asset (the client would refuse it anyway).
            guard bytes.count == manifest.chunkLength(index), AssetHash.of(bytes) == manifest.chunks[index] else {
                throw ZoneStorageError(.storageFailure, "chunk \(index) (\(manifest.chunks[index])) of asset \(asset) of \(owner) is damaged in the database",
                                       zone: id.description)
            }
            return bytes
        }
    }

    // MARK: Completing

    /// Where an upload stands after a begin or a chunk: the zone holds the asset, or these chunks
    /// are missing (none: the upload is to be completed).
    private enum UploadStep: Sendable {
        case held
        case pending(zone: Int64, owner: String, manifest: AssetManifest, missing: [Int])
    }

    private func finish(_ step: UploadStep, zone id: ZoneID) async throws(ZoneStorageError) -> AssetUploadState {
        switch step {
        case .held:
            return AssetUploadState(missing: [], complete: true)
        case .pending(_, _, _, let missing) where !missing.isEmpty:
            return AssetUploadState(missing: missing, complete: false)
        case .pending(let key, let owner, let manifest, _):
            try await complete(zone: id, key: key, owner: owner, manifest: manifest)
            return AssetUploadState(missing: [], complete: true)
        }
    }

    /// Verifies the whole asset from the owner's chunks, read one at a time, then records the
    /// owner's manifest and the zone's link and removes the upload; a manifest whose chunks are
    /// right but whose asset hash is not is refused and its upload removed (begin again).
    private func complete(zone id: ZoneID, key: Int64, owner: String, manifest: AssetManifest) async throws(ZoneStorageError) {
        let asset = manifest.sha256
        let verified = try await withConnection("verifying asset \(asset) of zone \(id)", zone: id) { connection -> Bool in
            var hasher = SHA256Hasher()
            for (index, chunk) in manifest.chunks.enumerated() {
                guard let bytes = try await self.chunk(owner, chunk, on: connection), bytes.count == manifest.chunkLength(index) else {
                    throw ZoneStorageError(.storageFailure, "chunk \(index) of asset \(asset) of \(owner) vanished before the upload completed", zone: id.description)
                }
                hasher.update(data: bytes)
            }
            return AssetHash(digest: hasher.finalize()) == asset
        }
        let encoded = ByteBuffer(bytes: manifest.encoded)
        let hash = ByteBuffer(bytes: asset.bytes)
        try await transaction("completing the upload of asset \(asset) into zone \(id)", zone: id) { connection in
            // The zone's row first, as a delete of the zone locks it before the rows it cascades to.
            let alive = try await self.values(connection.query("SELECT zone_id FROM strata_zones WHERE zone_id = \(key) FOR KEY SHARE", logger: self.logger),
                                              as: Int64.self)
            guard !alive.isEmpty else { throw Self.notFound(id) }
            guard verified else {
                try await connection.query("""
                    DELETE FROM strata_asset_uploads WHERE zone_id = \(key) AND sha256 = \(hash) AND manifest = \(encoded)
                    """, logger: self.logger)
                return
            }
            // The manifest share-locked when there: a sweep deleting it (no link left) is waited for,
            // then it is inserted again; a sweep after this commit sees the link.
            _ = try await connection.query("""
                SELECT 1 FROM strata_asset_manifests WHERE owner = \(owner) AND sha256 = \(hash) FOR SHARE
                """, logger: self.logger)
            try await connection.query("""
                INSERT INTO strata_asset_manifests (owner, sha256, manifest) VALUES (\(owner), \(hash), \(encoded)) ON CONFLICT DO NOTHING
                """, logger: self.logger)
            let now = Int64(clamping: self.assetTimeline.now())
            try await connection.query("""
                INSERT INTO strata_asset_links (zone_id, sha256, confirmed_at) VALUES (\(key), \(hash), \(now))
                ON CONFLICT (zone_id, sha256) DO UPDATE SET confirmed_at = GREATEST(strata_asset_links.confirmed_at, EXCLUDED.confirmed_at)
                """, logger: self.logger)
            // Every uploader's upload of it: the zone holds the asset, nothing is left to send.
            try await connection.query("DELETE FROM strata_asset_uploads WHERE zone_id = \(key) AND sha256 = \(hash)", logger: self.logger)
        }
        guard verified else {
            throw ZoneStorageError(.assetMismatch, "the chunks of asset \(asset) match their hashes but not the asset's: its manifest is wrong; the upload was dropped (begin again)",
                                   zone: id.description)
        }
        logger.debug("asset stored", metadata: ["zone": "\(id)", "asset": "\(asset)", "bytes": "\(manifest.byteCount)"])
    }

    // MARK: Rows

    /// Stores a verified chunk of `owner`'s unless the owner has it, and counts its bytes; refuses
    /// with `quotaExceeded` (rolling the insert back with the caller's transaction) when the count
    /// goes past `limit`.
    /// Another user's chunk that the owner already has is refused for the quota as a new one
    /// would be (and not counted): otherwise a grantee who fills the owner's quota to within a
    /// chunk learns from a chunk PUT's answer whether the owner holds a file, in any zone.
    private func storeChunk(_ bytes: [UInt8], hash: AssetHash, owner: String, limit: Int64?, zone id: ZoneID, byOwner: Bool,
                            on connection: PostgresConnection) async throws {
        let adding = Int64(bytes.count)
        if try await hasChunk(hash, owner: owner, on: connection) {
            if !byOwner, let limit {
                let used = try await values(connection.query("SELECT stored_bytes FROM strata_owners WHERE owner = \(owner)", logger: logger), as: Int64.self).first ?? 0
                if used + adding > limit { throw Self.chunkQuota(owner: owner, used: used, adding: adding, limit: limit, zone: id) }
            }
            return
        }
        if let limit {
            // Checked before a mebibyte is written for nothing; checked again under the lock below.
            let used = try await values(connection.query("SELECT stored_bytes FROM strata_owners WHERE owner = \(owner)", logger: logger), as: Int64.self).first ?? 0
            if used + adding > limit { throw Self.chunkQuota(owner: owner, used: used, adding: adding, limit: limit, zone: id) }
        }
        guard let total = try await insertChunk(bytes, hash: hash, owner: owner, on: connection) else { return }
        if let limit, total > limit { throw Self.chunkQuota(owner: owner, used: total - adding, adding: adding, limit: limit, zone: id) }
    }

    /// Inserts a chunk of `owner`'s and counts its bytes in the owner's stored bytes: the owner's
    /// stored bytes after the count, or `nil` when the owner had the chunk (nothing changed).
    ///
    /// A chunk another instance is inserting at this moment is waited for: then this insert does
    /// nothing (it committed) or inserts (it rolled back). Counted by whoever inserted.
    func insertChunk(_ bytes: [UInt8], hash: AssetHash, owner: String, on connection: PostgresConnection) async throws -> Int64? {
        let adding = Int64(bytes.count)
        let inserted = try await values(connection.query("""
            INSERT INTO strata_asset_chunks (owner, sha256, bytes) VALUES (\(owner), \(ByteBuffer(bytes: hash.bytes)), \(ByteBuffer(bytes: bytes)))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger), as: Int32.self)
        guard !inserted.isEmpty else { return nil }
        // The owner's row exists: chunks are stored only for owners of zones (whose create made it).
        return try await values(connection.query("""
            UPDATE strata_owners SET stored_bytes = stored_bytes + \(adding) WHERE owner = \(owner) RETURNING stored_bytes
            """, logger: logger), as: Int64.self).first ?? adding
    }

    /// Whether `owner` has the chunk.
    func hasChunk(_ hash: AssetHash, owner: String, on connection: PostgresConnection) async throws -> Bool {
        let found = try await values(connection.query("""
            SELECT 1 FROM strata_asset_chunks WHERE owner = \(owner) AND sha256 = \(ByteBuffer(bytes: hash.bytes))
            """, logger: logger), as: Int32.self)
        return !found.isEmpty
    }

    private static func chunkQuota(owner: String, used: Int64, adding: Int64, limit: Int64, zone id: ZoneID) -> ZoneStorageError {
        ZoneStorageError(.quotaExceeded, "storing a chunk of \(adding) bytes would take \(owner) to \(used + adding) stored bytes; the limit is \(limit) bytes",
                         zone: id.description)
    }

    /// The chunk indexes of `manifest` not in `received`, in order; with `owner` (the owner's own
    /// upload), not those the owner has either.
    private func missing(_ manifest: AssetManifest, received: [Int32], owner: String?, on connection: PostgresConnection) async throws -> [Int] {
        let got = Set(received.map(Int.init))
        var missing = manifest.chunks.indices.filter { !got.contains($0) }
        guard let owner, !missing.isEmpty else { return missing }
        // Key-share locked: a sweep deleting one of them is waited for (and then it is missing);
        // a sweep after this sees the upload naming them.
        let present = try await hashes(connection.query("""
            SELECT sha256 FROM strata_asset_chunks WHERE owner = \(owner) AND sha256 = ANY(\(Self.buffers(missing.map { manifest.chunks[$0] }))::bytea[])
            ORDER BY sha256 FOR KEY SHARE
            """, logger: logger))
        missing.removeAll { present.contains(manifest.chunks[$0]) }
        return missing
    }

    /// The zone's owner and the asset's manifest when the zone holds it.
    ///
    /// - Throws: `zoneNotFound`.
    private func heldManifest(_ id: ZoneID, _ asset: AssetHash, on connection: PostgresConnection) async throws -> (owner: String, manifest: AssetManifest?) {
        let found = try await rows(connection.query("""
            SELECT z.owner, m.manifest FROM strata_zones z
            LEFT JOIN strata_asset_links l ON l.zone_id = z.zone_id AND l.sha256 = \(ByteBuffer(bytes: asset.bytes))
            LEFT JOIN strata_asset_manifests m ON m.owner = z.owner AND m.sha256 = l.sha256
            WHERE z.owner = \(id.owner) AND z.name = \(id.name)
            """, logger: logger), as: (String, ByteBuffer?).self)
        guard let (owner, stored) = found.first else { throw Self.notFound(id) }
        guard let stored else { return (owner, nil) }
        guard let manifest = AssetManifest.decode(Array(stored.readableBytesView), expecting: asset) else {
            throw ZoneStorageError(.storageFailure, "the manifest of asset \(asset) of \(owner) does not decode", zone: id.description)
        }
        return (owner, manifest)
    }

    /// Links zone `key` to those of `assets` its owner holds (has a manifest of), confirmed at
    /// `now`; returns them. The manifests are share-locked until the caller's transaction ends,
    /// so a sweep cannot delete one between this and the link becoming visible.
    private func linkOwned(_ assets: Set<AssetHash>, zone key: Int64, owner: String, now: Int64, id: ZoneID,
                           on connection: PostgresConnection) async throws -> Set<AssetHash> {
        let owned = try await hashes(connection.query("""
            SELECT sha256 FROM strata_asset_manifests WHERE owner = \(owner) AND sha256 = ANY(\(Self.buffers(assets))::bytea[])
            ORDER BY sha256 FOR SHARE
            """, logger: logger))
        guard !owned.isEmpty else { return [] }
        try await linking(id) {
            try await connection.query("""
                INSERT INTO strata_asset_links (zone_id, sha256, confirmed_at) SELECT \(key), h, \(now) FROM unnest(\(Self.buffers(owned))::bytea[]) AS t(h)
                ON CONFLICT (zone_id, sha256) DO UPDATE SET confirmed_at = GREATEST(strata_asset_links.confirmed_at, EXCLUDED.confirmed_at)
                """, logger: self.logger)
        }
        return owned
    }

    private func isLinked(_ zoneKey: Int64, _ asset: AssetHash, on connection: PostgresConnection) async throws -> Bool {
        let found = try await values(connection.query("""
            SELECT 1 FROM strata_asset_links WHERE zone_id = \(zoneKey) AND sha256 = \(ByteBuffer(bytes: asset.bytes))
            """, logger: logger), as: Int32.self)
        return !found.isEmpty
    }

    /// One chunk's bytes (one row: an asset is read a chunk at a time).
    private func chunk(_ owner: String, _ chunk: AssetHash, on connection: PostgresConnection) async throws -> [UInt8]? {
        try await values(connection.query("""
            SELECT bytes FROM strata_asset_chunks WHERE owner = \(owner) AND sha256 = \(ByteBuffer(bytes: chunk.bytes))
            """, logger: logger), as: ByteBuffer.self).first.map { Array($0.readableBytesView) }
    }

    /// Runs an insert of a row naming a zone by `zone_id`: a zone deleted since it was looked up
    /// (the foreign key refuses the row) is `zoneNotFound`, as it would be a moment later.
    private func linking(_ id: ZoneID, _ insert: () async throws -> Void) async throws {
        do {
            try await insert()
        } catch let error where PostgresFailure.sqlState(error) == "23503" {
            throw Self.notFound(id)
        }
    }

    /// The hashes of a query's one `bytea` column.
    func hashes(_ rows: PostgresRowSequence) async throws -> Set<AssetHash> {
        var found = Set<AssetHash>()
        for buffer in try await values(rows, as: ByteBuffer.self) {
            if let hash = AssetHash(bytes: buffer.readableBytesView) { found.insert(hash) }
        }
        return found
    }

    static func buffers(_ hashes: some Sequence<AssetHash>) -> [ByteBuffer] {
        hashes.map { ByteBuffer(bytes: $0.bytes) }
    }
}
