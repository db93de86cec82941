public import StrataCore

/// Where a server keeps the bytes of assets (files attached to objects by an `Asset` value),
/// apart from the zones' logs.
///
/// The rules every implementation keeps:
/// - **Bytes by owner.** An asset's chunks are stored once per zone *owner* (named by their
///   SHA-256), however many of the owner's zones, objects and uploads name them.
/// - **Links by zone.** A zone *holds* an asset once a complete upload into that zone verified its
///   bytes, or once the zone's owner pushed a transaction naming an asset the owner holds in
///   another zone. Only a held asset may be read through the zone, and only a held asset may be
///   named by a transaction pushed to it: knowing a hash never reads the bytes, and a grantee
///   cannot make another zone of the owner's (or another user's) asset readable by naming it.
/// - **Uploads by zone and uploader.** An upload into a zone is its uploader's (nothing one user
///   begins or sends resets or blocks another user's upload of the same asset) and says which
///   chunks it still lacks: for the zone's owner, the chunks the owner holds anywhere count as
///   there; for anyone else only those the user sent to this zone's upload do (so that no
///   grantee learns what else the owner stores).
/// - **Unfinished uploads are capped** per uploader and per zone (``UnfinishedUploadLimits``);
///   the chunks they received count toward the owner's stored bytes like any other.
/// - **Verified.** Each chunk is checked against its hash before it is kept; when the last chunk
///   arrives the whole asset is checked against its hash before the zone holds it.
/// - Deleting a zone drops its links and its uploads.
/// - **Collected.** ``AssetStorage/sweepAssets(grace:)`` removes what nothing needs any more: a
///   link that no transaction of the zone's retained log and no kept snapshot names, and that was
///   not confirmed (linked, uploaded, or checked by a push,
///   ``AssetStorage/unheldAssets(zone:user:assets:)``) within the
///   grace; then the owner's manifests no zone links, the chunks no remaining manifest and no
///   upload names, and uploads untouched for longer than the grace. Their bytes leave the owner's
///   stored bytes.
///
/// Assets count toward the owner's stored bytes (``ZoneStorage/storedBytes(owner:)``).
public protocol AssetStorage: Sendable {
    /// The asset's manifest when zone `zone` holds it; `nil` otherwise (absent or not held: the
    /// same answer).
    func heldAsset(zone: ZoneID, sha256: AssetHash) async throws(ZoneStorageError) -> AssetManifest?

    /// Of `assets`, those zone `zone` does not hold, for a push by `user`. When `user` is the
    /// zone's owner, assets the owner holds through another zone become held by this one (and are
    /// not reported).
    func unheldAssets(zone: ZoneID, user: String, assets: Set<AssetHash>) async throws(ZoneStorageError) -> [AssetHash]

    /// Starts (or looks up) the upload of `manifest`'s asset into `zone` by `user` (who may push
    /// to it): the chunks still to send, in order. Empty when the zone already holds the asset.
    ///
    /// - Throws: ``ZoneStorageError/Code/quotaExceeded`` when the asset cannot fit the owner's
    ///   stored-bytes limit `storedBytesLimit` (`nil` or `0`: no limit), or when a new upload
    ///   would pass `unfinishedLimits` (resuming an upload already begun never does).
    func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest, storedBytesLimit: Int64?,
                          unfinishedLimits: UnfinishedUploadLimits) async throws(ZoneStorageError) -> AssetUploadState

    /// Keeps chunk `index` of an upload begun with ``beginAssetUpload(zone:user:manifest:storedBytesLimit:unfinishedLimits:)``,
    /// after checking its length and hash; the last chunk completes the upload (the whole asset
    /// is verified, then the zone holds it).
    ///
    /// - Throws: ``ZoneStorageError/Code/invalidArgument`` for bytes that are not the chunk (its
    ///   hash or length) or an upload never begun; ``ZoneStorageError/Code/quotaExceeded``.
    func putAssetChunk(zone: ZoneID, user: String, sha256: AssetHash, index: Int, bytes: [UInt8], storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState

    /// Chunk `index` of an asset zone `zone` holds; `nil` when it does not hold it.
    func assetChunk(zone: ZoneID, sha256: AssetHash, index: Int) async throws(ZoneStorageError) -> [UInt8]?

    /// Removes what no zone needs any more (see the rules above): links neither named by the
    /// zone's retained history nor confirmed within `grace`, then the manifests, chunks and
    /// abandoned uploads left unneeded. Safe while pushes and uploads go on.
    func sweepAssets(grace: Duration) async throws(ZoneStorageError) -> AssetSweepReport
}

