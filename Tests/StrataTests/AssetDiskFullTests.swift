import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataLog
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A device's asset writes on a full disk (ENOSPC injected through StrataLog's file layer, which
/// the import, the download and the install all write through): a typed error naming the disk's
/// refusal, nothing under the asset's hash that is not the asset (no object, no manifest), and
/// once space returns the store opens, works, and the same import or fetch succeeds.
@Suite("Device assets on a full disk", .serialized)
struct AssetDiskFullTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("photo", .asset)])
    }

    /// Where the disk is full: the whole asset directory, or only its manifests (the bytes are
    /// written, the manifest an object needs is not).
    enum Full: String, CaseIterable, Sendable { case assets, manifests }

    /// `count` bytes of `seed`, differing chunk to chunk.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return UInt8(truncatingIfNeeded: (state &* 0x2545_F491_4F6C_DD1D) >> 56)
        }
    }

    /// A source serving one asset from memory.
    final class OneAsset: AssetSource, Sendable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func assetManifest(for asset: Asset) async throws -> AssetManifest? {
            guard asset.sha256 == AssetHash.of(bytes) else { return nil }
            var hasher = AssetHasher()
            bytes.withUnsafeBytes { hasher.update($0) }
            return hasher.finalize()
        }
        func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
            let start = index * AssetManifest.chunkSize
            return Array(bytes[start..<min(bytes.count, start + AssetManifest.chunkSize)])
        }
    }

    static func isDiskFull(_ error: any Error) -> Bool {
        // A StoreError, as the store's asset calls document (the disk's own error inside).
        (error as? StoreError)?.code == .log && (error as? StoreError)?.logError?.errno == ENOSPC
    }

    /// Neither the asset's object nor its manifest is there, nor an import's temporary file.
    static func expectNothingVisible(_ hash: AssetHash, store directory: String) throws {
        let paths = Store.assetPaths(of: hash, ofStoreAt: directory)
        #expect(!FileManager.default.fileExists(atPath: paths.object), "an object under the asset's hash after the failure")
        #expect(!FileManager.default.fileExists(atPath: paths.manifest), "a manifest under the asset's hash after the failure")
        let temporary = directory + "/assets/tmp"
        let left = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        #expect(left.isEmpty, "imports left behind: \(left)")
    }

    /// The store's copy of the asset hashes to its name.
    static func expectHeld(_ asset: Asset, in store: Store) throws {
        let file = try #require(store.localFile(for: asset))
        #expect(AssetHash.of([UInt8](try Data(contentsOf: file))) == asset.sha256)
    }

    @Test("an import that meets a full disk throws StoreError .log carrying the disk's ENOSPC and leaves nothing under the asset's hash; once space returns the same import succeeds and the store reopens with it",
          arguments: Full.allCases)
    func importOnFullDisk(_ full: Full) async throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("store")
        var store = try await Store.open(at: path, schema: Self.schema)
        let bytes = Self.bytes(2 * AssetManifest.chunkSize + 700, seed: 1)
        let hash = AssetHash.of(bytes)
        let failing = path + "/assets" + (full == .manifests ? "/manifests" : "")
        FaultInjection.failWrites(under: failing, errno: ENOSPC)
        defer { FaultInjection.clear(failing) }
        await #expect { _ = try await store.importAsset(Data(bytes), mediaType: "image/jpeg") } throws: { Self.isDiskFull($0) }
        try Self.expectNothingVisible(hash, store: path)
        FaultInjection.clear(failing)

        let asset = try await store.importAsset(Data(bytes), mediaType: "image/jpeg")
        #expect(asset.sha256 == hash)
        try Self.expectHeld(asset, in: store)
        try await store.close()
        store = try await Store.open(at: path, schema: Self.schema)
        try Self.expectHeld(asset, in: store)
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "with a photo", "photo": .asset(asset)]) }
        try await store.close()
    }

    @Test("a fetch whose install meets a full disk throws StoreError .log carrying the disk's ENOSPC and leaves nothing under the asset's hash; once space returns the same fetch succeeds and the store reopens with it",
          arguments: Full.allCases)
    func fetchOnFullDisk(_ full: Full) async throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("store")
        var store = try await Store.open(at: path, schema: Self.schema)
        let bytes = Self.bytes(2 * AssetManifest.chunkSize + 900, seed: 2)
        let source = OneAsset(bytes)
        store.attach(assetSource: source)
        let asset = try Asset(sha256: AssetHash.of(bytes), byteCount: UInt64(bytes.count), mediaType: "video/mp4")
        let failing = path + "/assets" + (full == .manifests ? "/manifests" : "")
        FaultInjection.failWrites(under: failing, errno: ENOSPC)
        defer { FaultInjection.clear(failing) }
        await #expect { _ = try await store.asset(asset) } throws: { Self.isDiskFull($0) }
        try Self.expectNothingVisible(asset.sha256, store: path)
        #expect(store.localFile(for: asset) == nil)
        FaultInjection.clear(failing)

        let file = try await store.asset(asset)
        #expect(AssetHash.of([UInt8](try Data(contentsOf: file))) == asset.sha256)
        try await store.close()
        store = try await Store.open(at: path, schema: Self.schema)
        try Self.expectHeld(asset, in: store)
        try await store.close()
    }
}
