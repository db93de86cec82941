import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
@testable import StrataSync
import StrataTestSupport
import Synchronization
import Testing

let photoSchema = Schema {
    Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("photo", .asset), Attribute("thumbnail", .asset)])
}

/// Bytes of `count` that compress a little (so chunks travel both ways: some LZ4, some raw).
func assetBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var generator = SeededGenerator(seed: seed)
    var bytes = [UInt8](repeating: 0, count: count)
    for i in 0..<count { bytes[i] = i % 3 == 0 ? UInt8(i % 7) : UInt8.random(in: 0...255, using: &generator) }
    return bytes
}

/// An asset source that counts the chunks it fetches, and fails after `failAfter` of them.
final class CountingSource: AssetSource, @unchecked Sendable {
    let inner: any AssetSource
    let fetched = Mutex<[Int]>([])
    let failAfter: Int?
    init(_ inner: any AssetSource, failAfter: Int? = nil) {
        self.inner = inner
        self.failAfter = failAfter
    }
    func assetManifest(for asset: Asset) async throws -> AssetManifest? { try await inner.assetManifest(for: asset) }
    func assetChunk(_ index: Int, of asset: Asset) async throws -> [UInt8] {
        let count = fetched.withLock { $0.append(index); return $0.count }
        if let failAfter, count > failAfter { throw SyncError(.transport, "the connection dropped (test)") }
        return try await inner.assetChunk(index, of: asset)
    }
}

