import DivergentStores
import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// The users who pushed each replica (`authors.json`, recorded by the store from the log server)
/// in `log`, `replay --object`, `inspect` and `diff`.
@Suite("strata shows who pushed each event")
struct AuthorsCommandTests {
    let cli = CommandLineTests()

    /// Records `users` in the store at `path` the way the sync engine does: through the store.
    func record(_ users: [ReplicaID: String], in path: String) async throws {
        let store = try Store.open(at: path)
        do {
            try store.recordAuthors(users)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    func jsonLines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test("log: `by USER` on every line, `user` in JSON (null when unknown), and --user filters")
    func log() async throws {
        let dir = TemporaryDirectory()
        let store = try cli.makeStore(dir)
        let before = try cli.strata("log", store, "--json")
        #expect(before.status == 0, "\(before.stderr)")
        let unknown = try jsonLines(before.stdout)
        #expect(!unknown.isEmpty && unknown.allSatisfy { $0["user"] is NSNull }, "\(before.stdout)")
        #expect(!(try cli.strata("log", store).stdout.contains(" by ")))

        try await record([try Store.replicaID(ofStoreAt: store): "alice"], in: store)
        let text = try cli.strata("log", store)
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.count == unknown.count)
        #expect(lines.allSatisfy { $0.contains("by alice") }, "\(text.stdout)")
        let json = try jsonLines(try cli.strata("log", store, "--json").stdout)
        #expect(json.allSatisfy { $0["user"] as? String == "alice" })
        let mine = try cli.strata("log", store, "--user", "alice", "--kind", "update")
        #expect(mine.stdout.split(separator: "\n").count == 1 && mine.stdout.contains("pinned=true"))
        let nobody = try cli.strata("log", store, "--user", "bob")
        #expect(nobody.status == 0 && nobody.stdout.isEmpty)
        #expect(nobody.stderr.contains("no replica of \(store) is known to be bob's"))
    }

    @Test("replay --object: the blame names the user beside the event, in text and JSON")
    func replayBlame() async throws {
        let dir = TemporaryDirectory()
        let store = try cli.makeStore(dir)
        try await record([try Store.replicaID(ofStoreAt: store): "alice"], in: store)
        let text = try cli.strata("replay", store, "--object", CommandLineTests.note)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("pinned = true   ← "), "\(text.stdout)")
        let blameLine = try #require(text.stdout.split(separator: "\n").first { $0.contains("pinned = true") })
        #expect(blameLine.contains(" by alice at "))
        let json = try cli.strata("replay", store, "--object", CommandLineTests.note, "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let pinned = try #require((parsed["blame"] as? [String: Any])?["pinned"] as? [String: Any], "blame is structured: \(json.stdout)")
        #expect(pinned["user"] as? String == "alice")
        #expect((pinned["replica"] as? String).map { UUID(uuidString: $0) != nil } == true && pinned["sequence"] is Int && pinned["time"] is String)
        let steps = try #require(parsed["steps"] as? [[String: Any]])
        #expect(steps.allSatisfy { ($0["event"] as? [String: Any])?["user"] as? String == "alice" })
    }

    @Test("inspect: an authors section with each known replica's user and sequences, in text and JSON")
    func inspect() async throws {
        let dir = TemporaryDirectory()
        let store = try cli.makeStore(dir)
        let none = try cli.strata("inspect", store)
        #expect(none.stdout.contains("authors\n  (none recorded"), "\(none.stdout)")
        let replica = try Store.replicaID(ofStoreAt: store)
        let elsewhere = ReplicaID(rawValue: 0xBEEF)
        try await record([replica: "alice", elsewhere: "bob"], in: store)
        let text = try cli.strata("inspect", store)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("  \(replica)  alice  holds 4 events: 1…4"), "\(text.stdout)")
        #expect(text.stdout.contains("  \(elsewhere)  bob  holds 0 events: none"))
        #expect(text.stdout.contains("\(replica) (this store) by alice  holds"))
        let json = try cli.strata("inspect", store, "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let authors = try #require(parsed["authors"] as? [[String: Any]])
        #expect(authors.count == 2)
        let alice = try #require(authors.first { $0["replica"] as? String == replica.description })
        #expect(alice["user"] as? String == "alice" && alice["count"] as? Int == 4 && alice["sequences"] as? String == "1…4")
        #expect((parsed["replicas"] as? [[String: Any]])?.first?["user"] as? String == "alice")
    }

    @Test("A damaged authors file: the tools say so and show no users")
    func damagedFile() async throws {
        let dir = TemporaryDirectory()
        let store = try cli.makeStore(dir)
        try await record([try Store.replicaID(ofStoreAt: store): "alice"], in: store)
        let path = store + "/authors.json"
        let edited = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "alice", with: "mallory")
        try edited.write(toFile: path, atomically: true, encoding: .utf8)
        let log = try cli.strata("log", store)
        #expect(log.status == 0)
        #expect(!log.stdout.contains("mallory") && !log.stdout.contains(" by "))
        #expect(log.stderr.contains("users are not shown") && log.stderr.contains("checksum"), "\(log.stderr)")
        let inspect = try cli.strata("inspect", store)
        #expect(inspect.status == 0)
        #expect(inspect.stdout.contains("(users are not shown"), "\(inspect.stdout)")
        let replay = try cli.strata("replay", store, "--object", CommandLineTests.note)
        #expect(replay.status == 0 && replay.stdout.contains("note: users are not shown"))
    }

