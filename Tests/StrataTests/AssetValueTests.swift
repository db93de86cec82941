import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCore
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

@Suite("Asset values: their encoding, their bounds, and the store's asset directory")
struct AssetValueTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("photo", .asset)])
    }

    struct Note: StrataModel {
        static let entityName = "Note"
        var id: ObjectID
        var title: String
        var photo: Asset?
    }

    @Test("An asset value encodes as the format article says, byte for byte: tag 10, the hash, the size, the media type, the file name")
    func goldenEncoding() throws {
        let hash = try #require(AssetHash(hex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"))
        let asset = try Asset(sha256: hash, byteCount: 300, mediaType: "image/png", fileName: "a.png")
        var w = ByteWriter()
        EventCodec.writeValue(.asset(asset), into: &w)
        let expected: [UInt8] = [10] + Array(0...31) + [0xAC, 0x02] + [9] + Array("image/png".utf8) + [5] + Array("a.png".utf8)
        #expect(w.bytes == expected)
        var none = ByteWriter()
        EventCodec.writeValue(.asset(try Asset(sha256: hash, byteCount: 0, mediaType: "a/b")), into: &none)
        #expect(none.bytes == [10] + Array(0...31) + [0, 3] + Array("a/b".utf8) + [0])
        let back = try expected.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            return try EventCodec.readValue(&r, position: 7)
        }
        #expect(back == .asset(asset))
    }

    @Test("A decoder refuses an asset value that is truncated or out of bounds, naming the byte offset")
    func decoderRefusesBadValues() throws {
        let hash = Array(repeating: UInt8(7), count: 32)
        var tooBig = ByteWriter()
        tooBig.u8(10)
        tooBig.raw(hash)
        tooBig.varint(Asset.maxByteCount + 1)
        tooBig.lengthPrefixed(Array("a/b".utf8))
        tooBig.lengthPrefixed([UInt8]())
        var badType = ByteWriter()
        badType.u8(10)
        badType.raw(hash)
        badType.varint(5)
        badType.lengthPrefixed(Array("no slash".utf8))
        badType.lengthPrefixed([UInt8]())
        var slashName = ByteWriter()
        slashName.u8(10)
        slashName.raw(hash)
        slashName.varint(5)
        slashName.lengthPrefixed(Array("a/b".utf8))
        slashName.lengthPrefixed(Array("../etc".utf8))
        for bytes in [tooBig.bytes, badType.bytes, slashName.bytes, Array(tooBig.bytes.prefix(20))] {
            let error = #expect(throws: StoreError.self) {
                _ = try bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw)
                    return try EventCodec.readValue(&r, position: 3)
                }
            }
            #expect(error?.code == .corruptEvent)
            #expect(error?.message.contains("at byte") == true)
        }
        #expect(throws: StoreError.self) { _ = try Asset(sha256: AssetHash.of([1]), byteCount: 1, mediaType: "text/plain; charset=utf-8") }
        #expect(throws: StoreError.self) { _ = try Asset(sha256: AssetHash.of([1]), byteCount: 1, mediaType: "image/png", fileName: "") }
    }

    @Test("A model's Asset property round-trips through a transaction, a reopen (replay) and a snapshot; a wrong value type is refused")
    func modelRoundTrip() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.path, schema: Self.schema)
        let photo = try await store.importAsset(Data("not really a photo".utf8), mediaType: "image/jpeg", fileName: "cat.jpg")
        let id = ObjectID()
        try await store.transaction { tx in try tx.insert(Note(id: id, title: "cat", photo: photo)) }
        let typeError = await #expect(throws: StoreError.self) {
            try await store.transaction { tx in _ = try tx.insert("Note", ["photo": .string("cat.jpg")]) }
        }
        #expect(typeError?.code == .typeMismatch)
        #expect(try store.fetch(Note.self).first?.photo == photo)
        try await store.compact()
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "after the snapshot"]) }
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: Self.schema)
        #expect(reopened.openReport.snapshot != nil)
        #expect(try reopened.fetch(Note.self).first { $0.id == id }?.photo == photo)
        #expect(reopened.digest() == digest)
        let file = try #require(reopened.localFile(for: photo))
        #expect(try Data(contentsOf: file) == Data("not really a photo".utf8))
        try await reopened.close()
    }

    @Test("Importing a file streams it into the asset directory: the same hash as the bytes, a manifest of 1 MiB chunks, stored once however often imported")
    func importStreamsAndDedups() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.sub("store"), schema: Self.schema)
        var bytes = [UInt8](repeating: 0, count: 3 * AssetManifest.chunkSize + 17)
        var generator = SeededGenerator(seed: 11)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &generator) }
        let source = dir.sub("video.mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let asset = try await store.importAsset(contentsOf: URL(fileURLWithPath: source), mediaType: "video/mp4", fileName: "video.mp4")
        #expect(asset.sha256 == AssetHash.of(bytes) && asset.byteCount == UInt64(bytes.count))
        let manifest = try #require(try store.localManifest(for: asset.sha256))
        #expect(manifest.chunks.count == 4)
        #expect(manifest.chunks[3] == AssetHash.of(bytes[(3 * AssetManifest.chunkSize)...]))
        let again = try await store.importAsset(Data(bytes), mediaType: "video/mp4")
        #expect(again.sha256 == asset.sha256)
        let objects = try FileManager.default.contentsOfDirectory(atPath: dir.sub("store/assets/objects"))
        #expect(objects == [asset.sha256.hex])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.sub("store/assets/tmp")).isEmpty)
        // The empty asset is held by every store without an import.
        #expect(store.localFile(for: .empty).map { (try? Data(contentsOf: $0))?.count } == 0)
        await #expect(throws: StoreError.self) {
            _ = try await store.importAsset(contentsOf: URL(fileURLWithPath: dir.sub("missing")), mediaType: "image/png")
        }
        try await store.close()
    }

    @Test("A fetch that gets wrong bytes keeps nothing of them; one whose source lies about the manifest fails with corruptAsset; without a source the asset is unavailable")
    func fetchVerifies() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.path, schema: Self.schema)
        let bytes = [UInt8](repeating: 42, count: AssetManifest.chunkSize + 5)
        var hasher = AssetHasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        let finished = hasher.finalize()
        let manifest = try #require(finished)
        let asset = try Asset(sha256: manifest.sha256, byteCount: manifest.byteCount, mediaType: "application/octet-stream")
        let unavailable = await #expect(throws: StoreError.self) { _ = try await store.asset(asset) }
        #expect(unavailable?.code == .assetUnavailable)

        // A source whose chunk 1 is damaged: refused, nothing installed; the good chunk stays.
        let damaged = FixedSource(manifest: manifest, bytes: bytes, damage: 1)
        store.attach(assetSource: damaged)
        let refused = await #expect(throws: StoreError.self) { _ = try await store.asset(asset) }
        #expect(refused?.code == .corruptAsset)
        #expect(store.localFile(for: asset) == nil)
        store.detach(assetSource: damaged)
        // A good source then sends only chunk 1.
        let good = FixedSource(manifest: manifest, bytes: bytes, damage: nil)
        store.attach(assetSource: good)
        let file = try await store.asset(asset)
        #expect(good.served.withLock { $0 } == [1])
        #expect(try Array(Data(contentsOf: file)) == bytes)
        store.detach(assetSource: good)

        // A manifest whose chunks are those of other bytes of the same length.
        let other = [UInt8](repeating: 43, count: bytes.count)
        var otherHasher = AssetHasher()
        other.withUnsafeBytes { otherHasher.update($0) }
        let otherFinished = otherHasher.finalize()
        let otherManifest = try #require(otherFinished)
        let lying = try AssetManifest(sha256: AssetHash.of([1, 2, 3]), byteCount: otherManifest.byteCount, chunks: otherManifest.chunks)
        let claimed = try Asset(sha256: lying.sha256, byteCount: lying.byteCount, mediaType: "application/octet-stream")
        let liar = FixedSource(manifest: lying, bytes: other, damage: nil)
        store.attach(assetSource: liar)
        let lie = await #expect(throws: StoreError.self) { _ = try await store.asset(claimed) }
        #expect(lie?.code == .corruptAsset)
        #expect(store.localFile(for: claimed) == nil)
        try await store.close()
    }
}

/// A source serving `bytes` under `manifest`, with chunk `damage` flipped.
final class FixedSource: AssetSource, @unchecked Sendable {
    let manifest: AssetManifest
    let bytes: [UInt8]
    let damage: Int?
    let served = Mutex<[Int]>([])
    init(manifest: AssetManifest, bytes: [UInt8], damage: Int?) {
        self.manifest = manifest
        self.bytes = bytes
        self.damage = damage
    }
    func assetManifest(for asset: Asset) async throws -> AssetManifest? { asset.sha256 == manifest.sha256 ? manifest : nil }
    func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
        served.withLock { $0.append(index) }
        let start = Int(manifest.chunkOffset(index))
        var chunk = Array(bytes[start..<start + manifest.chunkLength(index)])
        if index == damage { chunk[0] ^= 0xFF }
        return chunk
    }
}
