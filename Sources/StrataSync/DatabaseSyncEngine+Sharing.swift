import Strata
public import StrataProtocol

/// Sharing: the owner shares a zone with other users and takes it back; a user accepts a share
/// (the zone joins the database and syncs) or leaves it.
extension DatabaseSyncEngine {
    /// Shares one of the user's own zones with `user`: `read` lets them pull, `readWrite` push
    /// too. A private zone becomes `shared`. Returns the zone's participants.
    ///
    /// The grants are read, changed and written back: two devices of the owner changing grants
    /// of one zone at the same moment can lose one of the changes (the server keeps the last).
    @discardableResult
    public func share(_ zone: ZoneReference, with user: String, access: ZoneGrant) async throws -> [ZoneParticipant] {
        guard zone.owner == nil else { throw SyncError(.forbidden, "only the owner shares a zone; \(zone) is \(zone.owner ?? "")'s") }
        guard ZoneReference.isValidOwner(user) else { throw SyncError(.badRequest, "invalid user name: 1–256 bytes") }
        let current = try await transport.describeZone(zone)
        var grants = current.grants
        grants[user] = access
        let settings = ZoneSettings(access: current.access == .private ? .shared : current.access, grants: grants)
        return try await transport.updateZone(zone, settings: settings).participants ?? []
    }

    /// Takes `user`'s grant on one of the user's own zones away: their devices remove the zone
    /// (its objects leave their databases; their unpushed edits are kept aside there). Returns
    /// the zone's participants.
    @discardableResult
    public func revoke(_ zone: ZoneReference, from user: String) async throws -> [ZoneParticipant] {
        guard zone.owner == nil else { throw SyncError(.forbidden, "only the owner revokes a share; \(zone) is \(zone.owner ?? "")'s") }
        let current = try await transport.describeZone(zone)
        var grants = current.grants
        guard grants.removeValue(forKey: user) != nil else { return current.participants ?? [] }
        return try await transport.updateZone(zone, settings: ZoneSettings(access: current.access, grants: grants)).participants ?? []
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
        _ = try await transport.acceptShare(zone)
        pendingShares[zone] = nil
        try await database.addZone(zone)
        return try await engine(for: zone).sync()
    }

    /// Leaves a share: the server removes the user's grant, and the zone leaves the database
    /// (its store, with any unpushed edits, kept aside as for a revoked share).
    @discardableResult
    public func leave(_ zone: ZoneReference) async throws -> LostZone? {
        guard zone.owner != nil else { throw SyncError(.badRequest, "\(zone) is the user's own zone: delete it rather than leave it") }
        try await transport.leaveShare(zone)
        pendingShares[zone] = nil
        if let engine = engines.removeValue(forKey: zone) { await engine.stop() }
        guard database.store(for: zone) != nil else { return nil }
        return try await database.removeZone(zone, reason: .revoked)
    }
}
