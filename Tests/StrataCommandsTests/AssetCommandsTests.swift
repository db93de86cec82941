import ArgumentParser
import Foundation
import Logging
import Strata
@testable import StrataCommands
import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// The `strata` executable on stores with assets: `apply` attaching a file, `get`/`export`
/// showing references, `inspect` counting them, `verify` checking the files (and `--repair`
/// setting a damaged one aside), `asset get` writing the bytes — from the store, or fetched from
/// a log server on a real port.
@Suite("strata and assets: attach, show, count, verify, repair, get")
struct AssetCommandsTests: NoteStoreCLI {
    static let assetSchema = #"{"entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string", "default": ""}, {"name": "photo", "type": "asset"}]}]}"#

    /// A store of notes with a `photo` asset attribute, made with `strata init`.
    func makeAssetStore(_ dir: TemporaryDirectory, _ name: String) async throws -> String {
        let schemaFile = dir.sub("asset-schema.json")
        if !FileManager.default.fileExists(atPath: schemaFile) {
            try Data(Self.assetSchema.utf8).write(to: URL(fileURLWithPath: schemaFile))
        }
        let store = dir.sub(name)
        let created = try await strata(["init", store, "--schema", schemaFile])
        #expect(created.status == 0, "\(created.stderr)")
        return store
    }

