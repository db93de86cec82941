import Foundation
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// The owner's stored bytes count each chunk once, however many uploads store it at the same
/// moment (the quota is decided on that count).
@Suite("Asset chunks stored at once by several uploads are counted once")
struct AssetChunkCountTests {
    @Test("eight uploads of one asset at once — the owner's and grantees', into one zone and into several — count its bytes once in the owner's stored bytes, also as measured again after a reopen",
          arguments: [StorageBackend.embedded, .postgres])
    func concurrentUploadsCountOnce(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        let grantees = ["bob", "carol", "dave"]
        let grants = Dictionary(uniqueKeysWithValues: grantees.map { ($0, ZoneGrant.readWrite) })
        for zone in ["one", "two"] {
            _ = try await storage.createZone(name: zone, owner: "alice", access: .shared, grants: grants)
        }
        var uploaders: [(ZoneID, String)] = []
        for zone: ZoneID in ["one", "two"] {
            for user in ["alice"] + grantees { uploaders.append((zone, user)) }
        }
        let before = try await storage.storedBytes(owner: "alice")
        var expected = before
        for round in 0..<3 {
            let asset = try TestAsset(seed: 400 + UInt64(round), byteCount: 3 * AssetManifest.chunkSize + 17)
            let shared = storage
            // Every upload begun first, so that each has every chunk to send; then all send at once.
            for (zone, user) in uploaders {
                _ = try await shared.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil)
            }
            let states = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (zone, user) in uploaders {
                    group.addTask {
                        var state = AssetUploadState(missing: [], complete: false)
                        for index in 0..<asset.chunkCount {
                            state = try await shared.putAssetChunk(zone: zone, user: user, sha256: asset.sha256, index: index, bytes: asset.chunk(index),
                                                                   storedBytesLimit: nil)
                        }
                        return state.complete
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(states.allSatisfy { $0 }, "round \(round): \(states)")
            expected += Int64(asset.bytes.count)
            #expect(try await storage.storedBytes(owner: "alice") == expected, "round \(round)")
        }
        try await storage.close()
        storage = try await site.open()
        #expect(try await storage.storedBytes(owner: "alice") == expected)
        try await storage.close()
    }
}
