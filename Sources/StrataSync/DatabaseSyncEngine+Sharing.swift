import Strata
public import StrataProtocol

/// Sharing: the owner shares a zone with other users and takes it back; a user accepts a share
/// (the zone joins the database and syncs) or leaves it.
extension DatabaseSyncEngine {
    /// Shares one of the user's own zones with `user`: `read` lets them pull, `readWrite` push
    /// too. A private zone becomes `shared`. Returns the zone's participants (see ``ZoneSharing``:
    /// the grants are read, changed and written back).
    @discardableResult
    public func share(_ zone: ZoneReference, with user: String, access: ZoneGrant) async throws -> [ZoneParticipant] {
        try await ZoneSharing.share(zone, with: user, access: access, over: transport)
    }

    /// Takes `user`'s grant on one of the user's own zones away: their devices remove the zone
    /// (its objects leave their databases; their unpushed edits are kept aside there). Returns
    /// the zone's participants.
    @discardableResult
    public func revoke(_ zone: ZoneReference, from user: String) async throws -> [ZoneParticipant] {
        try await ZoneSharing.revoke(zone, from: user, over: transport)
    }

    /// Who a zone is shared with, their grants and whether they accepted.
    public func participants(of zone: ZoneReference) async throws -> [ZoneParticipant] {
        try await transport.describeZone(zone).participants ?? []
    }

    /// Accepts a share of another user's zone: the server records it, the zone joins the
    /// database, and it syncs. Returns that sync's report.
    @discardableResult
    public func accept(_ zone: ZoneReference) async throws -> SyncReport {
        guard zone.owner != nil else { throw SyncError(.badRequest, "\(zone) is the user's own zone: there is no share to accept") }
        // One at a time with the rounds, which add and remove zones too.
        return try await exclusively {
            _ = try await transport.acceptShare(zone)
            pendingShares[zone] = nil
            if database.store(for: zone) == nil { try await database.addZone(zone) }
            return try await engine(for: zone).sync()
        }
    }

    /// Leaves a share: the server removes the user's grant, and the zone leaves the database
    /// (its store, with any unpushed edits, kept aside as for a revoked share, with the reason
    /// `left`).
    @discardableResult
    public func leave(_ zone: ZoneReference) async throws -> LostZone? {
        guard zone.owner != nil else { throw SyncError(.badRequest, "\(zone) is the user's own zone: delete it rather than leave it") }
        // Refused before the server is asked: the grant would be gone and the zone still here.
        guard zone != database.defaultZone else {
            throw SyncError(.badRequest, "\(zone) is the database's default zone: make another zone the default (database.setDefaultZone) before leaving it")
        }
        return try await exclusively {
            try await transport.leaveShare(zone)
            pendingShares[zone] = nil
            if let engine = engines.removeValue(forKey: zone) { await engine.stop() }
            guard database.store(for: zone) != nil else { return nil }
            return try await database.removeZone(zone, reason: .left)
        }
    }
}
