public import StrataProtocol
/// A zone's metadata: its name, owner, access rule and epoch.
///
/// The epoch is a random number chosen when the zone is created; deleting and recreating a zone
/// changes it, so that change tokens of the old zone are recognised as such ("zone reset").
///
/// ```swift
/// let zone = ZoneInfo(name: "notes", owner: "alice", access: .shared, grants: ["bob": .read], epoch: 42)
/// zone.canRead("bob")   // true
/// zone.canPush("bob")   // false
/// ```
public struct ZoneInfo: Sendable, Hashable, Codable {
    public var name: String
    /// The user who created the zone; only the owner may change or delete it.
    public var owner: String
    public var access: ZoneAccess
    /// Users granted access to a `ZoneAccess.shared` zone (on a public zone a `readWrite` grant
    /// still lets its user push; on a private zone grants are ignored).
    public var grants: [String: ZoneGrant]
    /// The zone's epoch (see the type's discussion).
    public var epoch: UInt64
    /// The IDs of the device states merged into the zone (heals), oldest first: random, never 0.
    /// Change tokens carry the newest (``generation``): a token of an earlier one (or of none)
    /// was handed out before a merge, so its holder has not seen the merged state and must adopt
    /// the zone's snapshot (`410 tokenExpired`); a token of an ID the zone does not know means the
    /// server lost a merge the client saw (restored from a backup: `410 zoneRewound`). IDs rather
    /// than a count, because a server restored from a backup and healed again would count the
    /// same number for another merge. Empty (and absent from `zones.json`) for a zone never healed.
    public var merges: [UInt64]
    /// The epochs of the zone's earlier lives this one continues, the latest first: set when the
    /// owner's device recreated the zone to seed it with what it held
    /// (`SyncEngine.recreateZone()`: the deleted life, and the lives that one continued);
    /// devices of those lives then go on into this one. Empty for a new zone (and absent from
    /// `zones.json`): devices of an earlier life stop with `zoneDeleted` rather than seed it with
    /// what was deleted. At most ``maxLineage`` epochs.
    public var lineage: [UInt64] = []
    /// The grantees who accepted the share (`POST /v1/zones/{zone}/accept`); a grant given
    /// later starts unaccepted. A grant works whether accepted or not: acceptance tells the
    /// owner (the participants) and the grantee's devices (the database changes) that the user
    /// took the share. In `zones.json` when the zone has grants; a catalog written before
    /// acceptance was kept has none, and its grants read as accepted.
    public var accepted: Set<String> = []
    /// The oldest app schema version the zone syncs with (1: every version; see
    /// `ZoneSettings.minSchemaVersion`). In `zones.json` when above 1.
    public var minSchemaVersion = 1

    /// The most earlier lives a zone remembers continuing.
    public static let maxLineage = 64

    /// The ID of the newest merged state, 0 when none: what change tokens carry.
    public var generation: UInt64 { merges.last ?? 0 }

    /// The zone's identity: its owner and name.
    public var id: ZoneID { ZoneID(owner: owner, name: name) }

    public init(name: String, owner: String, access: ZoneAccess = .private, grants: [String: ZoneGrant] = [:], epoch: UInt64, merges: [UInt64] = []) {
        self.name = name
        self.owner = owner
        self.access = access
        self.grants = grants
        self.epoch = epoch
        self.merges = merges
    }

    enum CodingKeys: String, CodingKey { case name, owner, access, grants, epoch, merges, lineage, accepted, minSchemaVersion }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        owner = try c.decode(String.self, forKey: .owner)
        access = try c.decode(ZoneAccess.self, forKey: .access)
        grants = try c.decode([String: ZoneGrant].self, forKey: .grants)
        epoch = try c.decode(UInt64.self, forKey: .epoch)
        merges = try c.decodeIfPresent([UInt64].self, forKey: .merges) ?? []
        lineage = try c.decodeIfPresent([UInt64].self, forKey: .lineage) ?? []
        // Written before acceptance was kept: every grant counts as accepted.
        accepted = try c.decodeIfPresent(Set<String>.self, forKey: .accepted) ?? Set(grants.keys)
        minSchemaVersion = try c.decodeIfPresent(Int.self, forKey: .minSchemaVersion) ?? 1
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(owner, forKey: .owner)
        try c.encode(access, forKey: .access)
        try c.encode(grants, forKey: .grants)
        try c.encode(epoch, forKey: .epoch)
        if !merges.isEmpty { try c.encode(merges, forKey: .merges) }
        if !lineage.isEmpty { try c.encode(lineage, forKey: .lineage) }
        if !grants.isEmpty { try c.encode(accepted.intersection(grants.keys).sorted(), forKey: .accepted) }
        if minSchemaVersion > 1 { try c.encode(minSchemaVersion, forKey: .minSchemaVersion) }
    }

    /// A change token of this zone at `position`.
    public func token(at position: UInt64) -> ChangeToken {
        ChangeToken(epoch: epoch, position: position, generation: generation)
    }

    /// The longest zone name accepted.
    public static let maxNameLength = 64

    /// Whether `name` is a valid zone name: 1–64 characters of `[A-Za-z0-9._-]`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maxNameLength else { return false }
        return bytes.allSatisfy { b in
            (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
                || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
    }

    /// Whether `user` may read the zone (look at it and pull).
    public func canRead(_ user: String) -> Bool {
        if user == owner { return true }
        switch access {
        case .private: return false
        case .shared: return grants[user] != nil
        case .public: return true
        }
    }

    /// Whether `user` may push to the zone.
    public func canPush(_ user: String) -> Bool {
        if user == owner { return true }
        switch access {
        case .private: return false
        case .shared, .public: return grants[user] == .readWrite
        }
    }

    /// Whether `user` may change the zone's access or grants, or delete it: the owner only.
    public func canAdminister(_ user: String) -> Bool { user == owner }

    /// The users the zone is a zone *of*, as the database changes count them: its owner, and its
    /// grantees unless the zone is private (whose grants are ignored). Public zones are not every
    /// user's: an app names them.
    public var members: Set<String> {
        var users: Set<String> = [owner]
        if access != .private { users.formUnion(grants.keys) }
        return users
    }

    /// Whether the zone is `user`'s (see ``members``).
    public func isMember(_ user: String) -> Bool {
        user == owner || (access != .private && grants[user] != nil)
    }

    /// The grantees, their grant and whether they accepted, sorted by user.
    public var participants: [ZoneParticipant] {
        grants.keys.sorted().compactMap { user in grants[user].map { ZoneParticipant(user: user, grant: $0, accepted: accepted.contains(user)) } }
    }

    /// The acceptances that survive a change of grants to `grants`: a grantee who keeps a grant
    /// (of either kind) keeps their acceptance; a new grantee has not accepted yet.
    public func acceptedKept(under grants: [String: ZoneGrant]) -> Set<String> {
        accepted.filter { grants[$0] != nil }
    }
}

extension ZoneInfo {
    /// The lineage of a life created to continue the deleted life `epoch` (`nil`: none), given
    /// what was kept of the deleted zone (its epoch and lineage, when the storage kept them).
    public static func lineage(continuing epoch: UInt64?, kept: (epoch: UInt64, lineage: [UInt64])?) -> [UInt64] {
        guard let epoch else { return [] }
        let earlier = kept.flatMap { $0.epoch == epoch ? $0.lineage : nil } ?? []
        return Array(([epoch] + earlier.filter { $0 != epoch }).prefix(maxLineage))
    }
}
