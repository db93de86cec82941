import StrataProtocol
extension ZoneStorageError {
    /// The refusal of a zone create past the owner's zones quota.
    package static func zonesQuota(owner: String, limit: Int, owned: Int, zone: ZoneID) -> ZoneStorageError {
        ZoneStorageError(.quotaExceeded, "quota zonesPerUser exceeded: user \(owner) may own \(limit) zones and owns \(owned); no zone was created",
                         zone: zone.description)
    }

    /// The refusal of a push that would take `owner` past their stored-bytes quota.
    package static func storedBytesQuota(owner: String, limit: Int64, used: Int64, adding: Int64, zone: ZoneID, what: String = "push") -> ZoneStorageError {
        ZoneStorageError(.quotaExceeded,
                         "quota storedBytesPerUser exceeded: user \(owner) may store \(limit) bytes, stores \(used), and this \(what) adds \(adding) (uncompressed); nothing was \(what == "push" ? "appended" : "merged")",
                         zone: zone.description)
    }
}

extension ServerError {
    /// The refusal of grants past the per-zone quota.
    static func grantsQuota(zone: ZoneID, limit: Int, current: Int, requested: Int) -> ServerError {
        ServerError(.quotaExceeded, "quota grantsPerZone exceeded: zone \(zone) may have \(limit) grants; it has \(current) and the request asks for \(requested); nothing was changed")
    }
}
