import Testing
@testable import Strata
@testable import StrataCore

/// Found by the fuzz target fuzz-snapshot (Tools/Fuzz): a snapshot payload whose table of names
/// or of replicas repeats an entry trapped the process decoding it — a store opening a damaged
/// snapshot, or the server checking an uploaded state.
@Suite("Snapshot payloads that repeat a name or a replica")
struct SnapshotPayloadDamageTests {
    /// The empty projection's payload with its name table replaced by `names` and its replica
    /// table by `replicas` (both tables follow the version byte, each a count and its entries;
    /// the empty projection has none).
    static func payload(names: [String], replicas: [[UInt8]]) throws -> [UInt8] {
        let empty = ProjectionBuilder().snapshotPayload()
        try #require(empty.count > 3 && empty[1] == 0 && empty[2] == 0)
        var bytes = [empty[0], UInt8(names.count)]
        for name in names { bytes += [UInt8(name.utf8.count)] + Array(name.utf8) }
        bytes.append(UInt8(replicas.count))
        for replica in replicas { bytes += replica }
        return bytes + empty[3...]
    }

    @Test("A payload whose tables hold distinct entries decodes")
    func distinctEntriesDecode() throws {
        let bytes = try Self.payload(names: ["Note", "title"], replicas: [Array(repeating: 1, count: 16), Array(repeating: 2, count: 16)])
        _ = try ProjectionBuilder(snapshot: bytes)
    }

    @Test("A payload that repeats a name is refused as a corrupt snapshot naming the name")
    func repeatedName() throws {
        let bytes = try Self.payload(names: ["Note", "Note"], replicas: [])
        let error = try #require(throws: StoreError.self) { try ProjectionBuilder(snapshot: bytes) }
        #expect(error.code == .corruptSnapshot)
        #expect(error.message.contains("repeated name \"Note\""))
    }

    @Test("Names that decode to the same text (invalid UTF-8 becomes U+FFFD) count as repeated")
    func namesEqualAfterDecoding() throws {
        let empty = ProjectionBuilder().snapshotPayload()
        // Two different byte strings, 0xFF and 0xFE, that both decode to "\u{FFFD}".
        let bytes = [empty[0], 2, 1, 0xFF, 1, 0xFE, 0] + empty[3...]
        let error = try #require(throws: StoreError.self) { try ProjectionBuilder(snapshot: Array(bytes)) }
        #expect(error.code == .corruptSnapshot)
    }

    @Test("A payload that repeats a replica is refused as a corrupt snapshot")
    func repeatedReplica() throws {
        let bytes = try Self.payload(names: [], replicas: [Array(repeating: 7, count: 16), Array(repeating: 7, count: 16)])
        let error = try #require(throws: StoreError.self) { try ProjectionBuilder(snapshot: bytes) }
        #expect(error.code == .corruptSnapshot)
        #expect(error.message.contains("repeated replica"))
    }
}
