extension StrataServerApp {
    /// The quotas of a `PUT /v1/zones/{zone}`, checked before anything changes: a zone past the
    /// grants quota, and a new zone past its owner's zones quota, are refused with
    /// `403 quotaExceeded`. Counting zones walks the catalog in memory; zones are created rarely.
    func checkQuotas(_ id: ZoneID, _ settings: ZoneSettings) async throws(ServerError) {
        let limits = configuration.limits
        let existing = try await storageCall { () async throws(ZoneStorageError) in try await storage.zone(id) }
        if let grants = settings.grants, limits.maxGrantsPerZone > 0, grants.count > limits.maxGrantsPerZone {
            metrics.quotaRefusals.increment()
            throw ServerError.grantsQuota(zone: id, limit: limits.maxGrantsPerZone, current: existing?.grants.count ?? 0, requested: grants.count)
        }
        if existing == nil, limits.maxZonesPerUser > 0 {
            let owned = try await storageCall { () async throws(ZoneStorageError) in try await storage.zones() }
                .reduce(0) { $0 + ($1.owner == id.owner ? 1 : 0) }
            if owned >= limits.maxZonesPerUser {
                metrics.quotaRefusals.increment()
                throw ServerError.zonesQuota(user: id.owner, limit: limits.maxZonesPerUser, used: owned)
            }
        }
    }

    /// The stored-bytes quota of a state upload (healing): refused with `403 quotaExceeded` when
    /// the upload (its bytes as sent, about what its merged snapshot adds) would take the zone's
    /// owner past the quota. Unlike a push's, this check is not atomic with the write: a state
    /// upload is rare, and a snapshot replaces the zone's older ones.
    func checkStoredBytes(_ zone: ZoneID, adding bytes: Int) async throws(ServerError) {
        let limit = configuration.limits.maxStoredBytesPerUser
        guard limit > 0 else { return }
        let used = try await storageCall { () async throws(ZoneStorageError) in try await storage.storedBytes(owner: zone.owner) }
        if used + Int64(bytes) > limit {
            metrics.quotaRefusals.increment()
            throw ServerError(ZoneStorageError.storedBytesQuota(owner: zone.owner, limit: limit, used: used, adding: Int64(bytes), zone: zone, what: "state upload"))
        }
    }
}
