import Strata
public import StrataProtocol

/// The owner's changes to a zone's grants, over any transport: read the zone's settings, change
/// one user's grant, write them back. `DatabaseSyncEngine.share`/`revoke` and the command line's
/// `strata share grant|revoke` both go through it.
///
/// The grants are read, changed and written back: two devices of the owner changing grants of one
/// zone at the same moment can lose one of the changes (the server keeps the last).
public enum ZoneSharing {
    /// Gives `user` `access` to the caller's own zone `zone` (a private zone becomes `shared`);
    /// returns its participants.
    public static func share(_ zone: ZoneReference, with user: String, access: ZoneGrant, over transport: any SyncTransport) async throws -> [ZoneParticipant] {
        guard zone.owner == nil else { throw SyncError(.forbidden, "only the owner shares a zone; \(zone) is \(zone.owner ?? "")'s") }
        guard ZoneReference.isValidOwner(user) else { throw SyncError(.badRequest, "invalid user name: 1–256 bytes") }
        let current = try await transport.describeZone(zone)
        var grants = current.grants
        grants[user] = access
        let settings = ZoneSettings(access: current.access == .private ? .shared : current.access, grants: grants)
        return try await transport.updateZone(zone, settings: settings).participants ?? []
    }

    /// Takes `user`'s grant on the caller's own zone `zone` away (nothing to change when they
    /// have none); returns its participants.
    public static func revoke(_ zone: ZoneReference, from user: String, over transport: any SyncTransport) async throws -> [ZoneParticipant] {
        guard zone.owner == nil else { throw SyncError(.forbidden, "only the owner revokes a share; \(zone) is \(zone.owner ?? "")'s") }
        let current = try await transport.describeZone(zone)
        var grants = current.grants
        guard grants.removeValue(forKey: user) != nil else { return current.participants ?? [] }
        return try await transport.updateZone(zone, settings: ZoneSettings(access: current.access, grants: grants)).participants ?? []
    }
}
