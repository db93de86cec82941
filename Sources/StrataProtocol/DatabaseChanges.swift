/// The answer to `GET /v1/database/changes` (``StrataEndpoint/databaseChanges``): which of the
/// caller's zones changed since a database-wide token — the zones they own and the zones shared
/// with them by a grant (accepted or not), never every public zone.
///
/// ```json
/// {"token": "…", "reset": false, "moreComing": false,
///  "zones": [{"name": "list", "owner": "alice", "access": "shared", "role": "readWrite",
///             "token": "…", "epoch": 42, "accepted": true}],
///  "removed": [{"name": "old", "owner": "carol", "reason": "revoked"}], "user": "alice"}
/// ```
///
/// A device keeps ``token`` and asks again with it; an answer with nothing in it costs a few
/// hundred bytes however many zones the caller has. When ``reset`` is true the answer (with the
/// pages that follow it while ``moreComing`` is true) lists *every* zone of the caller: a zone the
/// device had that no page of the reset lists is no longer the caller's.
public struct DatabaseChanges: Sendable, Hashable, Codable {
    /// The database token to ask with next (opaque).
    public var token: String
    /// Whether this page belongs to a full listing rather than to the changes since the token
    /// asked with (no token, a token of another server life, or one older than the removals the
    /// server still keeps).
    public var reset: Bool
    /// Whether more changes are waiting: ask again at once with ``token``.
    public var moreComing: Bool
    /// The caller's zones that changed (appended to, settings changed, shared or accepted), each
    /// once, as they are now.
    public var zones: [DatabaseZone]
    /// The zones that are no longer the caller's, and why.
    public var removed: [RemovedZone]
    /// The user the server signed the request in as (absent from servers before it was added): a
    /// device's database belongs to one user, and a client checks that it is still that user's
    /// turn before it syncs a zone (another user signed in must not push the first one's zones
    /// into their own account, or be shown them).
    public var user: String?

    public init(token: String, reset: Bool, moreComing: Bool, zones: [DatabaseZone], removed: [RemovedZone], user: String? = nil) {
        self.token = token
        self.reset = reset
        self.moreComing = moreComing
        self.zones = zones
        self.removed = removed
        self.user = user
    }
}

/// One zone of a ``DatabaseChanges`` answer, as it is now.
public struct DatabaseZone: Sendable, Hashable, Codable {
    public var name: String
    public var owner: String
    public var access: ZoneAccess
    /// What the caller may do in it.
    public var role: ZoneRole
    /// The zone's change token at the end of its log, exactly as ``ZoneDescription/token``: a
    /// device whose cursor equals it has nothing to pull.
    public var token: String
    /// The zone's life (see ``ZoneDescription/epoch``).
    public var epoch: UInt64
    /// Whether the caller accepted the share (always `true` for the owner): a device may wait
    /// for acceptance before it syncs a zone shared with its user.
    public var accepted: Bool

    public init(name: String, owner: String, access: ZoneAccess, role: ZoneRole, token: String, epoch: UInt64, accepted: Bool) {
        self.name = name
        self.owner = owner
        self.access = access
        self.role = role
        self.token = token
        self.epoch = epoch
        self.accepted = accepted
    }
}

/// The caller's part in a zone of a ``DatabaseChanges`` answer.
public enum ZoneRole: String, Sendable, Hashable, Codable, CaseIterable {
    /// The caller owns the zone.
    case owner
    /// A `read` grant.
    case read
    /// A `readWrite` grant.
    case readWrite
    /// Readable because the zone is public (not listed by the database changes, which name only
    /// zones owned or granted; kept for answers that describe public zones).
    case `public`
}

/// A zone that left the caller's zones (``DatabaseChanges/removed``).
public struct RemovedZone: Sendable, Hashable, Codable {
    public var name: String
    public var owner: String
    public var reason: ZoneRemovalReason

    public init(name: String, owner: String, reason: ZoneRemovalReason) {
        self.name = name
        self.owner = owner
        self.reason = reason
    }
}

/// Why a zone left the caller's zones.
public enum ZoneRemovalReason: String, Sendable, Hashable, Codable, CaseIterable {
    /// The owner took the caller's grant away or made the zone private, or the caller left it.
    case revoked
    /// The zone was deleted.
    case deleted
}

/// One user a zone is shared with (``ZoneDescription/participants``).
public struct ZoneParticipant: Sendable, Hashable, Codable {
    public var user: String
    public var grant: ZoneGrant
    /// Whether the user accepted the share (`POST /v1/zones/{zone}/accept?owner=`).
    public var accepted: Bool

    public init(user: String, grant: ZoneGrant, accepted: Bool) {
        self.user = user
        self.grant = grant
        self.accepted = accepted
    }
}