    @Test("diff: the users from both stores' authors beside missing events, blame and timelines; the page too")
    func diff() async throws {
        let dir = TemporaryDirectory()
        let a = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        let b = try FixturePaths.copy(FixturePaths.deviceB, to: dir, as: "b")
        // Each store knows only some users: the diff merges what both know.
        try await record([DivergentStores.replicaA: "alice", DivergentStores.replicaC: "carol"], in: a)
        try await record([DivergentStores.replicaB: "bob"], in: b)
        let diff = try StoreDiff.run(a, b, progress: nil)
        #expect(diff.a.user == "alice" && diff.b.user == "bob")
        #expect(diff.firstDivergent?.user == "alice" && diff.firstDivergent?.event?.user == "alice")
        #expect(diff.onlyInB.map { "\($0.sequence)\($0.user ?? "?")" }.sorted() == ["2bob", "2carol"])
        let title = try #require(diff.objects.first { $0.object == DivergentStores.shopping.description }?.fields.first)
        #expect(title.blameA?.user == "alice" && title.blameB?.user == "bob")
        let tablet = try #require(diff.objects.first { $0.object == DivergentStores.fromTablet.description })
        #expect(tablet.existenceB?.user == "carol")
        #expect(diff.timelineA.contains { $0.user == "alice" } && diff.timelineB.contains { $0.user == "bob" })
        #expect(diff.replicas.map { $0.user ?? "?" } == ["alice", "bob", "carol"])

        let page = dir.sub("diff.html")
        let run = try cli.strata("diff", a, b, "--html", page)
        #expect(run.status == 1)
        #expect(run.stdout.contains("first divergent event (earliest in merge order): a1a10000:49 (alice) in A"), "\(run.stdout)")
        #expect(run.stdout.contains("← set by b2b20000:2 (bob)"))
        #expect(run.stdout.contains("inserted by c3c30000:2 (carol)"))
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("by alice") && html.contains("b2b20000:2 (bob)") && html.contains("carol"))
        let json = try cli.strata("diff", a, b, "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((parsed["firstDivergent"] as? [String: Any])?["user"] as? String == "alice")
    }

    @Test("inspect: a lineage section with the replicas the store forked away from, in text and JSON")
    func lineage() async throws {
        let dir = TemporaryDirectory()
        let store = try cli.makeStore(dir)
        #expect(try cli.strata("inspect", store).stdout.contains("lineage\n  (none: the store has always authored as"))
        let old = try Store.replicaID(ofStoreAt: store)
        let opened = try Store.open(at: store)
        do {
            try await opened.fork(keepingThrough: 2)
            try opened.recordAuthors([old: "alice"])
        } catch {
            try? await opened.close()
            throw error
        }
        try await opened.close()
        let successor = try Store.replicaID(ofStoreAt: store)
        #expect(successor != old)
        let text = try cli.strata("inspect", store)
        #expect(text.status == 0, "\(text.stderr)")
        let line = try #require(text.stdout.split(separator: "\n").first { $0.contains("kept through sequence") }, "\(text.stdout)")
        #expect(line.contains("forked") && line.contains("\(old) by alice kept through sequence 2") && line.contains("re-authored as \(successor)"))
        let json = try cli.strata("inspect", store, "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let lineage = try #require(parsed["lineage"] as? [[String: Any]])
        #expect(lineage.count == 1)
        #expect(lineage.first?["reason"] as? String == "forked" && lineage.first?["replica"] as? String == old.description)
        #expect(lineage.first?["successor"] as? String == successor.description && lineage.first?["keptThrough"] as? Int == 2)
        // The apply's transaction (sequences 2…4) is re-authored whole: a fork keeps atomicity.
        #expect(lineage.first?["user"] as? String == "alice" && lineage.first?["reauthored"] as? Int == 3)
    }
}