    /// `count` pseudo-random bytes, the same for the same seed.
    func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Writes `bytes` to `path`.
    func write(_ bytes: [UInt8], to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// `strata apply` of one note whose photo is the file at `path`: the note's ID.
    func attach(_ store: String, title: String, file path: String, mediaType: String? = "image/jpeg") async throws -> String {
        let type = mediaType.map { #", "mediaType": "\#($0)""# } ?? ""
        let line = #"{"op": "insert", "entity": "Note", "values": {"title": "\#(title)", "photo": {"file": "\#(path)"\#(type)}}}"#
        let applied = try await strata(["apply", store, "-", "--json"], input: line)
        #expect(applied.status == 0, "\(applied.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(applied.stdout.utf8)) as? [String: Any])
        return try #require((json["inserted"] as? [String])?.first)
    }

    /// A JSON object's members as sorted `key=value` lines (comparable whatever their number types).
    func fields(_ object: [String: Any]) -> [String] { object.map { "\($0.key)=\($0.value)" }.sorted() }

    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not one JSON object: \(text)")
    }

    @Test("apply attaches a file (copied into the store by its hash), and get and export show the reference as its JSON object")
    func applyAttachesAFile() async throws {
        let dir = TemporaryDirectory()
        let store = try await makeAssetStore(dir, "phone")
        let original = bytes(AssetManifest.chunkSize + 4_321, seed: 1)
        try write(original, to: dir.sub("beach.jpg"))
        let id = try await attach(store, title: "beach", file: dir.sub("beach.jpg"))
        let hash = AssetHash.of(original)
        let expected: [String: Any] = ["sha256": hash.hex, "size": original.count, "mediaType": "image/jpeg", "fileName": "beach.jpg"]

        let got = try await strata(["get", store, "Note", id, "--json"])
        #expect(got.status == 0, "\(got.stderr)")
        let photo = try #require((try json(got.stdout)["values"] as? [String: Any])?["photo"] as? [String: Any])
        #expect(fields(photo) == fields(expected))

        let exported = try await strata(["export", store])
        let objects = try #require(try json(exported.stdout)["objects"] as? [[String: Any]])
        let exportedPhoto = try #require((objects.first?["values"] as? [String: Any])?["photo"] as? [String: Any])
        #expect(fields(exportedPhoto) == fields(expected))

        // The store holds the bytes under their hash.
        let held = try Data(contentsOf: URL(fileURLWithPath: store + "/assets/objects/" + hash.hex))
        #expect([UInt8](held) == original)

        // The media type is guessed from the extension when left out; an attachment to an
        // attribute that is not an asset is refused by line and field, with nothing committed.
        try write([1, 2, 3], to: dir.sub("tiny.png"))
        let second = try await attach(store, title: "tiny", file: dir.sub("tiny.png"), mediaType: nil)
        let tiny = try await strata(["get", store, "Note", second, "--json"])
        #expect(((try json(tiny.stdout)["values"] as? [String: Any])?["photo"] as? [String: Any])?["mediaType"] as? String == "image/png")
        let wrong = try await strata(["apply", store, "-"], input: #"{"op": "insert", "entity": "Note", "values": {"title": {"file": "\#(dir.sub("tiny.png"))"}}}"#)
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("stdin:1, field \"values.title\""), "\(wrong.stderr)")
        let missing = try await strata(["apply", store, "-"], input: #"{"op": "insert", "entity": "Note", "values": {"photo": {"file": "\#(dir.sub("nowhere.jpg"))"}}}"#)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("cannot read the file"), "\(missing.stderr)")
    }

    @Test("inspect counts the assets held, those only referenced (remote-only), partial downloads and pins")
    func inspectCounts() async throws {
        let dir = TemporaryDirectory()
        let store = try await makeAssetStore(dir, "laptop")
        let held = bytes(3_000, seed: 2)
        try write(held, to: dir.sub("held.bin"))
        _ = try await attach(store, title: "held", file: dir.sub("held.bin"))
        // A reference to bytes the store never had (what a pull brings): remote-only.
        let remote = bytes(2 * AssetManifest.chunkSize + 10, seed: 3)
        let remoteHash = AssetHash.of(remote)
        let line = #"{"op": "insert", "entity": "Note", "values": {"title": "remote", "photo": {"sha256": "\#(remoteHash.hex)", "size": \#(remote.count), "mediaType": "video/mp4"}}}"#
        let applied = try await strata(["apply", store, "-"], input: line)
        #expect(applied.status == 0, "\(applied.stderr)")
        // A download of it under way: chunks 0 and 2 written (2 of its 3 chunks), as the store writes them.
        let partial = store + "/assets/partial/" + remoteHash.hex
        try FileManager.default.createDirectory(atPath: store + "/assets/partial", withIntermediateDirectories: true)
        var data = [UInt8](repeating: 0, count: remote.count)
        data.replaceSubrange(0..<AssetManifest.chunkSize, with: remote[0..<AssetManifest.chunkSize])
        data.replaceSubrange((2 * AssetManifest.chunkSize)..., with: remote[(2 * AssetManifest.chunkSize)...])
        try write(data, to: partial + ".data")
        try write([0, 0, 0, 0, 2, 0, 0, 0], to: partial + ".chunks")

        // Pinned for offline use (the marker the store's pin leaves).
        try FileManager.default.createDirectory(atPath: store + "/assets/pins", withIntermediateDirectories: true)
        try write([], to: store + "/assets/pins/" + AssetHash.of(held).hex)

        let inspected = try await strata(["inspect", store, "--json"])
        #expect(inspected.status == 0, "\(inspected.stderr)")
        let assets = try #require(try json(inspected.stdout)["assets"] as? [String: Any], "\(inspected.stdout)")
        func tally(_ key: String) -> [Int] {
            guard let t = assets[key] as? [String: Any] else { return [] }
            return [(t["count"] as? NSNumber)?.intValue ?? -1, (t["bytes"] as? NSNumber)?.intValue ?? -1]
        }
        #expect(tally("held") == [1, held.count])
        #expect(tally("remoteOnly") == [1, remote.count])
        #expect(tally("referenced") == [2, held.count + remote.count])
        #expect(tally("partial") == [1, AssetManifest.chunkSize + 10])
        #expect(tally("pinned") == [1, held.count])
        #expect(tally("notUploaded") == [1, held.count])

        let text = try await strata(["inspect", store])
        #expect(text.stdout.contains("assets    2 referenced, held 1 (2.9 KiB), remote-only 1 (2.0 MiB), partial 1 (1.0 MiB fetched), pinned 1 (2.9 KiB), not uploaded 1 (2.9 KiB)"), "\(text.stdout)")
    }

    @Test("verify hashes every asset file: a corrupted one is an error naming its path (exit 1); --repair sets it aside in quarantine/ and the store verifies")
    func verifyFindsAndRepairsACorruptedAsset() async throws {
        let dir = TemporaryDirectory()
        let store = try await makeAssetStore(dir, "phone")
        let original = bytes(2 * AssetManifest.chunkSize + 77, seed: 4)
        try write(original, to: dir.sub("video.mp4"))
        _ = try await attach(store, title: "video", file: dir.sub("video.mp4"))
        let hash = AssetHash.of(original)
        let objectPath = store + "/assets/objects/" + hash.hex

        let healthy = try await strata(["verify", store])
        #expect(healthy.status == 0, "\(healthy.stdout) \(healthy.stderr)")
        #expect(healthy.stdout.contains("assets: 1 file(s) verified"), "\(healthy.stdout)")

        // One flipped byte in the second chunk.
        var damaged = original
        damaged[AssetManifest.chunkSize + 5] ^= 0xFF
        try write(damaged, to: objectPath)
        let found = try await strata(["verify", store, "--json"])
        #expect(found.status == 1)
        let findings = try #require((try json(found.stdout)["assets"] as? [String: Any])?["findings"] as? [[String: Any]])
        let finding = try #require(findings.first { $0["kind"] as? String == "damagedObject" }, "\(findings)")
        #expect(finding["severity"] as? String == "error")
        #expect(finding["file"] as? String == objectPath)
        #expect((finding["message"] as? String)?.contains("chunk(s) 1 of 3 differ from the manifest") == true, "\(finding)")

        let repaired = try await strata(["verify", store, "--repair", "--yes"])
        #expect(repaired.status == 0, "\(repaired.stdout) \(repaired.stderr)")
        #expect(repaired.stdout.contains("set aside the damaged asset \(hash.hex)"), "\(repaired.stdout)")
        #expect(!FileManager.default.fileExists(atPath: objectPath))
        let quarantined = try FileManager.default.subpathsOfDirectory(atPath: store + "/quarantine").filter { $0.hasSuffix("assets/objects/" + hash.hex) }
        #expect(quarantined.count == 1, "nothing a repair removes is deleted")
        // The sync cursors are left alone (assets are not in the log); the reference is now
        // remote-only, fetched again when needed: not an error.
        let after = try await strata(["verify", store, "--json"])
        #expect(after.status == 0, "\(after.stdout)")
        let infos = try #require((try json(after.stdout)["assets"] as? [String: Any])?["findings"] as? [[String: Any]])
        #expect(infos.map { $0["kind"] as? String } == ["remoteOnly"])
        #expect(infos.first?["severity"] as? String == "info")
    }

    @Test("verify finds a damaged manifest of a file that verifies; --repair writes it again from the file")
    func verifyRepairsAManifest() async throws {
        let dir = TemporaryDirectory()
        let store = try await makeAssetStore(dir, "phone")
        let original = bytes(AssetManifest.chunkSize + 1, seed: 5)
        try write(original, to: dir.sub("a.bin"))
        _ = try await attach(store, title: "a", file: dir.sub("a.bin"))
        let manifestPath = store + "/assets/manifests/" + AssetHash.of(original).hex
        let good = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        var bad = [UInt8](good)
        bad[bad.count - 1] ^= 1  // the last chunk's hash
        try write(bad, to: manifestPath)
        let found = try await strata(["verify", store])
        #expect(found.status == 1)
        #expect(found.stdout.contains("does not match the verified file's chunks"), "\(found.stdout)")
        let repaired = try await strata(["verify", store, "--repair", "--yes"])
        #expect(repaired.status == 0, "\(repaired.stdout) \(repaired.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath)) == good)
    }

    @Test("asset get writes the exact bytes (stdout, --output); a store lacking them fetches them from a log server on a real port through a sync engine")
    func assetGet() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            let phone = try await makeAssetStore(dir, "phone")
            let text = (0..<40_000).map { "line \($0)\n" }.joined()
            try write(Array(text.utf8), to: dir.sub("notes.txt"))
            let original = bytes(2 * AssetManifest.chunkSize + 999, seed: 6)
            try write(original, to: dir.sub("photo.jpg"))
            _ = try await attach(phone, title: "text", file: dir.sub("notes.txt"))
            _ = try await attach(phone, title: "photo", file: dir.sub("photo.jpg"))
            let textHash = AssetHash.of(Array(text.utf8)).hex
            let photoHash = AssetHash.of(original).hex

            // Held: stdout and --output, the store only read.
            let out = try await strata(["asset", "get", phone, textHash])
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stdout == text)
            let written = try await strata(["asset", "get", phone, photoHash, "--output", dir.sub("copy.jpg")])
            #expect(written.status == 0, "\(written.stderr)")
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.sub("copy.jpg")))) == original)

            let sync = ["--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret"]
            let pushed = try await strata(["sync", phone] + sync)
            #expect(pushed.status == 0, "\(pushed.stderr)")
            let laptop = try await makeAssetStore(dir, "laptop")
            let pulled = try await strata(["sync", laptop] + sync)
            #expect(pulled.status == 0, "\(pulled.stderr)")

            // Not held, no server given: unavailable (exit 1), nothing written.
            let unavailable = try await strata(["asset", "get", laptop, photoHash, "--output", dir.sub("fetched.jpg")])
            #expect(unavailable.status == 1)
            #expect(unavailable.stderr.contains("assetUnavailable"), "\(unavailable.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir.sub("fetched.jpg")))
            // A hash no object names cannot be fetched either.
            let unknown = try await strata(["asset", "get", laptop, String(repeating: "ab", count: 32)] + sync)
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("none of its objects names it"), "\(unknown.stderr)")

            let fetched = try await strata(["asset", "get", laptop, photoHash, "--output", dir.sub("fetched.jpg")] + sync)
            #expect(fetched.status == 0, "\(fetched.stderr)")
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.sub("fetched.jpg")))) == original)
            // The store keeps what it fetched: the next get needs no server.
            let listed = try await strata(["asset", "list", laptop, "--json"])
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
            #expect(Set(rows.compactMap { row in (row["sha256"] as? String).map { "\($0) \(row["state"] as? String ?? "")" } })
                    == ["\(photoHash) local", "\(textHash) remote"])
        }
    }

    @Test("inspect, verify and asset get read a store another process has open for writing (an app holding it), and change nothing")
    func readsAStoreOpenElsewhere() async throws {
        let dir = TemporaryDirectory()
        let path = try await makeAssetStore(dir, "phone")
        let app = try Store.open(at: path)
        let original = bytes(AssetManifest.chunkSize * 2 + 3, seed: 7)
        let photo = try await app.importAsset(Data(original), mediaType: "image/heic", fileName: "IMG_0001.HEIC")
        try await app.transaction { tx in _ = try tx.insert("Note", ["title": "open", "photo": .asset(photo)]) }
        let before = try FileManager.default.subpathsOfDirectory(atPath: path).sorted()

        let inspected = try await strata(["inspect", path, "--json"])
        #expect(inspected.status == 0, "\(inspected.stderr)")
        let held = try #require((try json(inspected.stdout)["assets"] as? [String: Any])?["held"] as? [String: Any])
        #expect((held["count"] as? NSNumber)?.intValue == 1)
        let verified = try await strata(["verify", path])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        let got = try await strata(["asset", "get", path, photo.sha256.hex, "-o", dir.sub("copy.heic")])
        #expect(got.status == 0, "\(got.stderr)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.sub("copy.heic")))) == original)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: path).sorted() == before)
        try await app.close()
    }

    @Test("asset get refuses by usage error (exit 2): a hash that is not 64 hex digits, --server without --zone, --zone without --server")
    func assetGetUsage() async throws {
        let hash = String(repeating: "0f", count: 32)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["asset", "get", "s", "0F" + hash.dropFirst(2)]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["asset", "get", "s", hash, "--server", "http://localhost:1"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["asset", "get", "s", hash, "--zone", "notes"]) }
        #expect(try StrataCLI.parseAsRoot(["asset", "get", "s", hash, "--server", "http://localhost:1", "--zone", "notes"]) is AssetGetCommand)
        let bad = try await strata(["asset", "get", "s", "xyz"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("not an asset hash"), "\(bad.stderr)")
    }

    /// Runs `body` with a log server on a free port of 127.0.0.1 (the user alice, token `alice-secret`).
    func withServer(_ directory: String, _ body: (URL) async throws -> Void) async throws {
        try await withLogServer(directory, users: try UserDirectory(tokens: ["alice": "alice-secret"])) { url, _ in try await body(url) }
    }
}