/// The most uploads begun and not finished (neither complete nor swept as abandoned) that one
/// user, and one zone, may have at once. Past one, beginning another upload is refused with
/// ``ZoneStorageError/Code/quotaExceeded``; resuming one already begun is not. `0` means no cap.
public struct UnfinishedUploadLimits: Sendable, Hashable {
    /// The most unfinished uploads of one user, across every zone.
    public var perUser: Int
    /// The most unfinished uploads into one zone by users other than its owner (the owner is
    /// bounded by ``perUser`` only, so that grantees cannot lock it out).
    public var perZone: Int

    public init(perUser: Int, perZone: Int) {
        self.perUser = perUser
        self.perZone = perZone
    }

    /// No cap.
    public static let none = UnfinishedUploadLimits(perUser: 0, perZone: 0)

    /// The refusal of a new upload past `limit` (`what`: `unfinishedUploadsPerUser` or
    /// `unfinishedUploadsPerZone`).
    package static func refusal(_ what: String, limit: Int, count: Int, asset: AssetHash, zone: ZoneID, user: String) -> ZoneStorageError {
        let whose = what == "unfinishedUploadsPerUser" ? "user \(user) has" : "zone \(zone) has"
        return ZoneStorageError(.quotaExceeded,
                                "quota \(what) exceeded: \(whose) \(count) uploads begun and not finished, the most allowed is \(limit); finish one (or let the server drop the abandoned ones) before beginning another. The upload of asset \(asset) was not begun",
                                zone: zone.description)
    }
}

extension AssetStorage {
    /// Starts (or looks up) an upload with no cap on unfinished uploads (see
    /// ``beginAssetUpload(zone:user:manifest:storedBytesLimit:unfinishedLimits:)``).
    public func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest, storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
        try await beginAssetUpload(zone: zone, user: user, manifest: manifest, storedBytesLimit: storedBytesLimit, unfinishedLimits: .none)
    }
}

/// Where an upload stands.
public struct AssetUploadState: Sendable, Hashable {
    /// The chunk indexes still to send, in order.
    public var missing: [Int]
    /// Whether the zone holds the asset (every chunk arrived and the whole was verified).
    public var complete: Bool

    public init(missing: [Int], complete: Bool) {
        self.missing = missing
        self.complete = complete
    }
}

extension PushedTransaction {
    /// The assets named by any of `transactions`.
    public static func assetsNamed(by transactions: [PushedTransaction]) -> Set<AssetHash> {
        transactions.reduce(into: Set<AssetHash>()) { $0.formUnion($1.namedAssets) }
    }
}

extension ZoneStorage {
    // A storage that keeps no assets (a test's wrapper, say): no zone holds any, and uploads
    // are refused. The two real storages implement all of it.

    public func heldAsset(zone: ZoneID, sha256: AssetHash) async throws(ZoneStorageError) -> AssetManifest? { nil }

    public func unheldAssets(zone: ZoneID, user: String, assets: Set<AssetHash>) async throws(ZoneStorageError) -> [AssetHash] {
        assets.sorted()
    }

    public func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest, storedBytesLimit: Int64?,
                                 unfinishedLimits: UnfinishedUploadLimits) async throws(ZoneStorageError) -> AssetUploadState {
        throw ZoneStorageError(.storageFailure, "this storage keeps no assets", zone: zone.description)
    }

    public func putAssetChunk(zone: ZoneID, user: String, sha256: AssetHash, index: Int, bytes: [UInt8], storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
        throw ZoneStorageError(.storageFailure, "this storage keeps no assets", zone: zone.description)
    }

    public func assetChunk(zone: ZoneID, sha256: AssetHash, index: Int) async throws(ZoneStorageError) -> [UInt8]? { nil }

    public func sweepAssets(grace: Duration) async throws(ZoneStorageError) -> AssetSweepReport { AssetSweepReport() }
}
