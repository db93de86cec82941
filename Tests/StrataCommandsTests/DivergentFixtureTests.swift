import DivergentStores
import Foundation
import Strata
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// `diff`, `replay` and `verify` on the committed pair of divergent device stores: the findings
/// the recipe (Tools/strata-fixtures/DivergentStores) built into them.
@Suite("Divergent device fixtures")
struct DivergentFixtureTests {
    let a = DivergentStores.replicaA.description
    let b = DivergentStores.replicaB.description
    let c = DivergentStores.replicaC.description

    @Test("diff names the events each store lacks and the first divergent event")
    func missingEvents() throws {
        let diff = try StoreDiff.run(FixturePaths.deviceA, FixturePaths.deviceB, progress: nil)
        #expect(!diff.equal)
        #expect(diff.onlyInACount == 2)
        #expect(diff.onlyInBCount == 2)
        #expect(diff.onlyInA.map { "\($0.replica):\($0.sequence)" } == ["\(a):49", "\(a):50"])
        #expect(diff.onlyInB.map { "\($0.replica):\($0.sequence)" }.sorted() == ["\(b):2", "\(c):2"].sorted())
        let first = try #require(diff.firstDivergent)
        #expect(first.heldBy == "a")
        #expect(first.replica == a && first.sequence == 49)
        #expect(first.event?.kind == "update")
        #expect(first.event?.fields?["title"] == .string("Shopping: milk"))
        #expect(first.event?.position == 45)
        // What each has seen of B: A has 1 and 3 (a gap where B's rename is), B has 1…3.
        let seenOfB = try #require(diff.replicas.first { $0.replica == b })
        #expect(seenOfB.inA == "1, 3")
        #expect(seenOfB.inB == "1…3")
        #expect(seenOfB.onlyInB == "2")
    }

    @Test("diff lists the differing objects and fields with the event that set each side")
    func differingFields() throws {
        let diff = try StoreDiff.run(FixturePaths.deviceA, FixturePaths.deviceB, progress: nil)
        #expect(diff.objects.count == 3)
        let shopping = try #require(diff.objects.first { $0.object == DivergentStores.shopping.description })
        #expect(shopping.existsInA && shopping.existsInB)
        #expect(shopping.fields.map(\.field) == ["title"])
        let title = try #require(shopping.fields.first)
        #expect(title.a == .string("Shopping: milk"))
        #expect(title.b == .string("Shopping: bread"))
        #expect(title.blameA?.replica == a && title.blameA?.sequence == 49 && title.blameA?.seenByOther == false)
        #expect(title.blameA?.position == 45)
        #expect(title.blameB?.replica == b && title.blameB?.sequence == 2 && title.blameB?.seenByOther == false)
        #expect(title.blameB?.position == 45)

        let tablet = try #require(diff.objects.first { $0.object == DivergentStores.fromTablet.description })
        #expect(!tablet.existsInA && tablet.existsInB)
        #expect(tablet.existenceA == nil)
        #expect(tablet.existenceB?.replica == c && tablet.existenceB?.sequence == 2)

        let folder = try #require(diff.objects.first { $0.object == DivergentStores.folder.description })
        #expect(folder.members.map(\.relationship) == ["notes"])
        #expect(folder.members.first?.onlyInB == [DivergentStores.fromTablet.description])
        // Deleted on both sides (A pinned it, then received B's delete): not a difference.
        #expect(!diff.objects.contains { $0.object == DivergentStores.oldIdea.description })
    }

