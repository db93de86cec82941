public import Strata
public import StrataCore
public import StrataProtocol

/// The answer to a push under its former name: it is the protocol's own `PushAnswer` (the token
/// after the append, the highest sequence of the pushing replica the server now holds). Kept,
/// deprecated, because a transport an app wrote may still name it.
@available(*, deprecated, renamed: "PushAnswer")
public typealias PushResult = PushAnswer

/// A page of a pull.
public struct PullResult: Sendable, Hashable {
    /// Encoded transactions, in the zone's log order.
    public var transactions: [[UInt8]]
    public var nextToken: String
    public var moreComing: Bool

    public init(transactions: [[UInt8]], nextToken: String, moreComing: Bool) {
        self.transactions = transactions
        self.nextToken = nextToken
        self.moreComing = moreComing
    }
}

/// What the server says of the caller's rights on a zone.
public struct ZoneAccessInfo: Sendable, Hashable {
    /// Whether the caller may push to the zone; without it the engine syncs pull-only.
    public var canPush: Bool
    /// The largest push body the server accepts (the engine sizes its batches under it); `nil`
    /// when the server does not say.
    public var maxPushBytes: Int?
    /// The largest state upload the server accepts; `nil` when it does not say.
    public var maxStateBytes: Int?
    /// The largest asset the server takes (an upload of a larger one is refused `tooLarge`);
    /// `nil` when it does not say.
    public var maxAssetBytes: UInt64?
    /// The epochs of the zone's earlier lives it continues (`ZoneDescription.continues` of
    /// `StrataProtocol`): a device of one of them goes on into this life; of another, it stops
    /// with `zoneDeleted`.
    public var lineage: [UInt64]
    /// The zone's epoch (its life, `ZoneDescription.epoch`). A transport should always fill it
    /// (and ``lineage``): with `nil` the engine cannot tell a zone created again as a new zone
    /// from the one it synced with, and goes on into it.
    public var epoch: UInt64?

    public init(canPush: Bool, maxPushBytes: Int? = nil, maxStateBytes: Int? = nil, lineage: [UInt64] = [], epoch: UInt64? = nil,
                maxAssetBytes: UInt64? = nil) {
        self.epoch = epoch
        self.maxAssetBytes = maxAssetBytes
        self.canPush = canPush
        self.maxPushBytes = maxPushBytes
        self.maxStateBytes = maxStateBytes
        self.lineage = lineage
    }
}

/// The answer to a state upload: the protocol's own (`StrataProtocol.StateAnswer`).
public typealias StateUploadResult = StateAnswer

/// A replica as the server knows it, with the user who pushed its events: the protocol's own
/// (`StrataProtocol.ReplicaInfo`).
public typealias ReplicaAuthor = ReplicaInfo

