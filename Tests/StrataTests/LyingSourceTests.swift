import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataCore
import StrataTestSupport

/// A source whose manifest lies: its chunks are another file's, each matching the manifest's
/// chunk hashes, so that only the whole asset's hash tells.
final class LyingSource: AssetSource, Sendable {
    let manifest: AssetManifest
    let bytes: [UInt8]
    init(manifest: AssetManifest, bytes: [UInt8]) { self.manifest = manifest; self.bytes = bytes }
    func assetManifest(for asset: Asset) async throws -> AssetManifest? { manifest }
    func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
        let start = index * AssetManifest.chunkSize
        return Array(bytes[start..<min(bytes.count, start + AssetManifest.chunkSize)])
    }
}

@Suite("Fetching from a source whose manifest lies")
struct LyingSourceTests {
    @Test("a manifest whose chunks match but whose whole does not is refused corruptAsset, and leaves nothing under the asset's hash — neither object nor manifest nor partial download")
    func lyingManifestLeavesNothing() async throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("store")
        let store = try await Store.open(at: path, schema: Schema.empty)
        var generator = SeededGenerator(seed: 77)
        let decoy = (0..<(AssetManifest.chunkSize + 10)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let claimed = AssetHash.of(Array("the asset the note names".utf8))
        var hasher = AssetHasher()
        decoy.withUnsafeBytes { hasher.update($0) }
        let finished = hasher.finalize()
        let honest = try #require(finished)
        let lie = try AssetManifest(sha256: claimed, byteCount: honest.byteCount, chunks: honest.chunks)
        let source = LyingSource(manifest: lie, bytes: decoy)
        store.attach(assetSource: source)
        let asset = try Asset(sha256: claimed, byteCount: honest.byteCount, mediaType: "image/jpeg")
        await #expect { _ = try await store.asset(asset) } throws: { ($0 as? StoreError)?.code == .corruptAsset }
        let paths = Store.assetPaths(of: claimed, ofStoreAt: path)
        #expect(!FileManager.default.fileExists(atPath: paths.object))
        #expect(!FileManager.default.fileExists(atPath: paths.manifest), "the lying manifest stayed")
        let partial = (try? FileManager.default.contentsOfDirectory(atPath: path + "/assets/partial")) ?? []
        #expect(partial.isEmpty, "\(partial)")
        store.detach(assetSource: source)
        try await store.close()
    }
}
