import StrataCore

/// A zone as the protocol answers it: `{"name", "owner", "access", "grants", "epoch", "token",
/// "canPush", "limits", "participants"}`, where `token` is the change token of the current end of its log,
/// `canPush` says whether the caller may push to it (a client with read access only syncs
/// pull-only) and `limits` what the server accepts (clients size their pushes under them).
public struct ZoneDescription: Sendable, Hashable, Codable {
    public var name: String
    public var owner: String
    public var access: ZoneAccess
    public var grants: [String: ZoneGrant]
    public var epoch: UInt64
    public var token: String
    /// Whether the user who asked may push to the zone.
    public var canPush: Bool?
    /// What the server accepts; absent in answers of servers older than the field.
    public var limits: ServerLimits?
    /// The epochs of the zone's earlier lives that this one continues, the latest first (its
    /// owner's device recreated it, seeding it with what it held): devices of those lives go on
    /// into this one. Absent for a new zone: devices of an earlier life stop (`zoneDeleted`)
    /// rather than seed it with what was deleted.
    public var continues: [UInt64]?
    /// The users the zone is shared with, their grant and whether they accepted, sorted by user
    /// (shown to whoever is shown ``grants``); absent from servers older than sharing's accept.
    public var participants: [ZoneParticipant]?
    /// The oldest app schema version the zone syncs with (absent: any, and from servers older
    /// than the setting).
    public var minSchemaVersion: Int?

    public init(name: String, owner: String, access: ZoneAccess, grants: [String: ZoneGrant], epoch: UInt64, token: String,
                canPush: Bool? = nil, limits: ServerLimits? = nil, continues: [UInt64]? = nil, participants: [ZoneParticipant]? = nil,
                minSchemaVersion: Int? = nil) {
        self.minSchemaVersion = minSchemaVersion
        self.participants = participants
        self.continues = continues
        self.name = name
        self.owner = owner
        self.access = access
        self.grants = grants
        self.epoch = epoch
        self.token = token
        self.canPush = canPush
        self.limits = limits
    }
}

/// The limits a server advertises with every zone: `{"maxBodyBytes", "maxStateBytes",
/// "maxPullLimit", "maxClockOffsetMilliseconds", "maxAssetBytes"}`.
public struct ServerLimits: Sendable, Hashable, Codable {
    /// The largest push body (framed transactions) accepted.
    public var maxBodyBytes: Int
    /// The largest state upload accepted.
    public var maxStateBytes: Int
    /// The most transactions one pull returns.
    public var maxPullLimit: Int
    /// How far ahead of the server's clock an event may be stamped.
    public var maxClockOffsetMilliseconds: UInt64
    /// The largest asset accepted (absent from servers older than assets).
    public var maxAssetBytes: UInt64?

    public init(maxBodyBytes: Int, maxStateBytes: Int, maxPullLimit: Int, maxClockOffsetMilliseconds: UInt64, maxAssetBytes: UInt64? = nil) {
        self.maxAssetBytes = maxAssetBytes
        self.maxBodyBytes = maxBodyBytes
        self.maxStateBytes = maxStateBytes
        self.maxPullLimit = maxPullLimit
        self.maxClockOffsetMilliseconds = maxClockOffsetMilliseconds
    }

}

/// The answer to a state upload: `{"token": "<token of the merged snapshot>", "upToDate": bool,
/// "acknowledged": n}`; `upToDate` is true when the uploader had pulled the whole zone, so its
/// state is the merged one and it goes on from `token` (otherwise it bootstraps from the zone's
/// snapshot); `acknowledged` is the highest sequence of the uploader's replica the zone holds.
public struct StateAnswer: Sendable, Hashable, Codable {
    public var token: String
    public var upToDate: Bool
    public var acknowledged: UInt64

    public init(token: String, upToDate: Bool, acknowledged: UInt64) {
        self.token = token
        self.upToDate = upToDate
        self.acknowledged = acknowledged
    }
}

/// The body of `GET /v1/zones`: `{"zones": [zone, …]}`.
public struct ZoneList: Sendable, Hashable, Codable {
    public var zones: [ZoneDescription]

    public init(zones: [ZoneDescription]) { self.zones = zones }
}

/// The body of `PUT /v1/zones/{zone}`: `{"access": …, "grants": {…}}`, both optional. An absent
/// field keeps its value: on an update, the zone's; on the creation of a zone its owner deleted,
/// the value it had at the deletion (so a recreated zone keeps its grantees); on the creation of
/// a zone never deleted, its default (private, no grants).
public struct ZoneSettings: Sendable, Hashable, Codable {
    public var access: ZoneAccess?
    public var grants: [String: ZoneGrant]?
    /// When the `PUT` creates the zone: the epoch of the deleted life it continues (see
    /// ``ZoneDescription/continues``; the lives that one continued are added). Ignored when the
    /// zone exists.
    public var continues: UInt64?
    /// The oldest app schema version the zone syncs with, from 1 (every version) up: a client
    /// that says an older one (`Strata-Schema-Version`) is answered `426 schemaTooOld`.
    public var minSchemaVersion: Int?

    public init(access: ZoneAccess? = nil, grants: [String: ZoneGrant]? = nil, continues: UInt64? = nil, minSchemaVersion: Int? = nil) {
        self.minSchemaVersion = minSchemaVersion
        self.access = access
        self.grants = grants
        self.continues = continues
    }
}

/// The answer to a push: `{"token": "<token after the append>", "acknowledged": <highest sequence
/// now held for the replica>}`.
public struct PushAnswer: Sendable, Hashable, Codable {
    public var token: String
    public var acknowledged: UInt64

    public init(token: String, acknowledged: UInt64) {
        self.token = token
        self.acknowledged = acknowledged
    }
}

/// The body of `GET /v1/zones/{zone}/replicas`: `{"replicas": [{"replica": "<uuid>", "user":
/// "<name>", "acknowledged": <highest sequence held>}]}` (`user` absent when unknown).
public struct ReplicaList: Sendable, Hashable, Codable {
    public var replicas: [ReplicaInfo]

    public init(replicas: [ReplicaInfo]) { self.replicas = replicas }
}
