extension ZoneStorageError {
    /// The refusal of a push that would take `owner` past their stored-bytes quota.
    static func storedBytesQuota(owner: String, limit: Int64, used: Int64, adding: Int64, zone: ZoneID, what: String = "push") -> ZoneStorageError {
        ZoneStorageError(.quotaExceeded,
                         "quota storedBytesPerUser exceeded: user \(owner) may store \(limit) bytes, stores \(used), and this \(what) adds \(adding) (uncompressed); nothing was \(what == "push" ? "appended" : "merged")",
                         zone: zone.description)
    }
}

extension ServerError {
    /// The refusal of a zone create past the owner's zone quota.
    static func zonesQuota(user: String, limit: Int, used: Int) -> ServerError {
        ServerError(.quotaExceeded, "quota zonesPerUser exceeded: user \(user) may own \(limit) zones and owns \(used); no zone was created")
    }

    /// The refusal of grants past the per-zone quota.
    static func grantsQuota(zone: ZoneID, limit: Int, current: Int, requested: Int) -> ServerError {
        ServerError(.quotaExceeded, "quota grantsPerZone exceeded: zone \(zone) may have \(limit) grants; it has \(current) and the request asks for \(requested); nothing was changed")
    }
}
