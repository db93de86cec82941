import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCore
import StrataTestSupport
import Synchronization
import Testing

@Suite("The asset cache: a budget, pins, and collection of what nothing names")
struct AssetCacheTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("photo", .asset)])
    }

    /// `count` bytes of one repeated value.
    static func bytes(_ count: Int, _ value: UInt8) -> [UInt8] { [UInt8](repeating: value, count: count) }

    /// A source serving whole assets from memory.
    final class MemorySource: AssetSource, @unchecked Sendable {
        let assets: [AssetHash: [UInt8]]
        let fetches = Mutex(0)
        init(_ contents: [[UInt8]]) {
            var assets: [AssetHash: [UInt8]] = [:]
            for bytes in contents { assets[AssetHash.of(bytes)] = bytes }
            self.assets = assets
        }
        func assetManifest(for asset: Asset) async throws -> AssetManifest? {
            guard let bytes = assets[asset.sha256] else { return nil }
            var hasher = AssetHasher()
            bytes.withUnsafeBytes { hasher.update($0) }
            return hasher.finalize()
        }
        func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
            fetches.withLock { $0 += 1 }
            let bytes = assets[asset.sha256] ?? []
            let start = index * AssetManifest.chunkSize
            return Array(bytes[start..<min(bytes.count, start + AssetManifest.chunkSize)])
        }
    }

    @Test("Fetched assets beyond the budget leave least recently used first; pinned and not-yet-uploaded ones stay and do not count against it; a fetch after eviction downloads again")
    func budgetEviction() async throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        // Room for one fetched photo of 100,000 bytes: the pinned one and the imported one
        // (300,000 bytes between them) count for nothing.
        options.assetCacheBudget = 150_000
        let store = try await Store.open(at: dir.path, schema: Self.schema, options: options)
        // Imported here and never uploaded: it stays whatever the budget.
        let mine = try await store.importAsset(Data(Self.bytes(200_000, 9)), mediaType: "image/jpeg")
        let contents = (1...4).map { Self.bytes(100_000, UInt8($0)) }
        let source = MemorySource(contents)
        store.attach(assetSource: source)
        let remote = try contents.map { try Asset(sha256: AssetHash.of($0), byteCount: 100_000, mediaType: "image/jpeg") }

        _ = try await store.pin(remote[0])
        try await Task.sleep(for: .milliseconds(20))
        _ = try await store.asset(remote[1])
        // One fetched photo fits, whatever the pinned and imported ones take.
        #expect(try await store.trimAssetCache() == 0)
        #expect(store.localFile(for: remote[1]) != nil, "a pinned photo pushed the fetched one out")
        try await Task.sleep(for: .milliseconds(20))
        _ = try await store.asset(remote[2])
        // Over budget: remote[1] (least recently used, not pinned) left; remote[2] (just
        // fetched), remote[0] (pinned) and mine (not uploaded) stayed.
        #expect(store.localFile(for: mine) != nil && store.localFile(for: remote[0]) != nil && store.localFile(for: remote[2]) != nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/assets/objects/" + remote[1].sha256.hex))
        let usage = try store.assetCacheUsage()
        #expect(usage.pinned == 1 && usage.notUploaded == 1 && usage.assets == 3)

        // Fetched again when asked for; remote[2] is the least recently used now and goes.
        let before = source.fetches.withLock { $0 }
        let again = try await store.asset(remote[1])
        #expect(try Array(Data(contentsOf: again)) == contents[1])
        #expect(source.fetches.withLock { $0 } == before + 1)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/assets/objects/" + remote[2].sha256.hex))

        // Once uploaded (as a sync engine records it), an imported asset may leave too.
        store.markAssetUploaded(mine.sha256)
        try await store.unpin(remote[0])
        store.assetCacheBudget = 100_000
        let after = try store.assetCacheUsage()
        #expect(after.pinned == 0 && after.notUploaded == 0 && after.bytes <= 100_000, "\(after)")
        try await store.close()
    }

    @Test("After compaction an asset nothing names any more is removed once its grace has passed; one a retained transaction, a snapshot or a pin names stays")
    func collectionAfterCompaction() async throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        options.assetCollectionGrace = .zero
        options.retainsUnpushed = false
        options.segmentSize = 4096  // rollovers, so that compactions retire the segments naming `first`
        let store = try await Store.open(at: dir.path, schema: Self.schema, options: options)
        let first = try await store.importAsset(Data(Self.bytes(1_000, 1)), mediaType: "image/png")
        let second = try await store.importAsset(Data(Self.bytes(1_000, 2)), mediaType: "image/png")
        let pinned = try await store.importAsset(Data(Self.bytes(1_000, 3)), mediaType: "image/png")
        let unused = try await store.importAsset(Data(Self.bytes(1_000, 4)), mediaType: "image/png")
        _ = try await store.pin(pinned)
        let id = try await store.transaction { tx in try tx.insert("Note", ["photo": .asset(first)]) }
        try await store.transaction { tx in try tx.update(id, ["photo": .asset(second)]) }
        try await Task.sleep(for: .milliseconds(20))

        // The log still holds the transaction that named `first`: it stays; `unused` goes.
        var collected = try await store.collectUnreferencedAssets(grace: .zero)
        #expect(collected.removed == 1 && store.localFile(for: unused) == nil)
        #expect(store.localFile(for: first) != nil && store.localFile(for: pinned) != nil)

        // Compactions over more history retire the transaction that named `first`.
        for round in 0..<3 {
            for i in 0..<20 { try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("filler \(round) \(i) " + String(repeating: "x", count: 200))]) } }
            try await store.compact()
        }
        #expect(store.localFile(for: first) == nil)
        #expect(store.localFile(for: second) != nil && store.localFile(for: pinned) != nil)

        // Deleting the note that names `second` frees it once the delete is older than the grace
        // (and the history naming it is retired).
        try await store.transaction { tx in try tx.delete(id) }
        try await Task.sleep(for: .milliseconds(20))
        for round in 0..<3 {
            for i in 0..<20 { try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("after the delete \(round) \(i) " + String(repeating: "y", count: 200))]) } }
            try await store.compact()
        }
        #expect(store.localFile(for: second) == nil, "the deleted note's photo was kept")
        #expect(store.localFile(for: pinned) != nil)

        // With a grace period, a recent import stays even though nothing names it yet.
        let fresh = try await store.importAsset(Data(Self.bytes(1_000, 5)), mediaType: "image/png")
        collected = try await store.collectUnreferencedAssets(grace: .seconds(3600))
        #expect(collected.removed == 0 && store.localFile(for: fresh) != nil)
        try await store.close()
    }
}
