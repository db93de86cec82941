import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// `diff` compares only the objects the differing events can reach; that must find exactly what
/// comparing every object finds. Random pairs of devices: shared history, then each makes random
/// offline edits (inserts, renames, moves between folders, deletes with cascade, tag adds and
/// removes) and receives a random part of the other's.
@Suite("diff: reachable objects = every object")
struct DiffReachabilityTests {
    static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, default: "")],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
        Entity("Note", attributes: [Attribute("title", .string, default: "")],
               relationships: [Relationship("folder", to: "Folder", inverse: "notes"), Relationship("tags", to: "Tag", toMany: true)])
        Entity("Tag", attributes: [Attribute("label", .string, default: "")])
    }

    @Test("Random divergent pairs: the partial replay finds what a full replay does, byte for byte")
    func randomPairs() async throws {
        let runs = Int(ProcessInfo.processInfo.environment["STRATA_PROPERTY_RUNS"] ?? "") ?? 12
        let base = UInt64(ProcessInfo.processInfo.environment["STRATA_PROPERTY_SEED"] ?? "") ?? 0xD1FF_0001
        var partial = 0
        for run in 0..<runs {
            let seed = base &+ UInt64(run)
            let dir = TemporaryDirectory()
            var g = SeededGenerator(seed: seed)
            let a = try await Store.open(at: dir.sub("a"), schema: Self.schema, options: StoreOptions(durability: .buffered))
            let b = try await Store.open(at: dir.sub("b"), schema: Self.schema, options: StoreOptions(durability: .buffered))
            try await edit(a, count: Int.random(in: 20...60, using: &g), &g)
            _ = try await b.applyRemote(try a.transactions(forSync: true).map(\.transaction))
            let shared = try a.transactions().count
            // A snapshot under either side's history (the partial replay starts from it, and
            // the references it holds count as much as those events make).
            if Bool.random(using: &g) { try await a.compact() }
            if Bool.random(using: &g) { try await b.compact() }
            try await edit(a, count: Int.random(in: 1...12, using: &g), &g)
            try await edit(b, count: Int.random(in: 1...12, using: &g), &g)
            // Each receives a random part of the other's offline transactions.
            let offlineA = try a.transactions(forSync: true).map(\.transaction).filter { $0.replica == a.replicaID }.suffix(from: 0)
            let toB = offlineA.filter { _ in Bool.random(using: &g) }
            let offlineB = try b.transactions(forSync: true).map(\.transaction).filter { $0.replica == b.replicaID }
            let toA = offlineB.filter { _ in Bool.random(using: &g) }
            _ = try await b.applyRemote(Array(toB))
            _ = try await a.applyRemote(toA)
            if Int.random(in: 0..<4, using: &g) == 0 { try await a.compact() }
            try await a.close()
            try await b.close()
            let quick = try StoreDiff.run(dir.sub("a"), dir.sub("b"), progress: nil)
            let full = try StoreDiff.run(dir.sub("a"), dir.sub("b"), full: true, progress: nil)
            func summary(_ diff: StoreDiff) -> [String] {
                diff.objects.map { o in
                    "\(o.object) \(o.existsInA)/\(o.existsInB) " + o.fields.map { "\($0.field)=\(String(describing: $0.a))|\(String(describing: $0.b))" }.joined(separator: ",")
                        + " " + o.members.map { "\($0.relationship):\($0.onlyInA)|\($0.onlyInB)" }.joined(separator: ",")
                }.sorted()
            }
            #expect(summary(quick) == summary(full), "seed \(seed) (shared history \(shared) transactions)")
            #expect(quick.equal == full.equal, "seed \(seed)")
            // Everything else alike too: the events, their blame, the timelines, the digests.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let quickJSON = String(decoding: try encoder.encode(quick), as: UTF8.self)
            let fullJSON = String(decoding: try encoder.encode(full), as: UTF8.self)
            #expect(quickJSON == fullJSON, "seed \(seed): the partial replay's diff differs from the full one's")
            #expect(try quick.json == JSONOutput.string(quick), "seed \(seed): --json joined from its members")
            // How much the second pass replayed.
            let first = try LoadedStore.loadPair(StoreFiles(dir.sub("a")), StoreFiles(dir.sub("b")), replayingOnly: [],
                                                 collectingReferences: true, progress: nil)
            let found = try StoreDiff.findings(first.0.store, first.1.store, digests: (first.0.digests, first.1.digests), limit: 1000, timelineWindow: 200)
            let all = try LoadedStore.load(StoreFiles(dir.sub("a"))).projection.knownObjectIDs().count
            if let replayed = found.replayNeeded(first.0.store, first.1.store), replayed.count < all { partial += 1 }
        }
        // Most runs differ in a few objects of many: the partial replay must have been tried.
        #expect(partial > 0, "no run replayed fewer objects than the store holds")
    }

    @Test("The second pass reads what the first did, though the store was written and compacted in between")
    func secondPassKeepsTheFirstRead() async throws {
        let dir = TemporaryDirectory()
        var g = SeededGenerator(seed: 0x5EC0_0D)
        var store = try await Store.open(at: dir.sub("a"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        try await edit(store, count: 20, &g)
        try await store.close()
        let files = try StoreFiles(dir.sub("a"))
        let first = try LoadedStore.loadPair(files, files, progress: nil)
        let digest = first.0.store.projection.digest()
        let events = first.0.store.projection.eventCount
        // A writer appends and compacts (a snapshot past everything the first pass read).
        store = try await Store.open(at: dir.sub("a"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        try await edit(store, count: 10, &g)
        try await store.compact()
        try await store.close()
        let (again, _) = try LoadedStore.replayPair((first.0.store, first.1.store), replayingOnly: nil, progress: nil)
        #expect(again.base == nil, "the second pass started from a snapshot the first never read")
        #expect(again.projection.eventCount == events)
        #expect(again.projection.digest() == digest)
        #expect(again.index.entries.count == first.0.store.index.entries.count)
    }

    /// `count` random transactions of one to three changes.
    func edit(_ store: Store, count: Int, _ g: inout SeededGenerator) async throws {
        for _ in 0..<count {
            let roll = Int.random(in: 0..<100, using: &g)
            let pick = UInt64.random(in: 0...UInt64.max, using: &g)
            let title = "t\(Int.random(in: 0..<1000, using: &g))"
            try await store.transaction { tx in
                let folders = tx.fetch("Folder").map(\.id)
                let notes = tx.fetch("Note").map(\.id)
                let tags = tx.fetch("Tag").map(\.id)
                func any(_ ids: [ObjectID]) -> ObjectID? { ids.isEmpty ? nil : ids[Int(pick % UInt64(ids.count))] }
                switch roll {
                case ..<15:
                    try tx.insert("Folder", ["name": .string(title)])
                case ..<40:
                    try tx.insert("Note", ["title": .string(title), "folder": any(folders).map(Value.reference) ?? .null])
                case ..<50:
                    try tx.insert("Tag", ["label": .string(title)])
                case ..<65:
                    if let note = any(notes) { try tx.update(note, ["title": .string(title)]) }
                case ..<75:
                    if let note = any(notes), let folder = any(folders.reversed()) { try tx.update(note, ["folder": .reference(folder)]) }
                case ..<83:
                    if let note = any(notes), let tag = any(tags) { try tx.add(note, "tags", tag) }
                case ..<88:
                    if let note = any(notes), let tag = tx.related(note, "tags").first { try tx.remove(note, "tags", tag) }
                case ..<93:
                    if let tag = any(tags) { try tx.delete(tag) }
                case ..<97:
                    if let note = any(notes) { try tx.delete(note) }
                default:
                    if let folder = any(folders) { try tx.delete(folder) }
                }
            }
        }
    }
}
