import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// A merge preview (`Store.previewMerge(with:)`, `strata merge --what-if`) promises the state two
/// stores will hold once they have synced with each other. These tests hold it to that promise
/// against a real sync through a real server, for random pairs of devices that diverged.
@Suite("What-if merges equal a real sync")
struct MergePreviewSyncTests {
    static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, default: "")])
        Entity("Note", attributes: [
            Attribute("title", .string, default: ""),
            Attribute("body", .string),
            Attribute("rank", .integer),
            Attribute("draft", .string, localOnly: true),
        ], relationships: [
            Relationship("folder", to: "Folder"),
            Relationship("tags", to: "Tag", toMany: true),
        ])
        Entity("Tag", attributes: [Attribute("label", .string, default: "")])
    }

    /// How a pair's clocks run: both frozen at one instant make their stamps tie (the replica ID
    /// breaks the tie), one behind by an hour loses every concurrent write to the other.
    enum Clocks: CaseIterable { case real, frozenTogether, bBehind, aBehind }

    /// A device's clock, moved by the test (frozen) or following the wall clock with an offset.
    final class DeviceClock: Sendable {
        let offset: Int64
        let frozen: UInt64?
        init(offset: Int64 = 0, frozen: UInt64? = nil) {
            self.offset = offset
            self.frozen = frozen
        }
        func now() -> UInt64 { frozen ?? UInt64(Int64(HybridClock.wallMilliseconds()) + offset) }
    }

    static let pairs = 500
    /// How often each rule decided something, over all pairs: the run must have met each.
    static let reasons = Mutex<[MergePreview.Reason: Int]>([:])

    @Test("For 500 random pairs, the preview's state is what both devices hold after syncing with each other, and it says which side each value came from",
          .timeLimit(.minutes(10)))
    func previewEqualsSync() async throws {
        let dir = TemporaryDirectory()
        let base: UInt64 = UInt64(ProcessInfo.processInfo.environment["STRATA_MERGE_SEED"].flatMap(UInt64.init) ?? 0x5EED_0000)
        try await withServer(dir.sub("server")) { url, _ in
            // Four pairs at a time: a pair spends most of its time waiting on the server.
            try await withThrowingTaskGroup(of: Void.self) { group in
                var next = 0
                func start() {
                    let pair = next
                    next += 1
                    group.addTask {
                        let seed = base &+ UInt64(pair)
                        do {
                            try await Self.runPair(seed: seed, pair: pair, directory: dir.sub("pair-\(pair)"), server: url)
                        } catch {
                            Issue.record("seed \(seed) (STRATA_MERGE_SEED=\(seed) replays it as pair 0): \(error)")
                        }
                    }
                }
                for _ in 0..<4 { start() }
                while try await group.next() != nil {
                    if next < Self.pairs { start() }
                }
            }
        }
        let counts = Self.reasons.withLock { $0 }
        print("merge preview reasons over \(Self.pairs) pairs: \(counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", "))")
        for reason: MergePreview.Reason in [.laterWrite, .clockTieBrokenByReplica, .onlyOneSideWrote, .onlyOneSideHasObject, .deleteNewerThanInsert,
                                            .insertNewerThanDelete, .referenceToDeletedObject] {
            #expect(counts[reason, default: 0] > 0, "no pair met \(reason): the random edits do not exercise it")
        }
    }

    @Test("A member one side removed and the other added again is kept: add wins, and the preview says so")
    func addWinsIsExplained() async throws {
        let dir = TemporaryDirectory()
        let a = try await Store.open(at: dir.sub("a"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        let b = try await Store.open(at: dir.sub("b"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        let (note, tag) = try await a.transaction { tx in
            let note = try tx.insert("Note", ["title": "n"])
            let tag = try tx.insert("Tag", ["label": "t"])
            try tx.add(note, "tags", tag)
            return (note, tag)
        }
        _ = try await b.applyRemote(try a.transactions().map(\.transaction))
        try await b.transaction { tx in try tx.remove(note, "tags", tag) }
        try await a.transaction { tx in try tx.add(note, "tags", tag) }
        let preview = try a.previewMerge(with: b)
        let member = try #require(preview.objects.first { $0.object == note }?.members.first)
        #expect(member.target == tag && member.a && !member.b && member.merged)
        #expect(member.from == .a && member.reason == .addWinsOverConcurrentRemove)
        // The real thing agrees.
        _ = try await b.applyRemote(try a.transactions().map(\.transaction))
        #expect(b.related(note, "tags").map(\.id) == [tag])
        #expect(b.digest() == preview.merged.digest())
        // A copied store (one replica on two devices) is refused: a sync would fork it.
        try await b.close()
        try FileManager.default.copyItem(atPath: dir.sub("a"), toPath: dir.sub("copy"))
        let copy = try await Store.open(at: dir.sub("copy"), schema: Self.schema, options: StoreOptions(durability: .buffered))
        #expect(throws: StoreError.self) { _ = try a.previewMerge(with: copy) }
        try await copy.close()
        try await a.close()
    }

    static func runPair(seed: UInt64, pair: Int, directory: String, server: URL) async throws {
        var random = SeededGenerator(seed: seed)
        let clocks = Clocks.allCases.randomElement(using: &random) ?? .real
        let instant = HybridClock.wallMilliseconds()
        let (clockA, clockB): (DeviceClock, DeviceClock) = switch clocks {
        case .real: (DeviceClock(), DeviceClock())
        case .frozenTogether: (DeviceClock(frozen: instant), DeviceClock(frozen: instant))
        case .bBehind: (DeviceClock(), DeviceClock(offset: -3_600_000))
        case .aBehind: (DeviceClock(offset: -3_600_000), DeviceClock())
        }
        func open(_ name: String, _ clock: DeviceClock) async throws -> Store {
            var options = StoreOptions(durability: .buffered)
            options.clock = { clock.now() }
            return try await Store.open(at: directory + "/" + name, schema: schema, options: options)
        }
        let a = try await open("a", clockA)
        let b = try await open("b", clockB)
        let zone = "pair-\(pair)"
        let engineA = try SyncEngine(store: a, server: server, zone: zone, credentials: "alice-secret")
        let engineB = try SyncEngine(store: b, server: server, zone: zone, credentials: "alice-secret")

        // A shared past: A writes, both sync.
        var deletedA: [ObjectID] = []
        var deletedB: [ObjectID] = []
        try await edit(a, steps: Int.random(in: 1...8, using: &random), random: &random, deleted: &deletedA)
        _ = try await engineA.sync()
        _ = try await engineB.sync()
        // Apart: both edit the same objects offline (and sometimes one of them does nothing).
        try await edit(a, steps: Int.random(in: 0...10, using: &random), random: &random, deleted: &deletedA)
        try await edit(b, steps: Int.random(in: 0...10, using: &random), random: &random, deleted: &deletedB)

        let preview = try a.previewMerge(with: b)
        let reversed = try b.previewMerge(with: a)
        let promised = preview.merged.digest()
        #expect(reversed.merged.digest() == promised, "seed \(seed): merging B with A promises another state than A with B")
        // Each listed value is the one the side it names holds.
        Self.reasons.withLock { counts in
            for object in preview.objects {
                if let existence = object.existence { counts[existence.reason, default: 0] += 1 }
                for field in object.fields { counts[field.reason, default: 0] += 1 }
                for member in object.members { counts[member.reason, default: 0] += 1 }
            }
        }
        for object in preview.objects {
            for member in object.members {
                #expect(member.merged == (member.from == .a ? member.a : member.b), "seed \(seed): \(object.object) member \(member.target)")
            }
            for field in object.fields where field.from == .a || field.from == .b {
                let side = field.from == .a ? field.a : field.b
                if field.reason == .referenceToDeletedObject {
                    #expect(field.merged == .null && (field.a?.referenceValue != nil || field.b?.referenceValue != nil), "seed \(seed): \(object.object).\(field.name)")
                } else {
                    #expect(field.merged == side, "seed \(seed): \(object.object).\(field.name) is not from \(field.from) (\(field.reason))")
                }
            }
            if let existence = object.existence, existence.from == .a || existence.from == .b {
                #expect(existence.merged == (existence.from == .a ? existence.a : existence.b), "seed \(seed): \(object.object) existence")
            }
        }

        // The real thing.
        _ = try await engineA.sync()
        _ = try await engineB.sync()
        _ = try await engineA.sync()
        #expect(a.digest() == promised, "seed \(seed) (\(clocks)): A after syncing is not the preview's state")
        #expect(b.digest() == promised, "seed \(seed) (\(clocks)): B after syncing is not the preview's state")
        for id in preview.merged.allObjectIDs() {
            guard var expected = preview.merged.object(id), var actual = a.object(id) else {
                Issue.record("seed \(seed): \(id) exists in the preview but not on A after syncing")
                continue
            }
            expected.values["draft"] = nil
            actual.values["draft"] = nil
            #expect(expected == actual, "seed \(seed): \(id)")
        }
        try await a.close()
        try await b.close()
    }

    /// Random edits of the store's notes, folders and tags: inserts, updates of one or two
    /// fields, deletes, to-one and to-many changes.
    static func edit(_ store: Store, steps: Int, random: inout SeededGenerator, deleted: inout [ObjectID]) async throws {
        for _ in 0..<steps {
            let notes = store.fetch("Note").map(\.id)
            let folders = store.fetch("Folder").map(\.id)
            let tags = store.fetch("Tag").map(\.id)
            let choice = Int.random(in: 0..<11, using: &random)
            let text = "v\(random.next() % 1000)"
            let rank = Int64(random.next() % 100)
            let note = notes.randomElement(using: &random)
            let folder = folders.randomElement(using: &random)
            let tag = tags.randomElement(using: &random)
            let reinsert = choice == 10 ? deleted.popLast() : nil
            if choice == 9, rank < 50, let note { deleted.append(note) }
            try await store.transaction { tx in
                switch choice {
                case 0, 1:
                    let id = try tx.insert("Note", ["title": .string(text), "body": .string("b" + text), "draft": .string("d" + text)])
                    if let folder { try tx.set(id, "folder", .reference(folder)) }
                case 2:
                    _ = try tx.insert(["Folder", "Tag"][Int(rank % 2)], [rank % 2 == 0 ? "name" : "label": .string(text)])
                case 3, 4:
                    if let note { try tx.update(note, ["title": .string(text)]) }
                case 5:
                    if let note { try tx.update(note, ["body": .string(text), "rank": .integer(rank), "draft": .string("d" + text)]) }
                case 6:
                    // Half the time an add of a member already there (an add the other side's
                    // removal has not seen: add wins).
                    if let note, rank < 50, let member = tx.related(note, "tags").first {
                        try tx.add(note, "tags", member)
                    } else if let note, let tag {
                        try tx.add(note, "tags", tag)
                    }
                case 7:
                    if let note, let member = tx.related(note, "tags").first { try tx.remove(note, "tags", member) }
                case 8:
                    if let note { try tx.set(note, "folder", folder.map(Value.reference) ?? .null) }
                case 9:
                    if rank < 50, let note { try tx.delete(note) } else if let target = [folder, tag][Int(rank % 2)] ?? folder ?? tag { try tx.delete(target) }
                default:
                    // The same ID again after its delete: a new incarnation.
                    if let reinsert { _ = try tx.insert("Note", id: reinsert, ["title": .string(text)]) }
                }
            }
        }
    }
}
