import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// `strata verify` and the read paths on forked stores and damaged identities.
@Suite("Verify: store identity and forks")
struct ForkVerifyTests {
    let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: "")],
               relationships: [Relationship("tags", to: "Tag", toMany: true, inverse: "notes")])
        Entity("Tag", attributes: [Attribute("label", .string, default: "")],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "tags")])
    }

    /// A store with history, a snapshot taken before the fork, a fork, and commits after it.
    func forkedStore(_ dir: TemporaryDirectory) async throws -> (path: String, digest: String) {
        let path = dir.sub("s")
        let store = try await Store.open(at: path, schema: schema, options: StoreOptions(durability: .buffered))
        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "n"]) }
        var tags: [ObjectID] = []
        for label in ["a", "b", "c"] {
            tags.append(try await store.transaction { tx in try tx.insert("Tag", ["label": .string(label)]) })
            try await store.transaction { tx in try tx.add(note, "tags", tags[tags.count - 1]) }
        }
        try await store.compact()  // a snapshot that counts transactions the fork abandons
        try await store.transaction { tx in try tx.remove(note, "tags", tags[0]) }
        try await store.transaction { tx in try tx.update(note, ["title": "renamed"]) }
        try await store.fork(keepingThrough: 3)
        try await store.transaction { tx in _ = try tx.insert("Tag", ["label": "after"]) }
        let digest = store.digest()
        try await store.close()
        return (path, digest)
    }

    @Test("verify of a forked store reports no problem, and the read paths honor the lineage")
    func forkedStoreVerifies() async throws {
        let dir = TemporaryDirectory()
        let (path, digest) = try await forkedStore(dir)
        let files = try StoreFiles(path)
        #expect(files.storeIdentity?.lineage.count == 1)
        let verification = try Verification.run(files, progress: nil)
        #expect(verification.healthy, "\(verification.text)")
        #expect(verification.snapshots.contains { $0.status.hasPrefix("predates a fork") })
        let loaded = try LoadedStore.load(files)
        #expect(loaded.projection.digest() == digest)
        let earliest = try LoadedStore.load(files, start: .earliest)
        #expect(earliest.projection.digest() == digest)
    }

    @Test("verify reports a damaged store.json as a finding naming the file")
    func damagedIdentity() async throws {
        let dir = TemporaryDirectory()
        let (path, _) = try await forkedStore(dir)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path + "/store.json")))
        bytes[12] ^= 0x04
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/store.json"))
        #expect(throws: CLIError.self) { try StoreFiles(path) }
        let files = try StoreFiles(path, tolerateDamagedIdentity: true)
        let verification = try Verification.run(files, progress: nil)
        #expect(!verification.healthy)
        #expect(verification.findings.first?.file == path + "/store.json")
        #expect(verification.findings.first?.message.contains("damaged") == true)
    }

    @Test("verify reports a store.json that names another log")
    func mismatchingLog() async throws {
        let dir = TemporaryDirectory()
        let a = try await Store.open(at: dir.sub("a"), schema: schema)
        let b = try await Store.open(at: dir.sub("b"), schema: schema)
        try await a.close()
        try await b.close()
        try FileManager.default.removeItem(atPath: dir.sub("a") + "/log")
        try FileManager.default.copyItem(atPath: dir.sub("b") + "/log", toPath: dir.sub("a") + "/log")
        let verification = try Verification.run(try StoreFiles(dir.sub("a"), tolerateDamagedIdentity: true), progress: nil)
        #expect(!verification.healthy)
        #expect(verification.findings.contains { $0.file == dir.sub("a") + "/store.json" && $0.message.contains("names log") })
    }
}