    @Test("diff marks where each timeline parts, and writes a self-contained page")
    func timelinesAndHTML() throws {
        let diff = try StoreDiff.run(FixturePaths.deviceA, FixturePaths.deviceB, progress: nil)
        #expect(diff.timelineA.filter(\.divergencePoint).map(\.position) == [45])
        #expect(diff.timelineB.filter(\.divergencePoint).map(\.position) == [45])
        #expect(diff.timelineA.filter(\.missingOnOtherSide).map(\.position) == [45, 46])
        #expect(diff.timelineB.filter(\.missingOnOtherSide).map(\.position) == [45, 47])
        let html = diff.html
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.contains("divergence point"))
        #expect(html.contains("Shopping: milk") && html.contains("Shopping: bread"))
        #expect(!html.contains("<script") && !html.contains("src=\"http"))
        let text = diff.text
        #expect(text.contains("first divergent event"))
        #expect(text.contains("a1a10000:49"))
    }

    @Test("A store compared with a copy of itself is equal")
    func equalToItself() throws {
        let dir = TemporaryDirectory()
        let copy = try FixturePaths.copy(FixturePaths.deviceB, to: dir, as: "b")
        let diff = try StoreDiff.run(FixturePaths.deviceB, copy, progress: nil)
        #expect(diff.equal)
        #expect(diff.objects.isEmpty && diff.onlyInA.isEmpty && diff.onlyInB.isEmpty)
        #expect(diff.a.digest != nil && diff.a.digest == diff.b.digest)
    }

    @Test("replay to the end of the shared history gives both devices the same state")
    func replaySharedHistory() throws {
        let stateA = try ReplayState.run(try StoreFiles(FixturePaths.deviceA), until: .position(44), entity: nil, progress: nil)
        let stateB = try ReplayState.run(try StoreFiles(FixturePaths.deviceB), until: .position(44), entity: nil, progress: nil)
        #expect(stateA.digest == stateB.digest)
        #expect(stateA.lastPosition == 44)
        #expect(stateB.snapshot == "snapshot-00000000000000000045.snap")
        let shopping = try #require(stateA.objects.first { $0.id == DivergentStores.shopping.description })
        #expect(shopping.values["title"] == .string("Shopping"))
        // One step further, A has its own rename.
        let later = try ReplayState.run(try StoreFiles(FixturePaths.deviceA), until: .position(45), entity: "Note", progress: nil)
        #expect(later.objects.first { $0.id == DivergentStores.shopping.description }?.values["title"] == .string("Shopping: milk"))
        #expect(later.objects.allSatisfy { $0.entity == "Note" })
    }

    @Test("replay before a compacted store's retained history is refused with the reason")
    func replayBeforeRetainedHistory() throws {
        #expect(throws: CLIError.self) {
            try ReplayState.run(try StoreFiles(FixturePaths.deviceB), until: .position(10), entity: nil, progress: nil)
        }
        do {
            _ = try ReplayState.run(try StoreFiles(FixturePaths.deviceB), until: .position(10), entity: nil, progress: nil)
        } catch let error as CLIError {
            #expect(error.message.contains("compacted away"))
            #expect(error.exitCode == 2)
        }
    }

    @Test("replay --object shows every event that named the object and which set each value")
    func objectHistory() throws {
        let history = try ObjectHistory.run(try StoreFiles(FixturePaths.deviceA), object: DivergentStores.shopping, until: nil, progress: nil)
        #expect(history.entity == "Note" && history.exists)
        #expect(history.steps.map(\.event.kind) == ["insert", "add", "update"])
        #expect(history.steps[0].effect.contains("overwritten: title"))
        #expect(history.steps[2].effect == "update: sets the current title")
        #expect(history.blame["title"].map { $0.replica.hasPrefix("a1a10000") && $0.sequence == 49 } == true)
        #expect(history.current?.values["title"] == .string("Shopping: milk"))

        // "Old idea": pinned by A, then deleted by B's delete that reached A.
        let idea = try ObjectHistory.run(try StoreFiles(FixturePaths.deviceA), object: DivergentStores.oldIdea, until: nil, progress: nil)
        #expect(!idea.exists)
        #expect(idea.steps.last?.event.kind == "delete")
        #expect(idea.steps.last?.effect == "delete: the object is deleted by this event")
        // As of before the delete arrived, it existed.
        let before = try ObjectHistory.run(try StoreFiles(FixturePaths.deviceA), object: DivergentStores.oldIdea, until: .position(46), progress: nil)
        #expect(before.exists)
        #expect(before.current?.values["pinned"] == .bool(true))
    }

    @Test("verify passes both devices; B's snapshot is the base of its replay")
    func verifyFixtures() throws {
        let verifiedA = try Verification.run(try StoreFiles(FixturePaths.deviceA), progress: nil)
        #expect(verifiedA.healthy)
        #expect(verifiedA.events == 53)
        let verifiedB = try Verification.run(try StoreFiles(FixturePaths.deviceB), progress: nil)
        #expect(verifiedB.healthy)
        #expect(verifiedB.startPosition == 43)
        #expect(verifiedB.snapshots.map(\.status).first?.hasPrefix("ok (the base") == true)
    }

    @Test("The recipe reproduces the committed findings")
    func recipeReproduces() async throws {
        let dir = TemporaryDirectory()
        let (a, b) = try await DivergentStores.write(into: dir.path)
        let fresh = try StoreDiff.run(a, b, progress: nil)
        let committed = try StoreDiff.run(FixturePaths.deviceA, FixturePaths.deviceB, progress: nil)
        for (made, kept) in [(a, FixturePaths.deviceA), (b, FixturePaths.deviceB)] {
            let madeState = try ReplayState.run(try StoreFiles(made), until: .position(.max), entity: nil, progress: nil)
            let keptState = try ReplayState.run(try StoreFiles(kept), until: .position(.max), entity: nil, progress: nil)
            #expect(madeState.digest == keptState.digest, "\(kept)")
        }
        #expect(fresh.a.digest == nil, "diverged stores get no digest in a diff")
        // Stored times are the generating run's clock; everything else is fixed.
        func key(_ m: StoreDiff.MissingEvent) -> String { "\(m.replica):\(m.sequence):\(m.event?.hlc ?? 0):\(m.event?.kind ?? "")" }
        #expect(fresh.onlyInA.map(key) == committed.onlyInA.map(key))
        #expect(fresh.onlyInB.map(key) == committed.onlyInB.map(key))
    }
}
