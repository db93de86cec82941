/// The paths of the protocol's endpoints, defined once for the server's routes and the clients'
/// requests.
///
/// ```swift
/// let path = StrataEndpoint.zone("notes") + StrataEndpoint.push   // "/v1/zones/notes/push"
/// ```
public enum StrataEndpoint {
    /// The version prefix of every zone endpoint.
    public static let version = "/v1"
    /// `GET`: the zones the caller may see (`ZoneList`).
    public static let zones = "/v1/zones"
    /// The path of zone `name` (`PUT` creates or changes it, `GET` describes it, `DELETE`
    /// deletes it); the endpoints below follow it.
    public static func zone(_ name: String) -> String { "\(zones)/\(name)" }
    /// The zone path as a route pattern, its name the parameter ``zoneParameter``.
    public static let zonePattern = "\(zones)/:\(zoneParameter)"
    /// The name of the route parameter holding the zone's name.
    public static let zoneParameter = "zone"

    /// `POST`, after a zone's path: appends a push (framed transactions).
    public static let push = "/push"
    /// `GET`, after a zone's path: pulls transactions after a change token (a long poll with
    /// ``StrataQuery/wait``).
    public static let changes = "/changes"
    /// `GET`, after a zone's path: the zone's newest snapshot.
    public static let snapshot = "/snapshot"
    /// `POST`, after a zone's path: a state a device uploads (heals history the zone lost).
    public static let state = "/state"
    /// `GET`, after a zone's path: the replicas the zone holds events of (`ReplicaList`).
    public static let replicas = "/replicas"
    /// After a zone's path: the zone's history digests, for comparing a device with it without
    /// sending either history. `GET` answers which sequences of each replica it holds with their
    /// content (``ZoneDigestRanges``); `POST` with ``DigestQuestions`` answers digests of ranges
    /// and fingerprints of events (``DigestAnswers``). Both take ``StrataQuery/omit`` and
    /// ``StrataQuery/replica`` as a pull does: a masked device compares with what it may see.
    public static let digests = "/digests"
    /// `POST`, after a zone's path, with ``StateDigestQuestions``: digests of the zone's state by object
    /// ID ranges, and objects' state fingerprints (``StateDigestAnswers``), for finding the objects a
    /// device holds otherwise than the zone without sending either's values.
    public static let stateDigests = "/state-digests"
    /// After a zone's path: the zone's device registry. `POST` with a ``DeviceReport`` (any
    /// reader, for its own replica) records a device's state digest at its token and answers the
    /// server's ``DeviceVerdict``; `GET` (the zone's owner) answers ``ZoneDevices``.
    public static let devices = "/devices"

    /// After a zone's path: asset `sha256` (64 lower-case hex digits). `PUT` with its manifest
    /// (``AssetManifestBody``) starts or resumes an upload and answers ``AssetUploadAnswer``;
    /// `GET` answers its manifest when the zone holds it (`404 assetNotFound` otherwise, whether
    /// the asset is absent or only elsewhere).
    public static func asset(_ sha256: String) -> String { "/assets/\(sha256)" }
    /// After a zone's path: chunk `index` of asset `sha256` (`PUT` uploads it, `GET` downloads it).
    public static func assetChunk(_ sha256: String, _ index: Int) -> String { "/assets/\(sha256)/chunks/\(index)" }
    /// The asset path as a route pattern after the zone's, its hash the parameter ``assetParameter``.
    public static let assetPattern = "/assets/:\(assetParameter)"
    /// The chunk path as a route pattern after the zone's (``assetParameter``, ``chunkParameter``).
    public static let assetChunkPattern = "/assets/:\(assetParameter)/chunks/:\(chunkParameter)"
    public static let assetParameter = "asset"
    public static let chunkParameter = "chunk"

    /// `POST`, after a zone's path (with ``StrataQuery/owner``): the caller accepts the share of
    /// the zone a grant gave them; answers the zone's description.
    public static let accept = "/accept"
    /// `POST`, after a zone's path (with ``StrataQuery/owner``): the caller leaves a zone shared
    /// with them: their grant is removed; answers `204`.
    public static let leave = "/leave"

    /// `GET`: which of the caller's zones changed since a database token (``DatabaseChanges``),
    /// with ``StrataQuery/after``, ``StrataQuery/limit`` and ``StrataQuery/wait`` (a long poll).
    public static let databaseChanges = "/v1/database/changes"
    /// `GET`: the caller's database changes as a stream of Server-Sent Events
    /// (`text/event-stream`): an event for each page of changes as they happen, for a client that
    /// holds one connection rather than long polls.
    public static let databaseStream = "/v1/database/stream"

    /// `GET`, without a token: liveness.
    public static let health = "/health"
    /// `GET`, without a token: readiness (`503` while shutting down or without storage).
    public static let ready = "/ready"
    /// `GET`, without a token: the server's metrics (Prometheus text format).
    public static let metrics = "/metrics"
}

/// The query parameters of the protocol's endpoints.
public enum StrataQuery {
    /// Every zone endpoint: the zone's owner, when it is not the caller.
    public static let owner = "owner"
    /// `changes` and `state`: the change token the caller has pulled through; the database
    /// changes: the database token of the caller's last answer.
    public static let after = "after"
    /// `changes`: the most transactions to answer; the database changes: the most zones.
    public static let limit = "limit"
    /// `changes`: the longest to wait for a change, in seconds (a long poll).
    public static let wait = "wait"
    /// `state`: the uploading device's own replica; `changes`: the pulling device's own
    /// replica, whose transactions a download mask never touches (the device may push them back).
    public static let replica = "replica"
    /// `changes` and `snapshot`: the device's download mask (`DownloadMask`'s text form,
    /// `Comment,Photo.fullImage`): the entities, attributes and relationships left out of the
    /// answer. An event whose every change is left out comes as a `withheld` placeholder.
    public static let omit = "omit"
    /// `state`: how far a server had acknowledged that replica.
    public static let through = "through"
    /// `push`: the zone's life (epoch) the pushing device syncs with; a zone in another life
    /// refuses the push with `410 zoneReset`, taking nothing.
    public static let epoch = "epoch"
}
