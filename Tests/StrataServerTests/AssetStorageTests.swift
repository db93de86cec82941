import Foundation
@_spi(StrataInternals) import StrataPostgres
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// The bytes of an asset and its manifest, made from a seed (so that two assets of different
/// seeds share no chunk, and a failure names the bytes it used).
struct TestAsset: Sendable {
    let bytes: [UInt8]
    let manifest: AssetManifest

    var sha256: AssetHash { manifest.sha256 }
    var chunkCount: Int { manifest.chunks.count }

    /// `byteCount` pseudo-random bytes of `seed`.
    init(seed: UInt64, byteCount: Int) throws {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var bytes = [UInt8](repeating: 0, count: byteCount)
        for i in bytes.indices {
            // xorshift64*: chunks of one asset differ too.
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            bytes[i] = UInt8(truncatingIfNeeded: (state &* 0x2545_F491_4F6C_DD1D) >> 56)
        }
        try self.init(bytes: bytes)
    }

    init(bytes: [UInt8]) throws {
        self.bytes = bytes
        var chunks: [AssetHash] = []
        var start = 0
        while start < bytes.count {
            let end = min(start + AssetManifest.chunkSize, bytes.count)
            chunks.append(AssetHash.of(bytes[start..<end]))
            start = end
        }
        manifest = try AssetManifest(sha256: AssetHash.of(bytes), byteCount: UInt64(bytes.count), chunks: chunks)
    }

    func chunk(_ index: Int) -> [UInt8] {
        let start = index * AssetManifest.chunkSize
        return Array(bytes[start..<min(start + AssetManifest.chunkSize, bytes.count)])
    }
}

/// Two full chunks and a short last one.
private let threeChunks = 2 * AssetManifest.chunkSize + 1000

