public import Strata

/// A zone as the protocol answers it: `{"name", "owner", "access", "grants", "epoch", "token",
/// "canPush"}`, where `token` is the change token of the current end of its log and `canPush`
/// says whether the caller may push to it (a client with read access only syncs pull-only).
public struct ZoneDescription: Sendable, Hashable, Codable {
    public var name: String
    public var owner: String
    public var access: ZoneAccess
    public var grants: [String: ZoneGrant]
    public var epoch: UInt64
    public var token: String
    /// Whether the user who asked may push to the zone.
    public var canPush: Bool?

    public init(_ zone: ZoneInfo, token: ChangeToken, canPush: Bool? = nil) {
        self.name = zone.name
        self.owner = zone.owner
        self.access = zone.access
        self.grants = zone.grants
        self.epoch = zone.epoch
        self.token = token.description
        self.canPush = canPush
    }
}

/// The body of `GET /v1/zones`: `{"zones": [zone, …]}`.
public struct ZoneList: Sendable, Hashable, Codable {
    public var zones: [ZoneDescription]

    public init(zones: [ZoneDescription]) { self.zones = zones }
}

/// The body of `PUT /v1/zones/{zone}`: `{"access": …, "grants": {…}}`, both optional. On creation
/// an absent field takes its default (private, no grants); on an update it keeps its value.
public struct ZoneSettings: Sendable, Hashable, Codable {
    public var access: ZoneAccess?
    public var grants: [String: ZoneGrant]?

    public init(access: ZoneAccess? = nil, grants: [String: ZoneGrant]? = nil) {
        self.access = access
        self.grants = grants
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

/// The names of the pull answer's headers.
public enum StrataHeader {
    /// The change token after the transactions of a pull's answer.
    public static let nextToken = "Strata-Next-Token"
    /// `true` when the zone held more transactions than the pull returned.
    public static let moreComing = "Strata-More-Coming"
}
