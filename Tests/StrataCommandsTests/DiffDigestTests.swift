import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// `diff` compares the events both stores hold by digests, so that two events under one ID (a
/// replica written on two devices) are named, not only the objects they left different.
@Suite("diff: events both hold, compared by digests")
struct DiffDigestTests {
    static let schema = DiffReachabilityTests.schema
    static let forked = ReplicaID(rawValue: 0xF0_2CED)

    /// A shared history from a third device, then the same replica ID writing different notes in
    /// A and in B (`compactFirst`: both compact the shared part before).
    func forkedPair(in dir: TemporaryDirectory, compactFirst: Bool) async throws -> (a: String, b: String) {
        var optionsA = StoreOptions(durability: .buffered)
        optionsA.newReplicaID = Self.forked
        let optionsB = optionsA
        let source = try await Store.open(at: dir.sub("source"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        for i in 0..<30 {
            try await source.transaction { tx in _ = try tx.insert("Note", ["title": .string("shared \(i)")]) }
        }
        let shared = try source.transactions(forSync: true).map(\.transaction)
        try await source.close()
        for (path, options, label) in [(dir.sub("a"), optionsA, "A"), (dir.sub("b"), optionsB, "B")] {
            let store = try await Store.open(at: path, schema: Self.schema, options: options)
            _ = try await store.applyRemote(shared)
            if compactFirst { try await store.compact() }
            for i in 0..<3 {
                try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("\(label)'s note \(i)")]) }
            }
            try await store.close()
        }
        return (dir.sub("a"), dir.sub("b"))
    }

    @Test("One replica ID writing on two devices: its events are named, the earliest as the first divergent event",
          arguments: [false, true])
    func forkedReplica(compactFirst: Bool) async throws {
        let dir = TemporaryDirectory()
        let (a, b) = try await forkedPair(in: dir, compactFirst: compactFirst)
        let diff = try StoreDiff.run(a, b, progress: nil)
        #expect(!diff.equal)
        #expect(diff.onlyInACount == 0 && diff.onlyInBCount == 0, "both applied the same IDs")
        let forkedEvents = diff.differingEvents.filter { $0.replica == Self.forked.description }
        #expect(forkedEvents.count == diff.differingEvents.count)
        let sequences = forkedEvents.map(\.sequence)
        // Each store's schema event (sequence 1, stamped at a different time), then the notes.
        #expect(sequences == [1, 2, 3, 4], "named: \(sequences)")
        #expect(forkedEvents.allSatisfy { $0.a != nil && $0.b != nil && $0.a != $0.b })
        #expect(forkedEvents.first?.a?.kind == "schema")
        #expect(forkedEvents.dropFirst().first?.a?.fields?["title"] == .string("A's note 0"))
        #expect(forkedEvents.dropFirst().first?.b?.fields?["title"] == .string("B's note 0"))
        #expect(diff.firstDivergent?.heldBy == "both")
        #expect(diff.firstDivergent?.sequence == sequences.first)
        // The notes each wrote differ (one object per side: different object IDs).
        #expect(diff.objects.count == 6, "objects: \(diff.objects.map(\.object))")
        let comparison = try #require(diff.digestComparison)
        #expect(comparison.compared == 35, "31 events of the shared device and 4 of the forked replica")
        #expect(diff.text.contains("in both with different content: 4"))
    }

    @Test("Equal stores: every event both hold compared, nothing named")
    func equalStores() async throws {
        let dir = TemporaryDirectory()
        let (a, _) = try await forkedPair(in: dir, compactFirst: false)
        let copy = dir.sub("copy")
        try FileManager.default.copyItem(atPath: a, toPath: copy)
        let diff = try StoreDiff.run(a, copy, progress: nil)
        #expect(diff.equal)
        #expect(diff.differingEvents.isEmpty && diff.firstDivergent == nil)
        #expect((diff.digestComparison?.compared ?? 0) >= 33)
    }

    @Test("Local-only attributes (never pushed) make no event differ")
    func localOnlyAttributes() async throws {
        let schema = Schema {
            Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("draft", .string, localOnly: true)])
        }
        let dir = TemporaryDirectory()
        let a = try await Store.open(at: dir.sub("a"), schema: schema, options: StoreOptions(durability: .buffered))
        for i in 0..<10 {
            try await a.transaction { tx in _ = try tx.insert("Note", ["title": .string("n\(i)"), "draft": .string("only here \(i)")]) }
        }
        let b = try await Store.open(at: dir.sub("b"), schema: schema, options: StoreOptions(durability: .buffered))
        _ = try await b.applyRemote(try a.transactions(forSync: true).map(\.transaction))
        _ = try await a.applyRemote(try b.transactions(forSync: true).map(\.transaction))
        try await a.close()
        try await b.close()
        let diff = try StoreDiff.run(dir.sub("a"), dir.sub("b"), progress: nil)
        #expect(diff.differingEvents.isEmpty, "\(diff.differingEvents.map(\.sequence))")
        #expect(diff.equal, "\(diff.text)")
        #expect((diff.digestComparison?.compared ?? 0) == 12, "each store's schema event and A's ten notes")
    }
}
