import StrataProtocol
extension StrataServerApp {
    /// The grants quota of a `PUT /v1/zones/{zone}`, checked before anything changes: a zone past
    /// it is refused with `403 quotaExceeded`. (The zones quota is checked by the storage, atomically
    /// with the create: ``ZoneStorage/createZone(_:access:grants:maxZonesPerOwner:)``.)
    func checkQuotas(_ id: ZoneID, _ settings: ZoneSettings) async throws(ServerError) {
        let limit = configuration.limits.maxGrantsPerZone
        guard let grants = settings.grants, limit > 0, grants.count > limit else { return }
        let existing = try await storageCall { () async throws(ZoneStorageError) in try await storage.zone(id) }
        metrics.quotaRefusals.increment()
        throw ServerError.grantsQuota(zone: id, limit: limit, current: existing?.grants.count ?? 0, requested: grants.count)
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
