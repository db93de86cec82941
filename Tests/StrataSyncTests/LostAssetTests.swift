import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// Forwards to a real HTTP transport, and refuses to begin asset uploads while `refusing` (a
/// server that will not take the asset again: over quota, say).
final class UploadRefusingTransport: SyncTransport, Sendable {
    let base: HTTPSyncTransport
    let refusing = Mutex(false)
    /// Refuses pushes as forbidden (write access revoked between the upload and the push).
    let forbiddingPushes = Mutex(false)
    init(_ base: HTTPSyncTransport) { self.base = base }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
    func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        try await base.ensureZone(zone, create: create, continuing: continuing)
    }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { try await base.push(zone: zone, transactions: transactions) }
    func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer {
        if forbiddingPushes.withLock({ $0 }) { throw SyncError(.forbidden, "write access was revoked (test)", status: 403) }
        return try await base.push(zone: zone, transactions: transactions, epoch: epoch)
    }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await base.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
    func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        if refusing.withLock({ $0 }) { throw SyncError(.quotaExceeded, "the owner's storage is full (test)", status: 413) }
        return try await base.beginAssetUpload(zone: zone, manifest: manifest)
    }
    func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        try await base.putAssetChunk(zone: zone, asset: asset, index: index, bytes: bytes)
    }
    func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? { try await base.assetManifest(zone: zone, asset: asset) }
    func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        try await base.assetChunk(zone: zone, asset: asset, index: index)
    }
}

@Suite("An asset the server lost: the device keeps its copy until a server holds the asset again")
struct LostAssetTests {
    @Test("After the server answers assetMissing for an asset this device had uploaded (it lost it) and taking it again fails, the device's copy no longer counts as held by a server: a cache budget of zero keeps it, and the next sync uploads it")
    func lostAssetStaysOnTheDevice() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: ["alice": "alice-secret"]) { url, storage in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let photo = try await phone.importAsset(Data(assetBytes(5000, seed: 21)), mediaType: "image/jpeg")
            let transport = UploadRefusingTransport(HTTPSyncTransport(server: url, bearer: "alice-secret"))
            let engine = try SyncEngine(store: phone, transport: transport, zone: "notes")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(photo)]) }
            try await engine.sync()
            #expect(try phone.assetCacheUsage().notUploaded == 0, "the upload completed: a server holds the photo")

            // The server loses its asset files (restored from a backup without them).
            try FileManager.default.removeItem(atPath: dir.sub("server/assets"))
            transport.refusing.withLock { $0 = true }
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "again", "photo": .asset(photo)]) }
            let refusal = await #expect(throws: SyncError.self) { try await engine.sync() }
            #expect(refusal?.code == .quotaExceeded, "the sync reports why the asset could not be uploaded")
            #expect(try phone.assetCacheUsage().notUploaded == 1, "the server said it lacks the photo: this copy may be the last")
            phone.assetCacheBudget = 0
            _ = try await phone.trimAssetCache()
            #expect(phone.localFile(for: photo) != nil, "the last copy was evicted")

            transport.refusing.withLock { $0 = false }
            try await engine.sync()
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "notes"), sha256: photo.sha256) != nil)
            #expect(try phone.assetCacheUsage().notUploaded == 0)
            try await phone.close()
        }
    }

    @Test("An asset uploaded for a push the server then refuses stays on the device under any budget: only an acknowledged transaction naming it lets it go (the server keeps an upload nothing names only for its grace)")
    func uploadedButUnpushedAssetStays() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: ["alice": "alice-secret"]) { url, storage in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let photo = try await phone.importAsset(Data(assetBytes(5000, seed: 25)), mediaType: "image/jpeg")
            let transport = UploadRefusingTransport(HTTPSyncTransport(server: url, bearer: "alice-secret"))
            let engine = try SyncEngine(store: phone, transport: transport, zone: "notes")
            try await engine.sync()
            try await phone.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(photo)]) }
            transport.forbiddingPushes.withLock { $0 = true }
            _ = try? await engine.sync()
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "notes"), sha256: photo.sha256) != nil, "the upload went before the push")
            #expect(await engine.currentStatus.pending == 1)
            #expect(try phone.assetCacheUsage().notUploaded == 1, "an upload no acknowledged transaction names counts as held by a server")
            phone.assetCacheBudget = 0
            _ = try await phone.trimAssetCache()
            #expect(phone.localFile(for: photo) != nil, "evicted before the push naming it was acknowledged")

            transport.forbiddingPushes.withLock { $0 = false }
            try await engine.sync()
            #expect(await engine.currentStatus.pending == 0)
            #expect(try phone.assetCacheUsage().notUploaded == 0, "acknowledged: the device may let it go")
            try await phone.close()
        }
    }

    @Test("assetMissing names the assets the zone lacks, and the client reads the list; the engine says how large an asset the server takes")
    func assetMissingNamesTheAssets() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: ["alice": "alice-secret"]) { url, _ in
            let http = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await http.ensureZone(ZoneReference("notes"), create: true)
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let stray = try Asset(sha256: AssetHash.of(Array("never imported".utf8)), byteCount: 14, mediaType: "image/png")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(stray)]) }
            let engine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret")
            let refusal = await #expect(throws: SyncError.self) { try await engine.sync() }
            #expect(refusal?.code == .assetMissing)
            #expect(refusal?.assets == [stray.sha256])
            #expect(await engine.serverMaxAssetBytes == ServerConfiguration.Limits().maxAssetBytes, "the engine passes on the server's asset size limit")
            try await phone.close()
        }
    }

    @Test("In continuous sync, a photo the server will not take (over its size limit) leaves its note pending with the reason in the status, naming the photo, while the device keeps receiving the others' edits")
    func refusedAssetDoesNotStopContinuousSync() async throws {
        let dir = TemporaryDirectory()
        var limits = ServerConfiguration.Limits()
        limits.maxAssetBytes = 4000
        try await withServer(dir.sub("server"), users: ["alice": "alice-secret"], limits: limits) { url, _ in
            let laptop = try await Store.open(at: dir.sub("laptop"), schema: photoSchema)
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await laptopEngine.sync()
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let video = try await phone.importAsset(Data(assetBytes(9000, seed: 23)), mediaType: "video/mp4")
            let small = try await phone.importAsset(Data(assetBytes(1000, seed: 24)), mediaType: "image/jpeg")
            try await phone.transaction { tx in
                _ = try tx.insert("Note", ["title": "with a video", "photo": .asset(video), "thumbnail": .asset(small)])
            }
            var polling = SyncOptions()
            polling.longPoll = .seconds(2)
            let engine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret", options: polling)
            await engine.start()
            // The laptop's edit reaches the phone although the phone's own push is refused.
            try await laptop.transaction { tx in _ = try tx.insert("Note", ["title": "from the laptop"]) }
            try await laptopEngine.sync()
            var arrived = false
            for _ in 0..<200 where !arrived {
                try await Task.sleep(for: .milliseconds(50))
                arrived = phone.fetch("Note").contains { $0["title"] == "from the laptop" }
            }
            #expect(arrived, "the device stopped receiving edits")
            let status = await engine.currentStatus
            #expect(status.lastError?.code == .tooLarge, "\(String(describing: status.lastError))")
            #expect(status.lastError?.assets == [video.sha256], "the refusal names the video (and not the thumbnail it took)")
            #expect(status.pending == 1 && status.blocked != nil)
            await engine.stop()
            try await phone.close()
            try await laptop.close()
        }
    }
}
