import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataLog
import StrataTestSupport
import Testing
import StrataCore

/// `strata bundle`: one file with a store's history and state, values replaced by keyed hashes
/// with --redact, that the tools read as they read the store.
@Suite("Debug bundles", .serialized)
struct DebugBundleTests {
    static let schema = Schema {
        Entity("Note", attributes: [
            Attribute("title", .string, default: ""),
            Attribute("count", .integer),
            Attribute("score", .double),
            Attribute("due", .date),
            Attribute("blob", .bytes),
            Attribute("done", .bool, default: false),
        ], relationships: [Relationship("tags", to: "Tag", toMany: true)])
        Entity("Tag", attributes: [Attribute("label", .string, default: "")])
    }

    /// The strings the stores hold (each written once; none is a schema default).
    static func secret(_ label: String, _ i: Int) -> String { "secret-\(label)-value-\(i)" }

    /// A shares a past with B (a third device's notes), then each writes alone: A compacts (a
    /// snapshot to redact) and adopts another device's state (an adopted state to redact).
    func pair(in dir: TemporaryDirectory) async throws -> (a: String, b: String, strings: [String]) {
        var strings: [String] = []
        let source = try await Store.open(at: dir.sub("source"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        for i in 0..<20 {
            strings.append(Self.secret("shared", i))
            try await source.transaction { tx in
                let note = try tx.insert("Note", ["title": .string(Self.secret("shared", i)), "count": .integer(Int64(1000 + i)),
                                                  "score": .double(Double(i) + 0.25), "due": .date(1_700_000_000_000_000 + Int64(i)),
                                                  "blob": .bytes(Data("blob-\(i)".utf8)), "done": .bool(i % 2 == 0)])
                let tag = try tx.insert("Tag", ["label": .string(Self.secret("tag", i))])
                try tx.add(note, "tags", tag)
            }
            strings.append(Self.secret("tag", i))
        }
        let shared = try source.transactions(forSync: true).map(\.transaction)
        try await source.close()
        let other = try await Store.open(at: dir.sub("other"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        try await other.transaction { tx in _ = try tx.insert("Note", ["title": .string(Self.secret("adopted", 0))]) }
        strings.append(Self.secret("adopted", 0))
        strings.append(Self.secret("origin", 0))
        let adoptedState = try other.statePayload()
        try await other.close()
        for label in ["A", "B"] {
            let store = try await Store.open(at: dir.sub(label), schema: Self.schema, options: StoreOptions(durability: .buffered))
            _ = try await store.applyRemote(shared)
            if label == "A" {
                try await store.compact()
                _ = try await store.adoptSnapshot(adoptedState, origin: Self.secret("origin", 0))
                // A shared zone's cursor (its name holds `@` and `%`), and a file of the app's own.
                try Data("{}".utf8).write(to: URL(fileURLWithPath: dir.sub(label) + "/sync-notes@bob%40example.json"))
                try Data(Self.secret("app-file", 0).utf8).write(to: URL(fileURLWithPath: dir.sub(label) + "/app-settings.json"))
            }
            let notes = store.fetch("Note").map(\.id).sorted().prefix(3)
            for (i, note) in notes.enumerated() {
                strings.append(Self.secret(label, i))
                try await store.transaction { tx in try tx.update(note, ["title": .string(Self.secret(label, i)), "count": .integer(Int64(i))]) }
            }
            try await store.close()
        }
        return (dir.sub("A"), dir.sub("B"), strings)
    }

    /// Every byte a bundle holds, decoded: log entries as stored (not LZ4-compressed), snapshot
    /// payloads, adopted states, the JSON files.
    func contents(ofBundle path: String, in dir: TemporaryDirectory) throws -> [UInt8] {
        let unpacked = dir.sub("unpacked-\(UUID().uuidString.prefix(6))")
        try DebugBundle.extract(path, into: unpacked)
        var haystack: [UInt8] = []
        let log = unpacked + "/log"
        _ = try SegmentLog.verify(at: log, progress: nil) { record in
            for entry in record.entries { haystack += entry.payload }
        }
        let identity = try SegmentLog.identity(at: log)
        for info in identity.snapshots { haystack += try SegmentLog.readSnapshot(info, logID: identity.logID).payload }
        let fm = FileManager.default
        for name in try fm.contentsOfDirectory(atPath: unpacked + "/adopted") { haystack += Array(fm.contents(atPath: unpacked + "/adopted/" + name) ?? Data()) }
        for name in try fm.contentsOfDirectory(atPath: unpacked) where name.hasSuffix(".json") { haystack += Array(fm.contents(atPath: unpacked + "/" + name) ?? Data()) }
        return haystack
    }

    /// The log's structure: segment files, records' positions and timestamps, snapshots.
    static func logShape(_ store: String) throws -> [String] {
        let log = store + "/log"
        var lines = try FileManager.default.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(".seg") || $0.hasSuffix(".snap") }.sorted()
        _ = try SegmentLog.verify(at: log, progress: nil) { record in
            lines.append(record.entries.map { "\($0.position)@\($0.timestamp)" }.joined(separator: " "))
        }
        return lines
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let bytes = Array(needle.utf8)
        guard bytes.count <= haystack.count else { return false }
        return haystack.withUnsafeBufferPointer { h in
            (0...(h.count - bytes.count)).contains { start in h[start] == bytes[0] && Array(h[start..<(start + bytes.count)]) == bytes }
        }
    }

    @Test("A redacted bundle holds no value of the store; a plain one holds them all")
    func redactedBundleHoldsNoValue() async throws {
        let dir = TemporaryDirectory()
        let (a, _, strings) = try await pair(in: dir)
        let redaction = try ValueRedaction(key: ValueRedaction.newKey())
        try DebugBundle.write(storeAt: a, to: dir.sub("a.redacted"), redaction: redaction)
        try DebugBundle.write(storeAt: a, to: dir.sub("a.plain"))
        let redacted = try contents(ofBundle: dir.sub("a.redacted"), in: dir)
        let plain = try contents(ofBundle: dir.sub("a.plain"), in: dir)
        let held = strings.filter { Self.contains(plain, $0) }
        // A's own strings, the shared ones, the adopted one and the adoption's origin are all in
        // A (B's are not).
        #expect(held.count == strings.count - 3, "the plain bundle holds \(held.count) of \(strings.count)")
        // An app's own file in the store directory is in neither bundle.
        #expect(!Self.contains(plain, Self.secret("app-file", 0)))
        let unpacked = dir.sub("cursor-check")
        try DebugBundle.extract(dir.sub("a.redacted"), into: unpacked)
        #expect(FileManager.default.fileExists(atPath: unpacked + "/sync-notes@bob%40example.json"), "a shared zone's cursor is bundled and unpacked")
        for value in held { #expect(!Self.contains(redacted, value), "the redacted bundle holds \(value)") }
        // Bytes too; and every type's value is replaced (the same value the same way).
        #expect(Self.contains(plain, "blob-7") && !Self.contains(redacted, "blob-7"))
        let asset = try Asset(sha256: try #require(AssetHash(bytes: [UInt8](repeating: 7, count: 32))), byteCount: 10, mediaType: "image/png", fileName: "holiday.png")
        let values: [Value] = [.string("x"), .integer(42), .double(2.5), .date(1_700_000_000_000_000), .bytes(Data([1, 2, 3])),
                               .uuid(UUID()), .asset(asset)]
        for value in values {
            #expect(redaction.redact(value, field: "f") != value, "\(value) is kept")
            #expect(redaction.redact(value, field: "f") == redaction.redact(value, field: "f"))
        }
        #expect(redaction.redact(.double(0), field: "f") == redaction.redact(.double(-0.0), field: "f"))
        #expect(redaction.redact(.bool(true), field: "f") != redaction.redact(.bool(false), field: "f"))
        #expect(redaction.redact(.reference(ObjectID()), field: "f").referenceValue != nil, "references are structure")
        // Both still hold the structure: the same number of log entries and snapshots.
        let manifestPlain = try DebugBundle.extract(dir.sub("a.plain"), into: dir.sub("m1"))
        let manifestRedacted = try DebugBundle.extract(dir.sub("a.redacted"), into: dir.sub("m2"))
        #expect(manifestPlain.files.map(\.path).filter { $0.hasPrefix("log") } == ["log.pack"] && manifestRedacted.files.map(\.path).filter { $0.hasPrefix("log") } == ["log.pack"])
        #expect(try Self.logShape(dir.sub("m1")) == Self.logShape(dir.sub("m2")) && Self.logShape(dir.sub("m1")) == Self.logShape(a))
        #expect(manifestRedacted.redacted && manifestRedacted.keyID == redaction.keyID && !manifestPlain.redacted)
        #expect(manifestRedacted.files.contains { $0.path.hasPrefix("adopted/") }, "the adopted state is bundled")
    }

    @Test("diff, replay and merge --what-if on redacted bundles find what they find on the stores, up to the redaction")
    func toolsReadBundles() async throws {
        defer { BundleCache.removeAll() }
        let dir = TemporaryDirectory()
        let (a, b, _) = try await pair(in: dir)
        let redaction = try ValueRedaction(key: ValueRedaction.newKey())
        try DebugBundle.write(storeAt: a, to: dir.sub("a.bundle"), redaction: redaction)
        try DebugBundle.write(storeAt: b, to: dir.sub("b.bundle"), redaction: redaction)

        let stores = try StoreDiff.run(a, b, progress: nil)
        let bundles = try StoreDiff.run(dir.sub("a.bundle"), dir.sub("b.bundle"), progress: nil)
        #expect(!stores.equal && !bundles.equal)
        func ids(_ events: [StoreDiff.MissingEvent]) -> [String] { events.map { "\($0.replica):\($0.sequence)" } }
        #expect(ids(stores.onlyInA) == ids(bundles.onlyInA) && ids(stores.onlyInB) == ids(bundles.onlyInB))
        #expect(stores.firstDivergent.map { "\($0.replica):\($0.sequence)" } == bundles.firstDivergent.map { "\($0.replica):\($0.sequence)" })
        #expect(stores.objects.map(\.object) == bundles.objects.map(\.object))
        #expect(stores.objects.map { $0.fields.map(\.field) } == bundles.objects.map { $0.fields.map(\.field) })
        #expect(bundles.a.store == dir.sub("a.bundle"), "the bundle is named as given, not where it was unpacked")

        // Replay: the same objects, every value the redaction of the store's.
        for (store, bundle) in [(a, dir.sub("a.bundle")), (b, dir.sub("b.bundle"))] {
            let original = try LoadedStore.load(try StoreFiles(store)).projection
            let copy = try LoadedStore.load(try StoreFiles(bundle)).projection
            #expect(original.allObjectIDs() == copy.allObjectIDs())
            for id in original.allObjectIDs() {
                guard let object = original.object(id), let redacted = copy.object(id) else { continue }
                #expect(Dictionary(uniqueKeysWithValues: object.values.map { ($0.key, redaction.redact($0.value, field: $0.key)) }) == redacted.values, "\(id)")
                #expect(object.toMany == redacted.toMany)
            }
            #expect(original.provenance(original.allObjectIDs()[0]) == copy.provenance(original.allObjectIDs()[0]), "blame is kept")
        }

        // verify and inspect take a bundle as one store (not a database); verify finds nothing.
        #expect(try !ZoneTargets(dir.sub("a.bundle"), zone: nil).isDatabase)
        let verification = try Verification.run(try StoreFiles(dir.sub("a.bundle"), tolerateDamagedIdentity: true), progress: nil)
        #expect(verification.findings.isEmpty, "\(verification.findings)")

        // merge --what-if: the same decisions.
        let merged = try MergeWhatIf.run(a, b, limit: 100, progress: nil)
        let mergedBundles = try MergeWhatIf.run(dir.sub("a.bundle"), dir.sub("b.bundle"), limit: 100, progress: nil)
        #expect(merged.objects.map(\.object) == mergedBundles.objects.map(\.object))
        #expect(merged.objects.map { $0.fields.map { "\($0.field) \($0.from) \($0.rule)" } } == mergedBundles.objects.map { $0.fields.map { "\($0.field) \($0.from) \($0.rule)" } })
        #expect(merged.fieldsFromA > 0 || merged.fieldsFromB > 0)
    }

    @Test("A damaged or hostile bundle is refused with what and where")
    func damagedBundles() async throws {
        let dir = TemporaryDirectory()
        let (a, _, _) = try await pair(in: dir)
        try DebugBundle.write(storeAt: a, to: dir.sub("good"))
        let good = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.sub("good"))))
        func refused(_ bytes: [UInt8], _ expected: String) {
            let path = dir.sub("bad-\(UUID().uuidString.prefix(6))")
            FileManager.default.createFile(atPath: path, contents: Data(bytes))
            do {
                try DebugBundle.extract(path, into: path + ".out")
                Issue.record("accepted: \(expected)")
            } catch let error as StoreError {
                #expect(error.code == .corruptBundle && error.message.contains(expected), "\(error.message)")
            } catch {
                Issue.record("not a StoreError: \(error)")
            }
        }
        refused(Array("not a bundle at all".utf8), "not a Strata debug bundle")
        var flipped = good
        flipped[flipped.count - 10] ^= 0xFF
        refused(flipped, "fails its checksum")
        refused(Array(good.dropLast(5)), "cut short")
        refused(good + [0], "1 bytes follow the last file")
        var version = good
        version[8] = 9
        refused(version, "format version 9")
        // A manifest that names a path outside the store directory.
        let length = Int(good[12]) | Int(good[13]) << 8 | Int(good[14]) << 16 | Int(good[15]) << 24
        var manifest = String(decoding: good[16..<(16 + length)], as: UTF8.self)
        manifest = manifest.replacingOccurrences(of: "\"path\":\"store.json\"", with: "\"path\":\"..\\/store.json\"")
        let hostile = Array(good[0..<12]) + withUnsafeBytes(of: UInt32(manifest.utf8.count).littleEndian, Array.init) + Array(manifest.utf8) + Array(good[(16 + length)...])
        refused(hostile, "not a file of a store")
        // A packed log that does not unpack, under a manifest whose checksums agree with it: refused
        // naming log.pack and what is wrong in it.
        var parsed = try JSONDecoder().decode(DebugBundle.Manifest.self, from: Data(good[16..<(16 + length)]))
        var bodies: [[UInt8]] = []
        var at = 16 + length
        for file in parsed.files {
            bodies.append(Array(good[at..<(at + Int(file.size))]))
            at += Int(file.size)
        }
        let packIndex = try #require(parsed.files.firstIndex { $0.path == "log.pack" })
        bodies[packIndex] = Array(bodies[packIndex].dropLast(3))
        parsed.files[packIndex].size = UInt64(bodies[packIndex].count)
        let crc = bodies[packIndex].withUnsafeBytes { CRC32C.checksum($0) }
        parsed.files[packIndex].crc32c = String(repeating: "0", count: 8 - String(crc, radix: 16).count) + String(crc, radix: 16)
        let json = Array(try JSONEncoder().encode(parsed))
        let cut = Array(good[0..<12]) + withUnsafeBytes(of: UInt32(json.count).littleEndian, Array.init) + json + bodies.flatMap { $0 }
        refused(cut, "log.pack")
        refused(cut, "follow the header")
        #expect(!FileManager.default.fileExists(atPath: dir.sub("store.json")))
        // The tools say so too (exit 2), not a crash, and leave nothing unpacked behind.
        FileManager.default.createFile(atPath: dir.sub("hostile"), contents: Data(hostile))
        let before = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("strata-bundle-") }
        do {
            _ = try StoreFiles(dir.sub("hostile"))
            Issue.record("the tools read a hostile bundle")
        } catch let error as CLIError {
            #expect(error.exitCode == ExitStatus.usageOrIO && error.message.contains("not a file of a store"), "\(error.message)")
        }
        let after = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("strata-bundle-") }
        #expect(Set(after).subtracting(before).isEmpty, "an unpacked directory was left behind")
        // A bundle is written to a file, never over a directory (the store itself, say).
        #expect(throws: StoreError.self) { try DebugBundle.write(storeAt: a, to: a) }
        #expect(FileManager.default.fileExists(atPath: a + "/store.json"))
    }
}