/// How the engine talks to a log server: HTTP in production (``HTTPSyncTransport``), anything
/// that keeps the protocol's rules in simulations.
public protocol SyncTransport: Sendable {
    /// Makes sure the zone exists: with `create`, creates the caller's own zone when it does not
    /// exist (private); another user's zone (`ZoneReference.owner` set) is never created — its
    /// absence is `zoneNotFound`, as is a missing zone without `create`. Returns what the caller
    /// may do there.
    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo
    /// ``ensureZone(_:create:)``, a zone it creates continuing the deleted life `continuing`
    /// (its epoch; `nil`: a new zone), so that devices of that life go on into it: an HTTP
    /// transport sends `{"continues": <epoch>}` as the creating `PUT`'s body. The default
    /// ignores `continuing` (the zone is created as a new one, and other devices of the deleted
    /// life then stop with `zoneDeleted`): a transport that creates zones implements this form,
    /// and a wrapping transport forwards it.
    func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo
    /// Pushes encoded transactions of one replica, contiguous in sequence.
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer
    /// ``push(zone:transactions:)`` for the zone's life `epoch` (the device's; `nil`: whichever):
    /// a zone in another life (deleted and created again) refuses it with `zoneReset`. The
    /// default ignores `epoch`.
    func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer
    /// The transactions after `token` (`nil`: from the start); `wait` turns it into a long poll.
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult
    /// ``pull(zone:after:limit:wait:)`` with what `mask` leaves out withheld, except the
    /// transactions of `replica` (the device's own). The default asks without a mask, and
    /// refuses a mask it cannot send.
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?, omitting mask: DownloadMask, replica: ReplicaID?) async throws -> PullResult
    /// The zone's snapshot (a projection snapshot payload) and the token it corresponds to, or
    /// `nil` when the zone has none.
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload?
    /// ``snapshot(zone:)`` without what `mask` leaves out. The default refuses a mask.
    func snapshot(zone: ZoneReference, omitting mask: DownloadMask) async throws -> ZoneSnapshotPayload?
    /// Who pushed each replica's events to the zone.
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor]
    /// Merges the store's whole state (a projection snapshot payload) into the zone, healing
    /// history the zone lost; `replica` is the store's own and `claim` how far a server had
    /// acknowledged it (the server believes that much), `after` the token the store had pulled
    /// through.
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult

    /// Starts or resumes the upload of an asset into the zone: the chunks the server still lacks.
    func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer
    /// Uploads chunk `index` of an asset whose upload was begun.
    func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer
    /// The manifest of an asset the zone holds; `nil` when it holds none by that hash (or the
    /// caller may not read it: the same answer).
    func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest?
    /// Chunk `index` of an asset the zone holds (as stored: the caller checks it).
    func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8]

    /// Which of the caller's zones changed since the database token `token` (`nil`: all of
    /// them, a reset); `wait` turns it into a long poll that answers at the first change.
    func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges
    /// The zone's description (access, grants, participants) as the caller may see it.
    func describeZone(_ zone: ZoneReference) async throws -> ZoneDescription
    /// Changes the caller's own zone's access and grants (the grants replace the zone's).
    func updateZone(_ zone: ZoneReference, settings: ZoneSettings) async throws -> ZoneDescription
    /// Accepts the share of another user's zone that a grant gave the caller.
    func acceptShare(_ zone: ZoneReference) async throws -> ZoneDescription
    /// Leaves another user's zone shared with the caller (the caller's grant is removed).
    func leaveShare(_ zone: ZoneReference) async throws
    /// Reports the device's state digest at its token to the zone's device registry, and
    /// returns what the server found (`POST /v1/zones/{zone}/devices`).
    func reportDevice(_ zone: ZoneReference, _ report: DeviceReport) async throws -> DeviceVerdict
    /// A copy of this transport whose every request says it is for the user `user()` returns
    /// (the `Strata-User` header; none while it returns `nil`): the server refuses such a
    /// request with `anotherUser` when its token signs in someone else. The database sync
    /// engine makes one for the user its database belongs to. A transport that cannot say it
    /// returns itself (the engine still checks the database changes' `user`).
    func expecting(user: @escaping @Sendable () -> String?) -> any SyncTransport

    /// A transport whose requests say which app schema version sends them
    /// (`Strata-Schema-Version`), so that a zone that no longer supports it answers
    /// `schemaTooOld`. The sync engine makes one with its store's version. A transport that
    /// cannot say it returns itself.
    func reporting(schemaVersion: @escaping @Sendable () -> Int?) -> any SyncTransport
}

/// A zone's state as the server serves it to clients whose token has expired.
public struct ZoneSnapshotPayload: Sendable, Hashable {
    public var payload: [UInt8]
    public var token: String

    public init(payload: [UInt8], token: String) {
        self.payload = payload
        self.token = token
    }
}

extension SyncTransport {
    public func expecting(user: @escaping @Sendable () -> String?) -> any SyncTransport { self }
    public func reporting(schemaVersion: @escaping @Sendable () -> Int?) -> any SyncTransport { self }

    public func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        try await ensureZone(zone, create: create)
    }

    public func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer {
        try await push(zone: zone, transactions: transactions)
    }

    public func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?, omitting mask: DownloadMask, replica: ReplicaID?) async throws -> PullResult {
        // Not `transport` (which is retried as if the network failed): a setup that cannot work.
        guard mask.isEmpty else { throw SyncError(.badRequest, "this transport cannot send a download mask: implement the masked pull and snapshot, or sync without a mask") }
        return try await pull(zone: zone, after: token, limit: limit, wait: wait)
    }

    public func snapshot(zone: ZoneReference, omitting mask: DownloadMask) async throws -> ZoneSnapshotPayload? {
        guard mask.isEmpty else { throw SyncError(.badRequest, "this transport cannot send a download mask: implement the masked pull and snapshot, or sync without a mask") }
        return try await snapshot(zone: zone)
    }

    // A transport of tests or simulations that carries no assets: no zone holds any.
    public func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        throw SyncError(.notFound, "this transport carries no assets")
    }
    public func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        throw SyncError(.notFound, "this transport carries no assets")
    }
    public func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? { nil }
    public func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        throw SyncError(.assetNotFound, "this transport carries no assets")
    }

    // A transport of tests or simulations without the database and sharing endpoints.
    public func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
        throw SyncError(.notFound, "this transport has no database changes")
    }
    public func describeZone(_ zone: ZoneReference) async throws -> ZoneDescription {
        throw SyncError(.notFound, "this transport does not describe zones")
    }
    public func updateZone(_ zone: ZoneReference, settings: ZoneSettings) async throws -> ZoneDescription {
        throw SyncError(.notFound, "this transport does not change zones")
    }
    public func acceptShare(_ zone: ZoneReference) async throws -> ZoneDescription {
        throw SyncError(.notFound, "this transport has no shares")
    }
    public func leaveShare(_ zone: ZoneReference) async throws {
        throw SyncError(.notFound, "this transport has no shares")
    }
    // A transport of tests or simulations without a device registry.
    public func reportDevice(_ zone: ZoneReference, _ report: DeviceReport) async throws -> DeviceVerdict {
        throw SyncError(.notFound, "this transport has no device registry")
    }
}
