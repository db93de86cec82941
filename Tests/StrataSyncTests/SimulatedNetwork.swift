import Foundation
import Logging
import Strata
import StrataLog
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization
import StrataProtocol
import StrataCore

/// The real server storage (``SimulatedServerSite``: embedded on disk, or PostgreSQL) behind a seeded, misbehaving network:
/// requests and answers are dropped, requests are duplicated, pushes are held back and delivered
/// late (out of order), and the server restarts between requests. Calls run one at a time, so a
/// seed replays the same run. Each client reaches it through ``client(_:)`` as a user of its
/// own; the pushes go through the server's own checks (``PushValidation``, the storage's
/// ownership and fork rules). Assets go through the storage's ``AssetStorage`` calls with the
/// asset routes' checks, and a push or state naming an asset the zone does not hold is refused
/// with `assetMissing`, as the routes refuse it; the asset calls fail the same ways as the others.
final class SimulatedNetwork: Sendable {
    struct State {
        var storage: (any ZoneStorage)?
        var rng: SeededGenerator
        var late: [(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction])] = []
        var faults = true
        var restarts = 0
        /// Pushes and state uploads refused with `assetMissing`.
        var assetMissing = 0
        /// Assets whose upload reached the storage.
        var uploaded: Set<AssetHash> = []
    }

    /// Where the server keeps its zones (a data directory, or a PostgreSQL database) and its
    /// backups.
    let site: SimulatedServerSite
    let state: Mutex<State>

    init(site: SimulatedServerSite, seed: UInt64) async throws {
        self.site = site
        state = Mutex(State(storage: try await site.open(), rng: SeededGenerator(seed: seed)))
    }

    /// Stops misbehaving (for quiescence).
    func heal() { state.withLock { $0.faults = false } }

    func roll(_ percent: UInt64) -> Bool {
        state.withLock { $0.faults && $0.rng.next() % 100 < percent }
    }

    func storage() throws -> any ZoneStorage {
        guard let storage = state.withLock({ $0.storage }) else { throw SyncError(.transport, "server down") }
        return storage
    }

    /// Closes and reopens the server's storage: whatever it acknowledged must survive.
    func restart() async throws {
        try await stop()
        let reopened = try await site.open()
        state.withLock {
            $0.storage = reopened
            $0.restarts += 1
        }
    }

    /// Closes the storage and drops what the site holds.
    func close() async throws {
        try await stop()
        try site.remove()
    }

    /// Copies the server's data (with the storage closed, as a backup tool would see it at
    /// rest), then opens it again.
    func takeBackup() async throws {
        try await stop()
        try await site.backUp()
        try await restart()
    }

    /// The server's disk is lost and its data restored from the last backup: whatever it
    /// acknowledged since is gone, and the devices must heal the zone. Returns false when there
    /// is no backup yet.
    func rollBack() async throws -> Bool {
        guard site.hasBackup else { return false }
        try await stop()
        try await site.restore()
        try await restart()
        return true
    }

    private func stop() async throws {
        let old = state.withLock { s -> (any ZoneStorage)? in
            defer { s.storage = nil }
            return s.storage
        }
        try await old?.close()
    }

    /// The owner deletes the zone.
    func deleteZone(_ zone: ZoneID) async throws {
        try await storage().deleteZone(zone)
    }

    /// Whether the zone exists.
    func zoneExists(_ zone: ZoneID) async throws -> Bool {
        try await storage().zone(zone) != nil
    }

    /// The server's clock for the clock-skew check: the real one, since the devices' stores stamp
    /// their edits with it.
    static var serverTime: UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }
    static let maxClockOffset: Duration = .seconds(600)

    /// Creates a zone as its owner would, with grants.
    func createZone(_ zone: ZoneID, grants: [String: ZoneGrant]) async throws {
        _ = try await storage().createZone(zone, access: .shared, grants: grants)
    }

    /// Gives `user` a grant on `zone`, as its owner would.
    func grant(_ zone: ZoneID, user: String, _ grant: ZoneGrant) async throws {
        let storage = try storage()
        guard let info = try await storage.zone(zone) else { return }
        var grants = info.grants
        grants[user] = grant
        _ = try await storage.updateZone(zone, access: info.access, grants: grants)
    }

    /// Switches `user`'s grant on `zone` between read and read-write.
    func toggleGrant(_ zone: ZoneID, user: String) async throws {
        let current = try await storage().zone(zone)?.grants[user]
        try await grant(zone, user: user, current == .readWrite ? .read : .readWrite)
    }

    /// The network as `user` reaches it.
    func client(_ user: String) -> SimulatedClient { SimulatedClient(network: self, user: user) }

    func ensureZone(_ zone: ZoneID, user: String, create: Bool, continuing: UInt64? = nil) async throws -> ZoneAccessInfo {
        if roll(5) { throw SyncError(.transport, "dropped") }
        let storage = try storage()
        if let info = try await storage.zone(zone) {
            guard info.canRead(user) else { throw SyncError(.forbidden, "\(user) may not read \(zone)", status: 403) }
            return ZoneAccessInfo(canPush: info.canPush(user), maxPushBytes: Self.maxPushBytes, lineage: info.lineage, epoch: info.epoch)
        }
        guard zone.owner == user, create else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
        let info = try await storage.createZone(zone, settings: ZoneSettings(access: .shared, grants: [:], continues: continuing), maxZonesPerOwner: nil)
        return ZoneAccessInfo(canPush: true, maxPushBytes: Self.maxPushBytes, lineage: info.lineage, epoch: info.epoch)
    }

    /// The push body limit the simulated server advertises and enforces: small, so that the
    /// simulation's large transactions come near it and the engine's batches must be cut by bytes.
    static let maxPushBytes = 24 << 10

    func push(zone: ZoneID, user: String, transactions: [[UInt8]]) async throws -> PushAnswer {
        let body = TransactionFrames.encode(transactions).count
        if body > Self.maxPushBytes {
            throw SyncError(.tooLarge, "the body has \(body) bytes; this server accepts at most \(Self.maxPushBytes)", status: 413)
        }
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let replica: ReplicaID
        let pushed: [PushedTransaction]
        do {
            (replica, pushed) = try PushValidation.validate(transactions, now: Self.serverTime, maxClockOffset: Self.maxClockOffset)
        } catch {
            throw SyncError(SyncError.Code(error.code.name), error.message, status: nil, sequence: error.sequence,
                            serverTime: error.serverTime, maxOffset: error.maxOffset)
        }
        if roll(10) {
            // Held back: this copy arrives later, after newer requests.
            state.withLock { $0.late.append((zone, user, replica, pushed)) }
        }
        let outcome = try await append(zone: zone, user: user, replica: replica, pushed)
        if roll(10) { _ = try? await append(zone: zone, user: user, replica: replica, pushed) }  // duplicated on the way
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        guard let info = try await storage().zone(zone) else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
        let token = try await PullStart.token(info, at: outcome.position, storage: try storage())
        return PushAnswer(token: token.description, acknowledged: outcome.acknowledged)
    }

    private func append(zone: ZoneID, user: String, replica: ReplicaID, _ pushed: [PushedTransaction]) async throws -> AppendOutcome {
        let storage = try storage()
        guard let info = try await storage.zone(zone) else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
        guard info.canPush(user) else { throw SyncError(.forbidden, "\(user) may not push to \(zone)", status: 403) }
        // As the server's push route: every asset the transactions name must be held by the zone
        // first. Checked at each delivery (a copy held back and delivered late, after a restore
        // lost the asset, is refused as the route would refuse it).
        try await requireHeld(PushedTransaction.assetsNamed(by: pushed), zone: zone, user: user, by: "push", nothingDone: "appended")
        do {
            return try await storage.append(zone: zone, user: user, replica: replica, transactions: pushed)
        } catch {
            let answer = ServerError(error)
            throw SyncError(SyncError.Code(answer.code.name), answer.message, status: nil,
                            expectedSequence: answer.expected, sequence: answer.sequence)
        }
    }

    func deliverLate() async {
        let late = state.withLock { s -> [(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction])] in
            defer { s.late.removeAll() }
            return s.late
        }
        for item in late.reversed() { _ = try? await append(zone: item.zone, user: item.user, replica: item.replica, item.transactions) }
    }

    func pull(zone: ZoneID, user: String, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        if roll(30) { await deliverLate() }
        let result: ReadResult
        let zoneInfo: ZoneInfo
        do {
            let storage = try storage()
            guard let info = try await storage.zone(zone) else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
            guard info.canRead(user) else { throw SyncError(.forbidden, "\(user) may not read \(zone)", status: 403) }
            let position = try await PullStart.position(after: token, zone: info, storage: storage)
            result = try await storage.read(zone: zone, epoch: info.epoch, after: position, limit: limit)
            zoneInfo = info
        } catch let error as ServerError {
            throw Self.syncError(error)
        } catch let error as ZoneStorageError {
            throw Self.syncError(ServerError(error))
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return PullResult(transactions: result.transactions.map(\.bytes),
                          nextToken: try await PullStart.token(zoneInfo, at: result.nextPosition, storage: storage()).description,
                          moreComing: result.moreComing)
    }

    func snapshot(zone: ZoneID) async throws -> ZoneSnapshotPayload? {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let storage = try storage()
        guard let info = try await storage.zone(zone) else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
        guard let snapshot = try await storage.snapshot(zone: zone) else { return nil }
        return ZoneSnapshotPayload(payload: snapshot.payload, token: try await PullStart.token(info, at: snapshot.position, storage: storage).description)
    }

    func uploadState(zone: ZoneID, user: String, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        do {
            let storage = try storage()
            guard let info = try await storage.zone(zone) else { throw SyncError(.zoneNotFound, "no zone \(zone)", status: 404) }
            guard info.canPush(user) else { throw SyncError(.forbidden, "\(user) may not write to \(zone)", status: 403) }
            let basis = try? await PullStart.position(after: token, zone: info, storage: storage)
            let decoded = try StateValidation.validate(state, now: Self.serverTime, maxClockOffset: Self.maxClockOffset)
            try await requireHeld(decoded.namedAssets, zone: zone, user: user, by: "state", nothingDone: "merged")
            let outcome = try await storage.mergeState(zone: zone, user: user, replica: replica, claim: claim, state: decoded, basis: token == nil ? nil : basis)
            if roll(10) { throw SyncError(.transport, "answer dropped") }
            var merged = info
            if merged.generation != outcome.generation { merged.merges.append(outcome.generation) }
            let token = try await PullStart.token(merged, at: outcome.position, storage: storage)
            return StateUploadResult(token: token.description, upToDate: outcome.upToDate, acknowledged: outcome.acknowledged)
        } catch let error as ServerError {
            throw Self.syncError(error)
        } catch let error as ZoneStorageError {
            throw Self.syncError(ServerError(error))
        }
    }

    /// The server routes' check before a push or a state is taken: `assetMissing` (409, naming the
    /// assets, as the HTTP transport reads it) when the zone does not hold every one of `named`.
    private func requireHeld(_ named: Set<AssetHash>, zone: ZoneID, user: String, by what: String, nothingDone: String) async throws {
        guard !named.isEmpty else { return }
        let unheld: [AssetHash]
        do {
            unheld = try await storage().unheldAssets(zone: zone, user: user, assets: named)
        } catch let error as ZoneStorageError {
            throw Self.answered(ServerError(error))
        }
        guard !unheld.isEmpty else { return }
        state.withLock { $0.assetMissing += 1 }
        throw Self.answered(ServerError(.assetMissing, "the \(what) names \(unheld.count) asset(s) zone \(zone) does not hold (\(unheld.prefix(3).map(\.hex).joined(separator: ", "))\(unheld.count > 3 ? ", …" : "")): upload them to the zone first; nothing was \(nothingDone)",
                                        assets: unheld.map(\.hex)))
    }

    /// `error` as the HTTP transport reads the server's answer: its status, and the assets an
    /// `assetMissing` names. (The older calls above answer without a status, as they always have:
    /// their seeds replay the same runs.)
    static func answered(_ error: ServerError) -> SyncError {
        var answer = SyncError(SyncError.Code(error.code.name), error.message, status: error.code.status, expectedSequence: error.expected,
                               sequence: error.sequence, serverTime: error.serverTime, maxOffset: error.maxOffset)
        answer.assets = error.assets.map { $0.compactMap(AssetHash.init(hex:)) }
        return answer
    }

    // MARK: Assets, as the server's asset routes take them

    /// How many pushes and state uploads were refused with `assetMissing` so far.
    var assetMissingAnswers: Int { state.withLock { $0.assetMissing } }
    /// The assets whose upload reached the storage so far.
    var uploadedAssets: Set<AssetHash> { state.withLock { $0.uploaded } }

    /// The HTTP server's default limits, which the asset calls keep.
    static let limits = ServerConfiguration.Limits()
    /// The largest asset the simulated server takes.
    static let maxAssetBytes = limits.maxAssetBytes

    /// Runs an asset route's storage call, its errors answered as the route answers them.
    private func assetCall<T>(_ body: (any ZoneStorage) async throws(ZoneStorageError) -> T) async throws -> T {
        do {
            return try await body(storage())
        } catch let error as ZoneStorageError {
            throw Self.answered(ServerError(error))
        }
    }

    /// The zone for `user` as the routes resolve it: `zoneNotFound` when it does not exist or
    /// `user` may not read it; with `write`, `forbidden` when `user` may only read it.
    private func resolve(_ zone: ZoneID, user: String, write: Bool) async throws -> ZoneInfo {
        guard let info = try await assetCall({ storage async throws(ZoneStorageError) in try await storage.zone(zone) }), info.canRead(user) else {
            throw Self.answered(ServerError(.zoneNotFound, "no zone \(zone)"))
        }
        if write, !info.canPush(user) { throw Self.answered(ServerError(.forbidden, "user \(user) may not push to zone \(zone)")) }
        return info
    }

    func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        _ = try await resolve(zone, user: user, write: true)
        guard manifest.byteCount <= Self.maxAssetBytes else {
            throw Self.answered(ServerError(.tooLarge, "asset \(manifest.sha256) has \(manifest.byteCount) bytes; this server accepts assets of at most \(Self.maxAssetBytes)"))
        }
        self.state.withLock { _ = $0.uploaded.insert(manifest.sha256) }
        let state = try await assetCall { storage async throws(ZoneStorageError) in
            try await storage.beginAssetUpload(zone: zone, user: user, manifest: manifest, storedBytesLimit: nil,
                                               unfinishedLimits: UnfinishedUploadLimits(perUser: Self.limits.maxUnfinishedUploadsPerUser,
                                                                                        perZone: Self.limits.maxUnfinishedUploadsPerZone))
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return AssetUploadAnswer(missing: state.missing, complete: state.complete)
    }

    func putAssetChunk(zone: ZoneID, user: String, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        _ = try await resolve(zone, user: user, write: true)
        guard bytes.count <= AssetManifest.chunkSize else {
            throw Self.answered(ServerError(.tooLarge, "chunk \(index) of asset \(asset) has \(bytes.count) bytes; a chunk has at most \(AssetManifest.chunkSize)"))
        }
        let state = try await assetCall { storage async throws(ZoneStorageError) in
            try await storage.putAssetChunk(zone: zone, user: user, sha256: asset, index: index, bytes: bytes, storedBytesLimit: nil)
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return AssetUploadAnswer(missing: state.missing, complete: state.complete)
    }

    func assetManifest(zone: ZoneID, user: String, asset: AssetHash) async throws -> AssetManifest? {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        _ = try await resolve(zone, user: user, write: false)
        let manifest = try await assetCall { storage async throws(ZoneStorageError) in try await storage.heldAsset(zone: zone, sha256: asset) }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        // The HTTP transport reads the route's `assetNotFound` as no manifest.
        return manifest
    }

    func assetChunk(zone: ZoneID, user: String, asset: AssetHash, index: Int) async throws -> [UInt8] {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        _ = try await resolve(zone, user: user, write: false)
        guard let bytes = try await assetCall({ storage async throws(ZoneStorageError) in try await storage.assetChunk(zone: zone, sha256: asset, index: index) }) else {
            throw Self.answered(ServerError(.assetNotFound, "zone \(zone) holds no asset \(asset)"))
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return bytes
    }

    /// Sweeps the server's unreferenced assets (``AssetStorage/sweepAssets(grace:)``), as its
    /// background compactor does.
    func sweepAssets(grace: Duration) async throws -> AssetSweepReport {
        try await storage().sweepAssets(grace: grace)
    }

    static func syncError(_ error: ServerError) -> SyncError {
        SyncError(SyncError.Code(error.code.name), error.message, status: nil, expectedSequence: error.expected,
                  sequence: error.sequence, serverTime: error.serverTime, maxOffset: error.maxOffset)
    }

    /// Compacts the zone keeping only the newest `retaining` transactions: clients behind that
    /// must bootstrap from the snapshot.
    func compact(retaining: UInt64) async throws {
        let storage = try storage()
        for zone in try await storage.zones() { try await storage.compact(zone: zone.id, retaining: retaining) }
    }

    func replicas(zone: ZoneID) async throws -> [ReplicaAuthor] {
        try await storage().replicas(zone: zone).map { ReplicaAuthor(replica: $0.replica, user: $0.user, acknowledged: $0.acknowledged) }
    }
}

/// One user's view of a ``SimulatedNetwork``.
struct SimulatedClient: SyncTransport {
    let network: SimulatedNetwork
    let user: String

    func id(_ zone: ZoneReference) -> ZoneID { ZoneID(owner: zone.owner ?? user, name: zone.name) }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        try await network.ensureZone(id(zone), user: user, create: create)
    }
    func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        try await network.ensureZone(id(zone), user: user, create: create, continuing: continuing)
    }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        try await network.push(zone: id(zone), user: user, transactions: transactions)
    }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        try await network.pull(zone: id(zone), user: user, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await network.snapshot(zone: id(zone)) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await network.replicas(zone: id(zone)) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await network.uploadState(zone: id(zone), user: user, state: state, replica: replica, claim: claim, after: token)
    }
    func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        try await network.beginAssetUpload(zone: id(zone), user: user, manifest: manifest)
    }
    func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        try await network.putAssetChunk(zone: id(zone), user: user, asset: asset, index: index, bytes: bytes)
    }
    func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? {
        try await network.assetManifest(zone: id(zone), user: user, asset: asset)
    }
    func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        try await network.assetChunk(zone: id(zone), user: user, asset: asset, index: index)
    }
}
