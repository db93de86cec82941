import Foundation
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// What one user's upload can do to another's of the same asset in the same zone: nothing.
/// Uploads are kept per uploader (a manifest is its uploader's claim until the whole asset
/// verifies), on both backends.
@Suite("Asset uploads: one user's upload never resets or blocks another's")
struct AssetUploadIsolationTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]

    @Test("a grantee who begins the owner's asset with another chunk list, and sends chunks of it, leaves the owner's upload as it was: the owner resumes where it stopped and completes; the grantee's lie never completes",
          arguments: backends)
    func granteeCannotResetOwnersUpload(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let asset = try TestAsset(seed: 301, byteCount: 2 * AssetManifest.chunkSize + 1000)
        let decoy = try TestAsset(seed: 302, byteCount: AssetManifest.chunkSize + 10)
        // The asset's hash, someone else's chunks.
        let lie = try AssetManifest(sha256: asset.sha256, byteCount: decoy.manifest.byteCount, chunks: decoy.manifest.chunks)

        #expect(try await storage.beginAssetUpload(zone: "shared", user: "alice", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        #expect(try await storage.putAssetChunk(zone: "shared", user: "alice", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil).missing == [1, 2])

        // Bob's begin is his own upload: every chunk of his manifest is his to send.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: lie, storedBytesLimit: nil).missing == [0, 1])
        #expect(try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: decoy.chunk(0), storedBytesLimit: nil).missing == [1])
        // Alice's upload is as she left it, across a reopen too.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "alice", manifest: asset.manifest, storedBytesLimit: nil).missing == [1, 2])
        try await storage.close()
        storage = try await site.open()
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "alice", manifest: asset.manifest, storedBytesLimit: nil).missing == [1, 2])
        // Bob's last chunk of the lie: every chunk matches his manifest, the whole does not match
        // the hash, so it never completes.
        let refused = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 1, bytes: decoy.chunk(1), storedBytesLimit: nil)
        }
        #expect(refused?.code == .assetMismatch, "\(String(describing: refused))")
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == nil)
        // Alice's chunk sent under Bob's name goes to Bob's upload, not hers.
        let wrongUpload = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: nil)
        }
        #expect(wrongUpload?.code == .invalidArgument, "\(String(describing: wrongUpload))")

        #expect(try await storage.putAssetChunk(zone: "shared", user: "alice", sha256: asset.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: nil).missing == [2])
        #expect(try await storage.putAssetChunk(zone: "shared", user: "alice", sha256: asset.sha256, index: 2, bytes: asset.chunk(2), storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == asset.chunk(0))
        // Held now: Bob has nothing left to send either.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: lie, storedBytesLimit: nil) == AssetUploadState(missing: [], complete: true))
        try await storage.close()
    }

    @Test("a grantee cannot learn whether the owner holds a file through the quota: with the owner's quota full to within a chunk, a chunk the owner already holds (in a private zone) is refused quotaExceeded exactly as one it does not hold; the owner's own upload of it still dedups",
          arguments: backends)
    func quotaIsNoExistenceOracle(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        _ = try await storage.createZone(name: "private", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let secret = try TestAsset(seed: 311, byteCount: 3000)
        let other = try TestAsset(seed: 312, byteCount: 3000)
        // Alice holds the secret in her private zone.
        _ = try await storage.beginAssetUpload(zone: "private", user: "alice", manifest: secret.manifest, storedBytesLimit: nil)
        _ = try await storage.putAssetChunk(zone: "private", user: "alice", sha256: secret.sha256, index: 0, bytes: secret.chunk(0), storedBytesLimit: nil)
        // Her quota is full to within less than a chunk.
        let used = try await storage.storedBytes(owner: "alice")
        let limit = used + 100
        func answer(_ asset: TestAsset) async -> ZoneStorageError.Code? {
            do {
                // Begun while the quota had room (a begin checks it too); filled before the chunk.
                _ = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil)
                _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: limit)
                return nil
            } catch {
                return error.code
            }
        }
        let forHeld = await answer(secret)
        let forAbsent = await answer(other)
        #expect(forHeld == .quotaExceeded && forAbsent == .quotaExceeded, "held: \(String(describing: forHeld)), absent: \(String(describing: forAbsent))")
        #expect(try await storage.heldAsset(zone: "shared", sha256: secret.sha256) == nil)
        #expect(try await storage.storedBytes(owner: "alice") == used, "a refused chunk was counted")
        // Alice herself links what she holds, whatever her quota.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "alice", manifest: secret.manifest, storedBytesLimit: limit).missing.isEmpty)
        try await storage.close()
    }

    @Test("two grantees uploading one asset into one zone each send their own chunks and both end with the zone holding it; its bytes are stored and counted once",
          arguments: backends)
    func twoGranteesUploadTheSameAsset(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite, "carol": .readWrite])
        let asset = try TestAsset(seed: 303, byteCount: 2 * AssetManifest.chunkSize + 5)
        let before = try await storage.storedBytes(owner: "alice")
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        #expect(try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil).missing == [1, 2])
        // Carol learns nothing of Bob's upload: every chunk is hers to send.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "carol", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        for index in 0..<asset.chunkCount {
            _ = try await storage.putAssetChunk(zone: "shared", user: "carol", sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
        }
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        try await storage.close()
    }
}
