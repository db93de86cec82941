import Foundation
@testable import StrataLog
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// The embedded storage's asset writes on a full disk (ENOSPC injected through StrataLog's
/// file layer, which every asset file goes through): a typed `storageFull`, nothing half-written
/// visible, the count exact, and the same upload completes once space returns.
@Suite("Embedded asset storage on a full disk", .serialized)
struct AssetDiskFullTests {
    /// Where the disk is full: every asset file, or only the uploads' chunk lists (the chunk
    /// itself is written, its record is not).
    enum Full: String, CaseIterable, Sendable { case assets, uploadRecords }

    @Test("a chunk or manifest that meets a full disk is refused storageFull; no chunk file under a hash its bytes do not have, no temporary left, the stored bytes exact; once space returns the same upload completes, also after a reopen",
          arguments: Full.allCases)
    func chunkWriteOnFullDisk(_ full: Full) async throws {
        let site = try StorageSite(.embedded)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let asset = try TestAsset(seed: 600, byteCount: 2 * AssetManifest.chunkSize + 300)
        let before = try await storage.storedBytes(owner: "alice")
        let root = site.directory.sub("data") + "/assets"
        let failing = full == .assets ? root : root + "/" + EmbeddedAssets.ownerDirectoryName("alice") + "/zones"
        if full == .uploadRecords {
            #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        }
        FaultInjection.failWrites(under: failing, errno: ENOSPC)
        defer { FaultInjection.clear(failing) }
        let refused = await refusal { () async throws(ZoneStorageError) in
            if full == .assets {
                _ = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil)
            }
            _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        }
        #expect(refused?.code == .storageFull, "\(String(describing: refused))")
        if full == .assets {
            // With the begin refused too, a chunk is refused before anything is written.
            FaultInjection.clear(failing)
            _ = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil)
            FaultInjection.failWrites(under: failing, errno: ENOSPC)
            let chunk = await refusal { () async throws(ZoneStorageError) in
                _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
            }
            #expect(chunk?.code == .storageFull, "\(String(describing: chunk))")
        }
        try Self.expectNothingHalfWritten(root)
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == nil)
        // A chunk written before its record failed is the owner's and counted once; one refused
        // before it was written is not counted.
        let counted = try await storage.storedBytes(owner: "alice") - before
        #expect(counted == (full == .uploadRecords ? Int64(AssetManifest.chunkSize) : 0))

        FaultInjection.clear(failing)
        try await storage.close()
        storage = try await site.open()
        var state = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil)
        #expect(state.missing == [0, 1, 2])
        for index in state.missing {
            state = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
        }
        #expect(state == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == asset.chunk(0))
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        try Self.expectNothingHalfWritten(root)
        try await storage.close()
        storage = try await site.open()
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        try await storage.close()
    }

    /// Every chunk file under `root` holds the bytes its name is the hash of, every manifest
    /// decodes as its asset's, and no temporary file is left.
    static func expectNothingHalfWritten(_ root: String) throws {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return }
        for case let relative as String in walker {
            let path = root + "/" + relative
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let name = (relative as NSString).lastPathComponent
            #expect(!name.hasSuffix(".tmp"), "a temporary file was left: \(relative)")
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            if relative.contains("/chunks/"), let hash = AssetHash(hex: name) {
                #expect(AssetHash.of(bytes) == hash, "chunk \(relative) does not hash to its name")
            }
            if relative.contains("/manifests/"), let hash = AssetHash(hex: name) {
                #expect(AssetManifest.decode(bytes, expecting: hash) != nil, "manifest \(relative) does not decode")
            }
        }
    }
}