@Suite("Assets end to end: uploaded before their transactions, fetched on demand, readable only through a zone that holds them")
struct AssetsEndToEndTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    @Test("A photo attached on one device reaches the server before its note; another device fetches it on demand, byte for byte, once", arguments: ServerBackend.allCases)
    func attachAndFetchOnDemand(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, storage in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let original = assetBytes(2 * AssetManifest.chunkSize + 12_345, seed: 1)
            let photo = try await phone.importAsset(Data(original), mediaType: "image/jpeg", fileName: "beach.jpg")
            #expect(photo.byteCount == UInt64(original.count) && photo.sha256 == AssetHash.of(original))
            let thumbnail = try await phone.importAsset(Data(assetBytes(20_000, seed: 2)), mediaType: "image/png")
            let id = try await phone.transaction { tx in try tx.insert("Note", ["title": "beach", "photo": .asset(photo), "thumbnail": .asset(thumbnail)]) }
            try await SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret").sync()
            let held = try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "notes"), sha256: photo.sha256)
            #expect(held?.chunks.count == 3)

            // The laptop pulls the note: the reference, not the bytes.
            let laptop = try await Store.open(at: dir.sub("laptop"), schema: photoSchema)
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await laptopEngine.sync()
            #expect(laptop.object(id)?["photo"] == .asset(photo))
            #expect(laptop.localFile(for: photo) == nil)
            #expect(laptop.digest() == phone.digest())

            // Fetched when asked, with progress, through the engine; two askers share one fetch.
            let counting = CountingSource(laptopEngine)
            laptop.detach(assetSource: laptopEngine)
            laptop.attach(assetSource: counting)
            let reports = Mutex<[UInt64]>([])
            async let first = laptop.asset(photo) { progress in reports.withLock { $0.append(progress.completedBytes) } }
            async let second = laptop.asset(photo)
            let (a, b) = try await (first, second)
            #expect(a == b)
            #expect(try Array(Data(contentsOf: a)) == original)
            #expect(counting.fetched.withLock { $0 } == [0, 1, 2])
            #expect(reports.withLock { $0.last } == UInt64(original.count))
            // Held now: no second fetch.
            _ = try await laptop.asset(photo)
            #expect(counting.fetched.withLock { $0.count } == 3)
            #expect(laptop.localFile(for: photo) == a)
            try await laptop.close()
            try await phone.close()
        }
    }

    @Test("A device with a cache budget keeps its pinned photo and the newest fetched, lets older fetched ones go, and fetches one again from the server when asked", arguments: ServerBackend.allCases)
    func cacheBudgetEndToEnd(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            var photos: [Asset] = []
            var contents: [[UInt8]] = []
            for seed in [20, 22, 24, 26] {  // distinct odd states (SeededGenerator sets the low bit)
                let bytes = assetBytes(300_000, seed: UInt64(seed))
                contents.append(bytes)
                photos.append(try await phone.importAsset(Data(bytes), mediaType: "image/jpeg"))
            }
            try await phone.transaction { tx in for photo in photos { _ = try tx.insert("Note", ["photo": .asset(photo)]) } }
            try await SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret").sync()
            // Uploaded: the phone may let them go now too.
            #expect(try phone.assetCacheUsage().notUploaded == 0)

            var options = StoreOptions()
            options.assetCacheBudget = 700_000
            let tablet = try await Store.open(at: dir.sub("tablet"), schema: photoSchema, options: options)
            let engine = try SyncEngine(store: tablet, server: url, zone: "notes", credentials: "alice-secret")
            try await engine.sync()
            try await tablet.pin(photos[0])
            for photo in photos.dropFirst() {
                _ = try await tablet.asset(photo)
                try await Task.sleep(for: .milliseconds(20))
            }
            // 4 × 300 KB under a 700 KB budget: the pinned one and the newest stay.
            #expect(tablet.localFile(for: photos[0]) != nil && tablet.localFile(for: photos[3]) != nil)
            #expect(tablet.localFile(for: photos[1]) == nil)
            #expect(try tablet.assetCacheUsage().bytes <= 700_000 + 300_000)  // the pinned one may exceed it
            let again = try await tablet.asset(photos[1])
            #expect(try Array(Data(contentsOf: again)) == contents[1])
            try await tablet.close()
            try await phone.close()
        }
    }

    @Test("An asset is stored once per owner: the owner's second zone and second object send no byte, a grantee must send the bytes to name it", arguments: ServerBackend.allCases)
    func dedupAndPossession(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, storage in
            let alice = try await Store.open(at: dir.sub("alice"), schema: photoSchema)
            let bytes = assetBytes(AssetManifest.chunkSize + 10, seed: 3)
            let photo = try await alice.importAsset(Data(bytes), mediaType: "image/jpeg")
            try await alice.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(photo)]) }
            try await SyncEngine(store: alice, server: url, zone: "private", credentials: "alice-secret").sync()

            // Her second zone: the manifest alone, nothing missing.
            let aliceHTTP = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await aliceHTTP.ensureZone(ZoneReference("second"), create: true)
            _ = try await aliceHTTP.ensureZone(ZoneReference("shared"), create: true)
            let used = try await storage.storedBytes(owner: "alice")
            let manifest = try #require(try alice.localManifest(for: photo.sha256))
            let again = try await aliceHTTP.beginAssetUpload(zone: ZoneReference("second"), manifest: manifest)
            #expect(again == AssetUploadAnswer(missing: [], complete: true))
            #expect(try await storage.storedBytes(owner: "alice") == used)
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "second"), sha256: photo.sha256) == manifest)
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "shared"), sha256: photo.sha256) == nil)
            try await aliceHTTP.setAccess("shared", #"{"access": "shared", "grants": {"bob": "readWrite", "carol": "read"}}"#)

            // Bob, a writer of "shared", names the asset of her private zone by its hash: refused.
            let bob = try await Store.open(at: dir.sub("bob"), schema: photoSchema)
            let guessed = try Asset(sha256: photo.sha256, byteCount: photo.byteCount, mediaType: "image/jpeg")
            let other = try await bob.importAsset(Data(assetBytes(5_000, seed: 4)), mediaType: "image/png")
            try await bob.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(guessed), "thumbnail": .asset(other)]) }
            let bobsEngine = try SyncEngine(store: bob, server: url, zone: "shared", owner: "alice", credentials: "bob-secret")
            let refusal = await #expect(throws: SyncError.self) { try await bobsEngine.sync() }
            #expect(refusal?.code == .assetMissing)
            #expect(refusal?.message.contains(photo.sha256.hex) == true)
            // A state he uploads naming it (as a device healing the zone would) is refused alike.
            let bobHTTPState = HTTPSyncTransport(server: url, bearer: "bob-secret")
            let stateRefusal = await #expect(throws: SyncError.self) {
                _ = try await bobHTTPState.uploadState(zone: ZoneReference("shared", owner: "alice"), state: try bob.statePayload(), replica: nil, claim: 0, after: nil)
            }
            #expect(stateRefusal?.code == .assetMissing)
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "shared"), sha256: photo.sha256) == nil)
            // Uploading into "shared", bob must send every chunk: what alice holds elsewhere is
            // not his to learn.
            let bobHTTP = HTTPSyncTransport(server: url, bearer: "bob-secret")
            let bobsUpload = try await bobHTTP.beginAssetUpload(zone: ZoneReference("shared", owner: "alice"), manifest: manifest)
            #expect(bobsUpload == AssetUploadAnswer(missing: [0, 1], complete: false))
            // Once he holds the bytes, his push goes through.
            _ = try await bob.importAsset(Data(bytes), mediaType: "image/jpeg")
            try await bobsEngine.sync()
            // Stored once for alice, whoever uploaded it to which of her zones.
            #expect(try await storage.storedBytes(owner: "alice") > used)  // bob's 5,000-byte thumbnail
            #expect(try await storage.storedBytes(owner: "alice") < used + Int64(bytes.count))
            try await bob.close()
            try await alice.close()
        }
    }

    @Test("A reader without access to a zone holding an asset gets the same answer as for a hash nobody holds", arguments: ServerBackend.allCases)
    func noExistenceOracle(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let alice = try await Store.open(at: dir.sub("alice"), schema: photoSchema)
            let secret = try await alice.importAsset(Data(assetBytes(3_000, seed: 5)), mediaType: "application/pdf")
            try await alice.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(secret)]) }
            try await SyncEngine(store: alice, server: url, zone: "private", credentials: "alice-secret").sync()
            let aliceHTTP = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await aliceHTTP.ensureZone(ZoneReference("open"), create: true)
            try await aliceHTTP.setAccess("open", #"{"access": "public"}"#)

            let carol = HTTPSyncTransport(server: url, bearer: "carol-secret")
            let nobodys = AssetHash.of(Array("nobody has this".utf8))
            for hash in [secret.sha256, nobodys] {
                // Through a zone she can read that does not hold it: absent.
                #expect(try await carol.assetManifest(zone: ZoneReference("open", owner: "alice"), asset: hash) == nil)
                let chunk = await #expect(throws: SyncError.self) { _ = try await carol.assetChunk(zone: ZoneReference("open", owner: "alice"), asset: hash, index: 0) }
                #expect(chunk?.code == .assetNotFound && chunk?.status == 404)
                // Through the zone that holds it, which she cannot read: the zone is absent.
                let zone = await #expect(throws: SyncError.self) { _ = try await carol.assetManifest(zone: ZoneReference("private", owner: "alice"), asset: hash) }
                #expect(zone?.code == .zoneNotFound && zone?.status == 404)
            }
            // Alice reads it through the zone that holds it.
            #expect(try await aliceHTTP.assetManifest(zone: ZoneReference("private"), asset: secret.sha256)?.byteCount == 3_000)
            try await alice.close()
        }
    }

    @Test("An upload resumes at the first chunk the server lacks, and a fetch at the first chunk the device lacks")
    func resumption() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let bytes = assetBytes(4 * AssetManifest.chunkSize + 99, seed: 6)
            let video = try await phone.importAsset(Data(bytes), mediaType: "video/mp4")
            let manifest = try #require(try phone.localManifest(for: video.sha256))
            let http = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await http.ensureZone(ZoneReference("notes"), create: true)
            // An upload cut after two chunks (a kill, a dropped connection)…
            #expect(try await http.beginAssetUpload(zone: ZoneReference("notes"), manifest: manifest).missing == [0, 1, 2, 3, 4])
            for index in [0, 1] { _ = try await http.putAssetChunk(zone: ZoneReference("notes"), asset: video.sha256, index: index, bytes: try await phone.localChunk(index, of: manifest)) }
            // …is resumed by the next one where it stopped.
            #expect(try await http.beginAssetUpload(zone: ZoneReference("notes"), manifest: manifest).missing == [2, 3, 4])
            try await phone.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(video)]) }
            try await SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret").sync()

            let laptop = try await Store.open(at: dir.sub("laptop"), schema: photoSchema)
            let engine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await engine.sync()
            laptop.detach(assetSource: engine)
            let dropping = CountingSource(engine, failAfter: 3)
            laptop.attach(assetSource: dropping)
            await #expect(throws: SyncError.self) { _ = try await laptop.asset(video) }
            #expect(laptop.localFile(for: video) == nil)
            laptop.detach(assetSource: dropping)
            let resuming = CountingSource(engine)
            laptop.attach(assetSource: resuming)
            let file = try await laptop.asset(video)
            #expect(resuming.fetched.withLock { $0 } == [3, 4])
            #expect(try Array(Data(contentsOf: file)) == bytes)
            try await laptop.close()
            try await phone.close()
        }
    }

    @Test("A zone that lost an asset the engine uploaded (a server restored without its asset files) gets it uploaded again on the next push")
    func reuploadAfterLoss() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, storage in
            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let bytes = assetBytes(AssetManifest.chunkSize + 1, seed: 8)
            let photo = try await phone.importAsset(Data(bytes), mediaType: "image/jpeg")
            let engine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["photo": .asset(photo)]) }
            try await engine.sync()
            try FileManager.default.removeItem(atPath: dir.sub("server/assets"))
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "notes"), sha256: photo.sha256) == nil)
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "again", "photo": .asset(photo)]) }
            try await engine.sync()
            #expect(try await storage.heldAsset(zone: ZoneID(owner: "alice", name: "notes"), sha256: photo.sha256) != nil)
            try await phone.close()
        }
    }

    @Test("A transaction naming an asset nobody can upload stays pending and the sync says assetMissing, yet the device still receives the others' edits")
    func unuploadableAssetDoesNotBlockPulls() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let laptop = try await Store.open(at: dir.sub("laptop"), schema: photoSchema)
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await laptop.transaction { tx in _ = try tx.insert("Note", ["title": "from the laptop"]) }
            try await laptopEngine.sync()

            let phone = try await Store.open(at: dir.sub("phone"), schema: photoSchema)
            let engine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret")
            // A reference to bytes this store never had (made by hand, or copied from elsewhere).
            let stray = try Asset(sha256: AssetHash.of(Array("never imported".utf8)), byteCount: 14, mediaType: "image/png")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "with a stray photo", "photo": .asset(stray)]) }
            let refusal = await #expect(throws: SyncError.self) { try await engine.sync() }
            #expect(refusal?.code == .assetMissing)
            #expect(phone.fetch("Note").contains { $0["title"] == "from the laptop" }, "the pull did not run")
            #expect(await engine.currentStatus.pending == 1)
            try await phone.close()
            try await laptop.close()
        }
    }

    @Test("Bad chunks are refused with typed errors and nothing of them is kept: wrong hash, wrong length, oversized, undecodable LZ4, a manifest that lies")
    func badInput() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, storage in
            let http = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let zone = ZoneReference("notes")
            _ = try await http.ensureZone(zone, create: true)
            let bytes = assetBytes(AssetManifest.chunkSize + 500, seed: 7)
            var hasher = AssetHasher()
            bytes.withUnsafeBytes { hasher.update($0) }
            let finished = hasher.finalize()
            let manifest = try #require(finished)
            _ = try await http.beginAssetUpload(zone: zone, manifest: manifest)
            let before = try await storage.storedBytes(owner: "alice")

            func refused(_ index: Int, _ body: [UInt8], headers: [(String, String)] = []) async throws -> SyncError? {
                do {
                    _ = try await http.send(HTTPExchangeRequest(method: "PUT", url: http.url(zone, StrataEndpoint.assetChunk(manifest.sha256.hex, index)),
                                                                headers: headers, body: body))
                    return nil
                } catch let error as SyncError { return error }
            }
            // Chunk 1's bytes as chunk 0 (the right length for neither), chunk 0 with a byte flipped.
            #expect(try await refused(0, Array(bytes[AssetManifest.chunkSize...]))?.code == .assetMismatch)
            var flipped = Array(bytes[..<AssetManifest.chunkSize])
            flipped[77] ^= 1
            #expect(try await refused(0, flipped)?.code == .assetMismatch)
            #expect(try await refused(0, [UInt8](repeating: 1, count: AssetManifest.chunkSize + 1))?.code == .tooLarge)
            #expect(try await refused(1, [1, 2, 3, 4], headers: [(StrataHeader.chunkEncoding, "lz4"), (StrataHeader.chunkLength, "500")])?.code == .assetMismatch)
            #expect(try await refused(5, [1])?.code == .badRequest)
            #expect(try await storage.storedBytes(owner: "alice") == before)
            #expect(try await http.beginAssetUpload(zone: zone, manifest: manifest).missing == [0, 1])

            // A manifest whose chunks are right but whose asset hash is another's.
            let lie = try AssetManifest(sha256: AssetHash.of([9, 9, 9]), byteCount: manifest.byteCount, chunks: manifest.chunks)
            _ = try await http.beginAssetUpload(zone: zone, manifest: lie)
            _ = try await http.putAssetChunk(zone: zone, asset: lie.sha256, index: 0, bytes: Array(bytes[..<AssetManifest.chunkSize]))
            let last = await #expect(throws: SyncError.self) {
                _ = try await http.putAssetChunk(zone: zone, asset: lie.sha256, index: 1, bytes: Array(bytes[AssetManifest.chunkSize...]))
            }
            #expect(last?.code == .assetMismatch)
            #expect(try await http.assetManifest(zone: zone, asset: lie.sha256) == nil)
            // A manifest that does not add up, and one above the server's limit.
            let short = AssetManifestBody(manifest)
            var broken = short
            broken.chunks.removeLast()
            let badManifest = await #expect(throws: SyncError.self) {
                _ = try await http.send(HTTPExchangeRequest(method: "PUT", url: http.url(zone, StrataEndpoint.asset(manifest.sha256.hex)),
                                                            body: Array(try JSONEncoder().encode(broken))))
            }
            #expect(badManifest?.code == .badRequest)
        }
    }
}