/// The server's asset storage (`AssetStorage`), held to the same rules by the embedded storage
/// and the PostgreSQL one: bytes once per owner, links per zone life, uploads per zone, verified
/// chunk by chunk and as a whole, counted in the owner's stored bytes.
@Suite("Asset storage: chunks once per owner, links per zone life, verified uploads")
struct AssetStorageTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]

    @Test("an upload sent chunk by chunk resumes where it stopped, across a reopen: begun again, only the chunks not received are missing; complete, the zone holds the asset and serves its chunks",
          arguments: backends)
    func resumableUpload(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let asset = try TestAsset(seed: 1, byteCount: threeChunks)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let before = try await storage.storedBytes(owner: "alice")
        let begun = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
        #expect(begun == AssetUploadState(missing: [0, 1, 2], complete: false))
        let afterFirst = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        #expect(afterFirst == AssetUploadState(missing: [1, 2], complete: false))
        // Nothing of an unfinished upload is readable.
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == nil)
        #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: 0) == nil)
        try await storage.close()

        storage = try await site.open()
        let resumed = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
        #expect(resumed == AssetUploadState(missing: [1, 2], complete: false))
        // Out of order, and a chunk sent twice changes nothing.
        #expect(try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 2, bytes: asset.chunk(2), storedBytesLimit: nil)
            == AssetUploadState(missing: [1], complete: false))
        #expect(try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 2, bytes: asset.chunk(2), storedBytesLimit: nil)
            == AssetUploadState(missing: [1], complete: false))
        #expect(try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        for index in 0..<asset.chunkCount {
            #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: index) == asset.chunk(index))
        }
        #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: 3) == nil)
        #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: -1) == nil)
        // Each chunk counted once, whatever was sent twice.
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        // Begun again once held: nothing to send.
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        try await storage.close()

        storage = try await site.open()
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.assetChunk(zone: "photos", sha256: asset.sha256, index: 1) == asset.chunk(1))
        #expect(try await storage.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        try await storage.close()
    }

    @Test("the owner's bytes are stored once: the owner's second zone holds an asset without a byte sent, and an asset sharing a chunk lacks only the others; a grantee must send every chunk, which is counted no second time",
          arguments: backends)
    func dedupByOwner(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let asset = try TestAsset(seed: 2, byteCount: threeChunks)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "backup", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        try await upload(asset, to: "photos", by: "alice", in: storage)
        let counted = try await storage.storedBytes(owner: "alice")

        #expect(try await storage.beginAssetUpload(zone: "backup", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.heldAsset(zone: "backup", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.assetChunk(zone: "backup", sha256: asset.sha256, index: 2) == asset.chunk(2))

        // Another asset of the owner whose first chunk is the first asset's.
        let sharing = try TestAsset(bytes: asset.chunk(0) + TestAsset(seed: 3, byteCount: 5000).bytes)
        #expect(try await storage.beginAssetUpload(zone: "backup", user: "alice", manifest: sharing.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [1], complete: false))
        #expect(try await storage.putAssetChunk(zone: "backup", user: "alice", sha256: sharing.sha256, index: 1, bytes: sharing.chunk(1), storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.assetChunk(zone: "backup", sha256: sharing.sha256, index: 0) == asset.chunk(0))
        #expect(try await storage.storedBytes(owner: "alice") == counted + 5000)

        // A grantee learns nothing of what else the owner stores: every chunk is missing.
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [0, 1, 2], complete: false))
        for index in 0..<asset.chunkCount {
            _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
        }
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.storedBytes(owner: "alice") == counted + 5000)
        #expect(try await storage.storedBytes(owner: "bob") == 0)
        // A user who may only read cannot upload.
        _ = try await storage.updateZone("shared", access: .shared, grants: ["bob": .read])
        let refused = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: sharing.manifest, storedBytesLimit: nil)
        }
        #expect(refused?.code == .forbidden)
        try await storage.close()
    }

    @Test("a chunk whose hash or length is not the manifest's, or whose index is past the asset, is refused with a typed error and nothing of it is kept; a chunk of an upload never begun is refused",
          arguments: backends)
    func badChunks(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let asset = try TestAsset(seed: 4, byteCount: threeChunks)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let before = try await storage.storedBytes(owner: "alice")
        let neverBegun = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        }
        #expect(neverBegun?.code == .invalidArgument)
        _ = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
        var flipped = asset.chunk(1)
        flipped[100] ^= 1
        let cases: [(index: Int, bytes: [UInt8], code: ZoneStorageError.Code)] = [
            (1, flipped, .assetMismatch),
            (1, asset.chunk(0), .assetMismatch),  // a chunk of the asset, at the wrong index
            (2, asset.chunk(2) + [0], .assetMismatch),
            (2, Array(asset.chunk(2).dropLast()), .assetMismatch),
            (3, asset.chunk(2), .invalidArgument),
            (-1, asset.chunk(0), .invalidArgument),
        ]
        for bad in cases {
            let refused = await refusal { () async throws(ZoneStorageError) in
                _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: bad.index, bytes: bad.bytes, storedBytesLimit: nil)
            }
            #expect(refused?.code == bad.code, "chunk \(bad.index) of \(bad.bytes.count) bytes: \(String(describing: refused))")
        }
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [0, 1, 2], complete: false))
        #expect(try await storage.storedBytes(owner: "alice") == before)
        // The right bytes are taken after all that.
        try await upload(asset, to: "photos", by: "alice", in: storage)
        #expect(try await storage.heldAsset(zone: "photos", sha256: asset.sha256) == asset.manifest)
        try await storage.close()
    }

    @Test("a manifest whose chunks are right but whose asset hash is not is refused when the last chunk arrives: the zone holds nothing, and the upload starts over",
          arguments: backends)
    func lyingManifest(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let asset = try TestAsset(seed: 5, byteCount: threeChunks)
        let other = try TestAsset(seed: 6, byteCount: 10)
        let lie = try AssetManifest(sha256: other.sha256, byteCount: asset.manifest.byteCount, chunks: asset.manifest.chunks)
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: lie, storedBytesLimit: nil).missing == [0, 1, 2])
        _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: lie.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: nil)
        _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: lie.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: nil)
        let refused = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: lie.sha256, index: 2, bytes: asset.chunk(2), storedBytesLimit: nil)
        }
        #expect(refused?.code == .assetMismatch, "\(String(describing: refused))")
        #expect(try await storage.heldAsset(zone: "shared", sha256: lie.sha256) == nil)
        #expect(try await storage.assetChunk(zone: "shared", sha256: lie.sha256, index: 0) == nil)
        #expect(try await storage.unheldAssets(zone: "shared", user: "alice", assets: [lie.sha256]) == [lie.sha256])
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: lie, storedBytesLimit: nil).missing == [0, 1, 2])
        // The true manifest of those bytes goes through.
        try await upload(asset, to: "shared", by: "bob", in: storage)
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        try await storage.close()
    }

    @Test("a push by the owner links an asset the owner holds in another zone; a grantee's push cannot, nor can another user's zone name it; a zone that does not hold an asset reads nothing of it",
          arguments: backends)
    func unheldAssets(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let asset = try TestAsset(seed: 7, byteCount: 3000)
        let unknown = try TestAsset(seed: 8, byteCount: 3000)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        _ = try await storage.createZone(name: "mine", owner: "bob", access: .private, grants: [:])
        try await upload(asset, to: "photos", by: "alice", in: storage)
        #expect(try await storage.unheldAssets(zone: "photos", user: "alice", assets: []) == [])
        #expect(try await storage.unheldAssets(zone: "photos", user: "alice", assets: [asset.sha256, unknown.sha256]) == [unknown.sha256])

        // Knowing the hash reads nothing.
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == nil)
        #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == nil)
        #expect(try await storage.unheldAssets(zone: "shared", user: "bob", assets: [asset.sha256, unknown.sha256]) == [asset.sha256, unknown.sha256].sorted())
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == nil)
        #expect(try await storage.unheldAssets(zone: "bob/mine", user: "bob", assets: [asset.sha256]) == [asset.sha256])
        #expect(try await storage.heldAsset(zone: "bob/mine", sha256: asset.sha256) == nil)

        // The owner's push links it.
        #expect(try await storage.unheldAssets(zone: "shared", user: "alice", assets: [asset.sha256, unknown.sha256]) == [unknown.sha256])
        #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == asset.chunk(0))
        #expect(try await storage.unheldAssets(zone: "shared", user: "bob", assets: [asset.sha256]) == [])

        // A zone that does not exist is no zone that holds nothing.
        for call in [0, 1, 2] {
            let refused = await refusal { () async throws(ZoneStorageError) in
                switch call {
                case 0: _ = try await storage.heldAsset(zone: "nothing", sha256: asset.sha256)
                case 1: _ = try await storage.assetChunk(zone: "nothing", sha256: asset.sha256, index: 0)
                default: _ = try await storage.unheldAssets(zone: "nothing", user: "alice", assets: [asset.sha256])
                }
            }
            #expect(refused?.code == .zoneNotFound, "call \(call)")
        }
        try await storage.close()
    }

    @Test("a zone deleted and created again holds nothing of its earlier life: links and unfinished uploads go with the delete",
          arguments: backends)
    func deleteAndRecreate(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        let asset = try TestAsset(seed: 9, byteCount: 3000)
        let unfinished = try TestAsset(seed: 10, byteCount: threeChunks)
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        try await upload(asset, to: "shared", by: "bob", in: storage)
        _ = try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: unfinished.manifest, storedBytesLimit: nil)
        _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: unfinished.sha256, index: 0, bytes: unfinished.chunk(0), storedBytesLimit: nil)
        try await storage.deleteZone("shared")
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        for _ in 0..<2 {
            #expect(try await storage.heldAsset(zone: "shared", sha256: asset.sha256) == nil)
            #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == nil)
            #expect(try await storage.unheldAssets(zone: "shared", user: "bob", assets: [asset.sha256]) == [asset.sha256])
            let gone = await refusal { () async throws(ZoneStorageError) in
                _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: unfinished.sha256, index: 1, bytes: unfinished.chunk(1), storedBytesLimit: nil)
            }
            #expect(gone?.code == .invalidArgument)
            // And after a reopen.
            try await storage.close()
            storage = try await site.open()
        }
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: unfinished.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        try await storage.close()
    }

    @Test("the owner's stored bytes count asset chunks: an upload past the stored-bytes limit is refused at its start or at the chunk that would pass it (nothing kept), and a push past it counting the assets is refused",
          arguments: backends)
    func quota(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        let asset = try TestAsset(seed: 11, byteCount: threeChunks)
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let replica = ReplicaID.random()
        _ = try await storage.append(zone: "photos", user: "alice", replica: replica, transactions: [pushed(transaction(replica, 1...1))], storedBytesLimit: nil)
        let logBytes = try await storage.storedBytes(owner: "alice")
        let size = Int64(asset.bytes.count)

        let atStart = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: logBytes + size - 1)
        }
        #expect(atStart?.code == .quotaExceeded, "\(String(describing: atStart))")
        // Begun within the limit, then a chunk past a lower one.
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: logBytes + size).missing == [0, 1, 2])
        _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 0, bytes: asset.chunk(0), storedBytesLimit: logBytes + size)
        let oneChunk = Int64(AssetManifest.chunkSize)
        let atChunk = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 1, bytes: asset.chunk(1),
                                                storedBytesLimit: logBytes + oneChunk + oneChunk - 1)
        }
        #expect(atChunk?.code == .quotaExceeded, "\(String(describing: atChunk))")
        #expect(try await storage.storedBytes(owner: "alice") == logBytes + oneChunk)
        #expect(try await storage.beginAssetUpload(zone: "photos", user: "alice", manifest: asset.manifest, storedBytesLimit: nil).missing == [1, 2])
        // No limit (0 or nil) refuses nothing.
        _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 1, bytes: asset.chunk(1), storedBytesLimit: 0)
        _ = try await storage.putAssetChunk(zone: "photos", user: "alice", sha256: asset.sha256, index: 2, bytes: asset.chunk(2), storedBytesLimit: nil)
        #expect(try await storage.storedBytes(owner: "alice") == logBytes + size)

        // A push that fits beside the log alone, but not beside the log and the asset.
        let record = try pushed(transaction(replica, 2...2, title: String(repeating: "y", count: 1_000)))
        let refused = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: "photos", user: "alice", replica: replica, transactions: [record], storedBytesLimit: logBytes + 100_000)
        }
        #expect(refused?.code == .quotaExceeded, "\(String(describing: refused))")
        #expect(try await storage.endPosition(zone: "photos") == 1)
        _ = try await storage.append(zone: "photos", user: "alice", replica: replica, transactions: [record], storedBytesLimit: logBytes + size + 100_000)
        #expect(try await storage.endPosition(zone: "photos") == 2)
        try await storage.close()
    }

    @Test("an asset of no bytes is held once its upload begins; an upload begun with a wrong manifest and abandoned is replaced by one begun with the right manifest",
          arguments: backends)
    func emptyAssetAndReplacedManifest(_ backend: StorageBackend) async throws {
        let storage = try await StorageSite(backend).open()
        _ = try await storage.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let empty = try TestAsset(bytes: [])
        #expect(empty.sha256 == Asset.empty.sha256)
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: empty.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        #expect(try await storage.heldAsset(zone: "shared", sha256: empty.sha256) == empty.manifest)
        #expect(try await storage.assetChunk(zone: "shared", sha256: empty.sha256, index: 0) == nil)

        let asset = try TestAsset(seed: 12, byteCount: threeChunks)
        let other = try TestAsset(seed: 13, byteCount: AssetManifest.chunkSize + 10)
        let wrong = try AssetManifest(sha256: asset.sha256, byteCount: other.manifest.byteCount, chunks: other.manifest.chunks)
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: wrong, storedBytesLimit: nil).missing == [0, 1])
        _ = try await storage.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: 0, bytes: other.chunk(0), storedBytesLimit: nil)
        #expect(try await storage.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2])
        try await upload(asset, to: "shared", by: "bob", in: storage)
        #expect(try await storage.assetChunk(zone: "shared", sha256: asset.sha256, index: 0) == asset.chunk(0))
        try await storage.close()
    }

    // MARK: PostgreSQL: instances sharing one database, and its schema

    @Test("two instances storing the same asset at once, chunk for chunk, into one zone and into two zones of one owner, all succeed, and its bytes are stored and counted once")
    func concurrentInstances() async throws {
        let site = try StorageSite(.postgres)
        let first = try await site.open()
        let second = try await site.openAnotherInstance()
        _ = try await first.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        _ = try await first.createZone(name: "one", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        _ = try await first.createZone(name: "two", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let asset = try TestAsset(seed: 14, byteCount: threeChunks)
        let before = try await first.storedBytes(owner: "alice")
        let uploads: [(ZoneID, String)] = [("photos", "alice"), ("one", "bob"), ("two", "bob")]
        let outcomes = try await withThrowingTaskGroup(of: AssetUploadState.self) { group in
            for (zone, user) in uploads {
                for instance in [first, second] {
                    group.addTask {
                        var state = try await instance.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil)
                        for index in 0..<asset.chunkCount {
                            state = try await instance.putAssetChunk(zone: zone, user: user, sha256: asset.sha256, index: index, bytes: asset.chunk(index),
                                                                     storedBytesLimit: 100 * Int64(AssetManifest.chunkSize))
                        }
                        return state
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes == Array(repeating: AssetUploadState(missing: [], complete: true), count: 6))
        for (zone, _) in uploads {
            #expect(try await second.heldAsset(zone: zone, sha256: asset.sha256) == asset.manifest)
            #expect(try await first.assetChunk(zone: zone, sha256: asset.sha256, index: 2) == asset.chunk(2))
        }
        #expect(try await first.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        #expect(try await second.storedBytes(owner: "alice") == before + Int64(asset.bytes.count))
        try await first.close()
        try await second.close()
    }

    @Test("two instances receiving different chunks of one upload at once complete it: the instance that receives the last one sees every other, none is sent twice",
          arguments: 0..<3)
    func chunksSplitAcrossInstances(_ round: Int) async throws {
        let site = try StorageSite(.postgres)
        let first = try await site.open()
        let second = try await site.openAnotherInstance()
        _ = try await first.createZone(name: "shared", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let asset = try TestAsset(seed: 16 + UInt64(round), byteCount: 3 * AssetManifest.chunkSize + 1)
        #expect(try await first.beginAssetUpload(zone: "shared", user: "bob", manifest: asset.manifest, storedBytesLimit: nil).missing == [0, 1, 2, 3])
        // Each instance its half, the last two chunks at the same moment.
        let halves: [(any ZoneStorage, [Int])] = [(first, [0, 2]), (second, [1, 3])]
        let states = try await withThrowingTaskGroup(of: AssetUploadState.self) { group in
            for (instance, indexes) in halves {
                group.addTask {
                    var state = AssetUploadState(missing: [], complete: false)
                    for index in indexes {
                        state = try await instance.putAssetChunk(zone: "shared", user: "bob", sha256: asset.sha256, index: index, bytes: asset.chunk(index),
                                                                 storedBytesLimit: nil)
                    }
                    return state
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(states.contains(AssetUploadState(missing: [], complete: true)), "\(states)")
        #expect(try await second.heldAsset(zone: "shared", sha256: asset.sha256) == asset.manifest)
        try await first.close()
        try await second.close()
    }

    @Test("a database of the previous release (schema version 8) is upgraded in place: its zones, logs and stored bytes are kept, and assets are stored from then on")
    func upgradeFromVersion8() async throws {
        let cluster = try PostgresCluster.shared()
        let site = try StorageSite(.postgres)
        let database = try #require(site.url?.split(separator: "/").last.map(String.init))
        func versions() throws -> String {
            try cluster.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM strata_schema_migrations", database: database)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var storage = try await site.open()
        _ = try await storage.createZone(name: "photos", owner: "alice", access: .private, grants: [:])
        let replica = ReplicaID.random()
        _ = try await storage.append(zone: "photos", user: "alice", replica: replica, transactions: [pushed(transaction(replica, 1...1))], storedBytesLimit: nil)
        let logBytes = try await storage.storedBytes(owner: "alice")
        try await storage.close()
        // What version 8 left: no asset tables.
        _ = try cluster.psql(undoSchemaVersion12 + "DROP TABLE strata_asset_chunks, strata_asset_manifests, strata_asset_links, strata_asset_uploads; DELETE FROM strata_schema_migrations WHERE version >= 9",
                             database: database)
        #expect(try versions() == "1,2,3,4,5,6,7,8")

        storage = try await site.open()
        #expect(try versions() == "1,2,3,4,5,6,7,8,9,10,11,12,13,14")
        #expect(try await storage.endPosition(zone: "photos") == 1)
        #expect(try await storage.storedBytes(owner: "alice") == logBytes)
        let asset = try TestAsset(seed: 15, byteCount: 5000)
        try await upload(asset, to: "photos", by: "alice", in: storage)
        #expect(try await storage.storedBytes(owner: "alice") == logBytes + 5000)
        try await storage.close()
    }

    /// Begins and sends every missing chunk of `asset`, then checks the zone holds it.
    private func upload(_ asset: TestAsset, to zone: ZoneID, by user: String, in storage: any ZoneStorage) async throws {
        var state = try await storage.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil)
        for index in state.missing {
            state = try await storage.putAssetChunk(zone: zone, user: user, sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
        }
        #expect(state == AssetUploadState(missing: [], complete: true))
    }
}
