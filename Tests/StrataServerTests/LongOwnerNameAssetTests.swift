import Foundation
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// A users file allows names of any length, and the embedded storage keeps an owner's assets in a
/// directory named after the owner: named by the name's hex, a name of more than 127 bytes made a
/// directory name no file system takes, and every upload of that user's failed with a `500`.
@Suite("Assets of an owner whose name is longer than a file name")
struct LongOwnerNameAssetTests {
    @Test("an owner with a 200-byte name uploads an asset, its zones hold it, and its stored bytes count it across a reopen",
          arguments: [StorageBackend.embedded, .postgres])
    func longOwnerName(_ backend: StorageBackend) async throws {
        let owner = String(repeating: "ü", count: 100)  // 200 bytes of UTF-8: 400 hex digits
        let other = String(repeating: "ü", count: 101)  // a name sharing the first one's prefix
        let site = try StorageSite(backend)
        let asset = try TestAsset(seed: 7, byteCount: AssetManifest.chunkSize + 500)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "photos", owner: owner, access: .private, grants: [:])
        _ = try await storage.createZone(name: "albums", owner: owner, access: .private, grants: [:])
        _ = try await storage.createZone(name: "photos", owner: other, access: .private, grants: [:])
        let before = try await storage.storedBytes(owner: owner)

        #expect(try await storage.beginAssetUpload(zone: ZoneID(owner: owner, name: "photos"), user: owner, manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [0, 1], complete: false))
        _ = try await storage.putAssetChunk(zone: ZoneID(owner: owner, name: "photos"), user: owner, sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        let done = try await storage.putAssetChunk(zone: ZoneID(owner: owner, name: "photos"), user: owner, sha256: asset.sha256, index: 1, bytes: asset.chunk(1),
                                                   storedBytesLimit: nil)
        #expect(done == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.assetChunk(zone: ZoneID(owner: owner, name: "photos"), sha256: asset.sha256, index: 1) == asset.chunk(1))
        // The owner's other zone takes it without a byte sent; another owner's zone does not.
        #expect(try await storage.beginAssetUpload(zone: ZoneID(owner: owner, name: "albums"), user: owner, manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.beginAssetUpload(zone: ZoneID(owner: other, name: "photos"), user: other, manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [0, 1], complete: false))
        #expect(try await storage.storedBytes(owner: owner) == before + Int64(asset.bytes.count))
        try await storage.close()

        // Measured again on open (the embedded storage counts its chunk files).
        storage = try await site.open()
        #expect(try await storage.storedBytes(owner: owner) == before + Int64(asset.bytes.count))
        #expect(try await storage.heldAsset(zone: ZoneID(owner: owner, name: "albums"), sha256: asset.sha256) == asset.manifest)
        try await storage.close()
    }
}
