import Foundation
import Strata
import StrataCore
import StrataLog
import StrataTestSupport
import Testing

/// The debug bundle's formats are forever: the golden bundles of `Fixtures/bundle-v1` (format 1,
/// the log's files as they are) and `Fixtures/bundle-v2` (format 2, the log packed) still read,
/// read as the same store, and the writer still writes format 2 byte for byte.
@Suite("Debug bundle formats")
struct BundleFormatTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/Fixtures"
    /// The bundles pinned, by name: the store each was made of, and whether it is redacted (with
    /// `Fixtures/bundle-v1/fixture.key`).
    static let bundles: [(name: String, store: String, redacted: Bool)] = [
        ("device-a.redacted", "divergent/device-a", true),
        ("device-b.redacted", "divergent/device-b", true),
        ("device-b.plain", "divergent/device-b", false),
        ("device-d.redacted", "adopted/device-d", true),
    ]

    static func redaction() throws -> ValueRedaction {
        let text = try String(contentsOfFile: fixtures + "/bundle-v1/fixture.key", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return try ValueRedaction(key: try #require(Hex.decode(text)))
    }

    /// What the tools read of an unpacked bundle: the log's segments, records (positions,
    /// timestamps, entries), snapshots, and every other file.
    static func dump(_ directory: String) throws -> [String] {
        let fm = FileManager.default
        let log = directory + "/log"
        var lines = try fm.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(".seg") }.sorted()
        _ = try SegmentLog.verify(at: log, progress: nil) { record in
            lines.append("record " + record.entries.map { "\($0.position)@\($0.timestamp):\(Hex.encode($0.payload))" }.joined(separator: " "))
        }
        let identity = try SegmentLog.identity(at: log)
        lines.append("log \(identity.logID)")
        for info in identity.snapshots { lines.append("snapshot \(info.position) \(Hex.encode(try SegmentLog.readSnapshot(info, logID: identity.logID).payload))") }
        for name in try fm.contentsOfDirectory(atPath: directory).sorted() where name.hasSuffix(".json") {
            lines.append("\(name) \(Hex.encode(Array(fm.contents(atPath: directory + "/" + name) ?? Data())))")
        }
        for name in ((try? fm.contentsOfDirectory(atPath: directory + "/adopted")) ?? []).sorted() {
            lines.append("adopted/\(name) \(Hex.encode(Array(fm.contents(atPath: directory + "/adopted/" + name) ?? Data())))")
        }
        return lines
    }

    static func expectSame(_ a: [String], _ b: [String], _ label: String) {
        #expect(a.count == b.count, "\(label): \(a.count) lines against \(b.count)")
        for (x, y) in zip(a, b) where x != y {
            Issue.record("\(label): \(x.prefix(160)) against \(y.prefix(160))")
            return
        }
    }

    @Test("A format-1 bundle and a format-2 bundle of one store unpack to the same store")
    func formatsReadAlike() throws {
        let dir = TemporaryDirectory()
        for bundle in Self.bundles {
            let v1 = try DebugBundle.extract(Self.fixtures + "/bundle-v1/\(bundle.name).strata-bundle", into: dir.sub("\(bundle.name).v1"))
            let v2 = try DebugBundle.extract(Self.fixtures + "/bundle-v2/\(bundle.name).strata-bundle", into: dir.sub("\(bundle.name).v2"))
            #expect(v1.format == 1 && v2.format == 2 && v1.redacted == bundle.redacted && v2.redacted == bundle.redacted)
            #expect(v1.files.contains { $0.path.hasPrefix("log/") } && v2.files.contains { $0.path == "log.pack" } && !v2.files.contains { $0.path.hasPrefix("log/") })
            Self.expectSame(try Self.dump(dir.sub("\(bundle.name).v1")), try Self.dump(dir.sub("\(bundle.name).v2")), bundle.name)
        }
    }

    @Test("The writer still writes the golden format-2 bundles byte for byte (but the time in the manifest)")
    func writerIsStable() throws {
        let dir = TemporaryDirectory()
        let redaction = try Self.redaction()
        for bundle in Self.bundles {
            let path = dir.sub(bundle.name)
            try DebugBundle.write(storeAt: Self.fixtures + "/" + bundle.store, to: path, redaction: bundle.redacted ? redaction : nil)
            let fresh = try Self.split(path)
            let golden = try Self.split(Self.fixtures + "/bundle-v2/\(bundle.name).strata-bundle")
            #expect(fresh.manifest.files == golden.manifest.files, "\(bundle.name)")
            #expect(fresh.manifest.store == golden.manifest.store && fresh.manifest.keyID == golden.manifest.keyID && fresh.manifest.format == 2)
            #expect(fresh.body == golden.body, "\(bundle.name): the files differ from the golden bundle's")
        }
    }

    /// A bundle's manifest and the bytes after it.
    static func split(_ path: String) throws -> (manifest: DebugBundle.Manifest, body: [UInt8]) {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let length = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
        let manifest = try JSONDecoder().decode(DebugBundle.Manifest.self, from: Data(bytes[16..<(16 + length)]))
        return (manifest, Array(bytes[(16 + length)...]))
    }
}
