public import StrataCore
import StrataLog

/// Assets (``AssetStorage``): the zone is looked up on the actor, the file work is done by
/// `EmbeddedAssets` on blocking-work threads, so a 1 MiB chunk's fsync never holds up another
/// zone's push.
extension EmbeddedZoneStorage: AssetStorage {
    public func heldAsset(zone: ZoneID, sha256: AssetHash) async throws(ZoneStorageError) -> AssetManifest? {
        let info = try assetZone(zone)
        let assets = self.assets
        return try await blocking { () throws(ZoneStorageError) in try assets.held(info, sha256) }
    }

    public func unheldAssets(zone: ZoneID, user: String, assets wanted: Set<AssetHash>) async throws(ZoneStorageError) -> [AssetHash] {
        guard !wanted.isEmpty else { return [] }
        let info = try assetZone(zone)
        let assets = self.assets
        let sweep = assetSweep
        return try await blocking { () throws(ZoneStorageError) -> [AssetHash] in
            // Apart from a sweep of the owner, and each link held confirmed: the push appends
            // after this answer, and a sweep in between must not take the link it relies on.
            try sweep.sharing(assets.ownerDirectory(info.owner)) { () throws(ZoneStorageError) -> [AssetHash] in
                var unheld: [AssetHash] = []
                for asset in wanted.sorted() {
                    if try assets.held(info, asset) == nil {
                        // The owner names what it holds in any of its zones.
                        guard user == info.owner, try assets.ownerManifest(info.owner, asset) != nil else {
                            unheld.append(asset)
                            continue
                        }
                        try assets.link(info, asset)
                    }
                    sweep.confirm(assets.heldPath(info, asset))
                }
                return unheld
            }
        }
    }

    public func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest, storedBytesLimit: Int64?,
                                 unfinishedLimits: UnfinishedUploadLimits) async throws(ZoneStorageError) -> AssetUploadState {
        let info = try assetZone(zone, pushedBy: user)
        let assets = self.assets
        let allowance = assetAllowance(owner: info.owner, limit: storedBytesLimit)
        let sweep = assetSweep
        return try await blocking { () throws(ZoneStorageError) in
            try sweep.sharing(assets.ownerDirectory(info.owner)) { () throws(ZoneStorageError) -> AssetUploadState in
                let state = try assets.begin(info, user: user, manifest: manifest, limit: allowance, unfinishedLimits: unfinishedLimits)
                Self.confirm(state, info, manifest.sha256, user, assets, sweep)
                return state
            }
        }
    }

    public func putAssetChunk(zone: ZoneID, user: String, sha256: AssetHash, index: Int, bytes: [UInt8], storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
        let info = try assetZone(zone, pushedBy: user)
        let assets = self.assets
        let allowance = assetAllowance(owner: info.owner, limit: storedBytesLimit)
        let sweep = assetSweep
        return try await blocking { () throws(ZoneStorageError) in
            try sweep.sharing(assets.ownerDirectory(info.owner)) { () throws(ZoneStorageError) -> AssetUploadState in
                let state = try assets.put(info, user: user, asset: sha256, index: index, bytes: bytes, limit: allowance)
                Self.confirm(state, info, sha256, user, assets, sweep)
                return state
            }
        }
    }

    /// Confirms what an upload's step left: the zone's link once complete (its transaction is
    /// yet to be pushed), else the upload (touched now, so not abandoned).
    private nonisolated static func confirm(_ state: AssetUploadState, _ zone: ZoneInfo, _ asset: AssetHash, _ user: String, _ assets: EmbeddedAssets,
                                            _ sweep: EmbeddedAssetSweep) {
        sweep.confirm(state.complete ? assets.heldPath(zone, asset) : assets.uploadPath(zone, asset, uploader: user))
    }

    public func sweepAssets(grace: Duration) async throws(ZoneStorageError) -> AssetSweepReport {
        try checkOpen()
        // Read before the histories: a confirmation after this is younger than the grace.
        let now = assetSweep.timeline.now()
        // The history of every zone first, outside the owners' locks (reading logs takes long).
        var named: [String: Set<AssetHash>] = [:]
        for state in zoneStates.values {
            let deletedBefore = now >= AssetTimeline.milliseconds(grace) ? now - AssetTimeline.milliseconds(grace) : 0
            if let assets = await assetsNamedByHistory(of: state.info, forgettingDeletedBefore: deletedBefore) {
                named[self.assets.zoneDirectory(state.info)] = assets
            }
        }
        let marked = named
        let assets = self.assets
        let sweep = assetSweep
        let milliseconds = AssetTimeline.milliseconds(grace)
        return try await blocking { () throws(ZoneStorageError) -> AssetSweepReport in
            try sweep.alone { () throws(ZoneStorageError) -> AssetSweepReport in
                try assets.sweep(named: marked, state: sweep, now: now, grace: milliseconds)
            }
        }
    }

    public func assetChunk(zone: ZoneID, sha256: AssetHash, index: Int) async throws(ZoneStorageError) -> [UInt8]? {
        let info = try assetZone(zone)
        let assets = self.assets
        return try await blocking { () throws(ZoneStorageError) in try assets.chunk(info, sha256, index: index) }
    }

    /// The assets zone `zone` holds, in order (`strata migrate` copies them with their manifests
    /// and chunks, read through `heldAsset(zone:sha256:)` and `assetChunk(zone:sha256:index:)`).
    package func heldAssets(zone: ZoneID) async throws(ZoneStorageError) -> [AssetHash] {
        let info = try assetZone(zone)
        let assets = self.assets
        return try await blocking { () throws(ZoneStorageError) in try assets.heldAssets(info) }
    }

    /// The zone as it is now; with `pushedBy`, checked that the user may still push to it (a
    /// grant revoked while the request was on its way holds).
    private func assetZone(_ id: ZoneID, pushedBy user: String? = nil) throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        guard let info = zoneStates[id]?.info else { throw Self.notFound(id) }
        if let user { try Self.checkPush(info, user: user) }
        return info
    }

    /// What the owner's stored-bytes limit leaves for assets after its logs and snapshots.
    private func assetAllowance(owner: String, limit: Int64?) -> Int64? {
        guard let limit, limit > 0 else { return nil }
        return max(0, limit - (usage[owner] ?? 0))
    }

    private nonisolated func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(ZoneStorageError) -> T) async throws(ZoneStorageError) -> T {
        do {
            return try await BlockingIO.run { try body() }
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(.storageFailure, "\(error)")
        }
    }
}
