import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// Uploads begun and never finished are capped per uploader and per zone (besides the rate limit
/// and the sweep's grace), and the chunks they received count toward the owner's stored bytes.
@Suite("Unfinished asset uploads: capped per user and per zone, their chunks counted")
struct UnfinishedUploadLimitTests {
    static let limits = UnfinishedUploadLimits(perUser: 2, perZone: 3)

    @Test("a user past the per-user cap, or a zone past the per-zone cap, cannot begin another upload (quotaExceeded, nothing begun), yet resumes what it began; grantees filling a zone's cap never lock its owner out; a completed upload makes room; the caps hold across a reopen",
          arguments: [StorageBackend.embedded, .postgres])
    func capsRefuseNewUploads(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "one", owner: "alice", access: .shared, grants: ["bob": .readWrite, "carol": .readWrite, "dave": .readWrite])
        _ = try await storage.createZone(name: "two", owner: "alice", access: .shared, grants: ["bob": .readWrite, "dave": .readWrite])
        let assets = try (0..<6).map { try TestAsset(seed: 500 + UInt64($0), byteCount: AssetManifest.chunkSize + 100) }
        let before = try await storage.storedBytes(owner: "alice")
        func begin(_ zone: ZoneID, _ user: String, _ asset: TestAsset) async throws -> AssetUploadState {
            try await storage.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil, unfinishedLimits: Self.limits)
        }
        func refusedBegin(_ zone: ZoneID, _ user: String, _ asset: TestAsset) async -> ZoneStorageError? {
            await refusal { () async throws(ZoneStorageError) in
                _ = try await storage.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil, unfinishedLimits: Self.limits)
            }
        }

        #expect(try await begin("one", "bob", assets[0]).missing == [0, 1])
        #expect(try await begin("two", "bob", assets[1]).missing == [0, 1])
        // The unfinished upload's received chunk is stored, and counted, at once.
        _ = try await storage.putAssetChunk(zone: "two", user: "bob", sha256: assets[1].sha256, index: 0, bytes: assets[1].chunk(0), storedBytesLimit: nil)
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(AssetManifest.chunkSize))
        // Bob's third, in either zone: over his cap.
        let third = await refusedBegin("one", "bob", assets[2])
        #expect(third?.code == .quotaExceeded, "\(String(describing: third))")
        #expect(third?.message.contains("unfinishedUploadsPerUser") == true, "\(String(describing: third))")
        // Nothing was begun by the refusal.
        let notBegun = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "one", user: "bob", sha256: assets[2].sha256, index: 0, bytes: assets[2].chunk(0), storedBytesLimit: nil)
        }
        #expect(notBegun?.code == .invalidArgument, "\(String(describing: notBegun))")
        // What he began, he resumes.
        #expect(try await begin("two", "bob", assets[1]).missing == [1])
        // Zone one: bob's one and carol's two fill it; dave is refused there, not in zone two.
        _ = try await begin("one", "carol", assets[3])
        _ = try await begin("one", "carol", assets[4])
        let full = await refusedBegin("one", "dave", assets[5])
        #expect(full?.code == .quotaExceeded, "\(String(describing: full))")
        #expect(full?.message.contains("unfinishedUploadsPerZone") == true, "\(String(describing: full))")
        #expect(try await begin("two", "dave", assets[5]).missing == [0, 1])
        // The grantees filled zone one: its owner still begins there (bounded by her own cap),
        // and her upload takes no grantee's place.
        #expect(try await begin("one", "alice", assets[5]).missing == [0, 1])
        #expect(await refusedBegin("one", "dave", assets[2])?.code == .quotaExceeded)

        try await storage.close()
        storage = try await site.open()
        #expect(await refusedBegin("one", "bob", assets[2])?.code == .quotaExceeded)
        #expect(await refusedBegin("one", "dave", assets[2])?.code == .quotaExceeded)
        // Bob completes one: room for another.
        #expect(try await storage.putAssetChunk(zone: "two", user: "bob", sha256: assets[1].sha256, index: 1, bytes: assets[1].chunk(1), storedBytesLimit: nil).complete)
        #expect(try await begin("two", "bob", assets[2]).missing == [0, 1])
        // Carol completes one of hers in zone one: room there for dave.
        for index in 0..<assets[3].chunkCount {
            _ = try await storage.putAssetChunk(zone: "one", user: "carol", sha256: assets[3].sha256, index: index, bytes: assets[3].chunk(index), storedBytesLimit: nil)
        }
        #expect(try await begin("one", "dave", assets[5]).missing == [0, 1])
        try await storage.close()
    }

    @Test("over HTTP, --limit maxUnfinishedUploadsPerUser: a manifest PUT past it is 403 quotaExceeded naming unfinishedUploadsPerUser and counted as a quota refusal; the one begun resumes; defaults 64 per user and 256 per zone")
    func overHTTP() async throws {
        #expect(ServerConfiguration.Limits().maxUnfinishedUploadsPerUser == 64)
        #expect(ServerConfiguration.Limits().maxUnfinishedUploadsPerZone == 256)
        var limits = ServerConfiguration.Limits()
        limits.maxUnfinishedUploadsPerUser = 1
        let server = try TestServer(limits: limits)
        let first = try TestAsset(seed: 540, byteCount: 3000)
        let second = try TestAsset(seed: 541, byteCount: 3000)
        try await server.test { client in
            try await client.createZone("photos")
            func begin(_ asset: TestAsset) async throws -> TestResponse {
                try await client.execute(uri: "/v1/zones/photos/assets/\(asset.sha256.hex)", method: .put, headers: auth(Token.alice),
                                         body: ByteBuffer(bytes: try JSONEncoder().encode(AssetManifestBody(asset.manifest))))
            }
            #expect(try await begin(first).status == .ok)
            let refused = try await begin(second)
            #expect(refused.status == .forbidden)
            let error = try errorBody(refused)
            #expect(error.code == "quotaExceeded" && error.message.contains("unfinishedUploadsPerUser"), "\(error.message)")
            #expect(String(decoding: server.app.metrics.exposition(), as: UTF8.self).contains("strata_quota_refusals_total 1"))
            #expect(try await begin(first).status == .ok)
        }
    }

    @Test("the owner's upload into one zone of an asset it then completed in another is finished when begun again there (the zone holds it at once) and no longer counts against the owner's cap",
          arguments: [StorageBackend.embedded, .postgres])
    func ownersUploadLinkedElsewhereMakesRoom(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        _ = try await storage.createZone(name: "one", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "two", owner: "alice", access: .private, grants: [:])
        let limits = UnfinishedUploadLimits(perUser: 2, perZone: 0)
        let assets = try (0..<3).map { try TestAsset(seed: 530 + UInt64($0), byteCount: 3000) }
        func begin(_ zone: ZoneID, _ asset: TestAsset) async throws -> AssetUploadState {
            try await storage.beginAssetUpload(zone: zone, user: "alice", manifest: asset.manifest, storedBytesLimit: nil, unfinishedLimits: limits)
        }
        #expect(try await begin("one", assets[0]).missing == [0])
        #expect(try await begin("two", assets[0]).missing == [0])
        #expect(try await storage.putAssetChunk(zone: "two", user: "alice", sha256: assets[0].sha256, index: 0, bytes: assets[0].chunk(0), storedBytesLimit: nil).complete)
        // Held through zone two: zone one holds it without a byte sent, and the upload begun
        // there is over.
        #expect(try await begin("one", assets[0]) == AssetUploadState(missing: [], complete: true))
        #expect(try await begin("one", assets[1]).missing == [0])
        #expect(try await begin("one", assets[2]).missing == [0])
        try await storage.close()
    }

    @Test("an upload completed by another user leaves the first user's own upload of the asset finished: it no longer counts against the user's cap",
          arguments: [StorageBackend.embedded, .postgres])
    func anotherUsersCompletionMakesRoom(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        _ = try await storage.createZone(name: "one", owner: "alice", access: .shared, grants: ["bob": .readWrite, "carol": .readWrite])
        let limits = UnfinishedUploadLimits(perUser: 1, perZone: 0)
        let asset = try TestAsset(seed: 520, byteCount: 3000)
        let next = try TestAsset(seed: 521, byteCount: 3000)
        _ = try await storage.beginAssetUpload(zone: "one", user: "bob", manifest: asset.manifest, storedBytesLimit: nil, unfinishedLimits: limits)
        _ = try await storage.beginAssetUpload(zone: "one", user: "carol", manifest: asset.manifest, storedBytesLimit: nil, unfinishedLimits: limits)
        #expect(try await storage.putAssetChunk(zone: "one", user: "carol", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil).complete)
        // Bob's client hears the asset is held at its next step, and may begin another.
        #expect(try await storage.putAssetChunk(zone: "one", user: "bob", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil).complete)
        #expect(try await storage.beginAssetUpload(zone: "one", user: "bob", manifest: next.manifest, storedBytesLimit: nil, unfinishedLimits: limits).missing == [0])
        try await storage.close()
    }
}
