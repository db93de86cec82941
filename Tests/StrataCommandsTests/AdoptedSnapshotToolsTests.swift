import Foundation
import Logging
import Strata
import StrataServer
import StrataTestSupport
import Testing

/// A store that bootstrapped from a zone's snapshot (its token expired before its first pull)
/// read by every tool exactly as a store that holds the whole history: the built executable
/// against a real server on a real port, as the issue reproduced it.
@Suite("the tools on a store that adopted a zone snapshot: verify, replay, blame, repair, sync")
struct AdoptedSnapshotToolsTests: NoteStoreCLI {
    let sync = SyncCommandTests()

    /// `strata … --json` parsed (the exit status must be 0).
    func json(_ arguments: [String]) async throws -> [String: Any] {
        // `export` prints JSON by default; the others with --json.
        let result = try await strata(arguments + (arguments.first == "export" ? [] : ["--json"]))
        #expect(result.status == 0, "strata \(arguments.joined(separator: " ")): \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                            "not JSON: \(result.stdout)")
    }

    func export(_ store: String) async throws -> (digest: String, objects: [String: [String: Any]]) {
        let exported = try await json(["export", store])
        let objects = try #require(exported["objects"] as? [[String: Any]])
        var byID: [String: [String: Any]] = [:]
        for object in objects { byID[try #require(object["id"] as? String)] = object }
        return (try #require(exported["digest"] as? String), byID)
    }

    /// Two devices: A holds the zone's whole history in its log; B joined after the zone was
    /// compacted, so it bootstrapped from the zone's snapshot.
    func withBootstrappedDevice(_ body: (_ dir: TemporaryDirectory, _ url: URL, _ a: String, _ b: String) async throws -> Void) async throws {
        let dir = TemporaryDirectory()
        try await sync.withServer(dir.sub("server")) { url, storage in
            let a = try await makeStore(dir, "a")
            try await insert(a, ["milk", "eggs", "bread"])
            #expect(try await sync.syncJSON(a, url).status == 0)
            // An edit of one of them, so that blame has something to tell apart.
            let ids = try await export(a).objects.keys.sorted()
            let edited = try await strata(["apply", a, "-"], input: #"{"op": "update", "entity": "Note", "id": "\#(ids[0])", "values": {"title": "oat milk"}}"#)
            #expect(edited.status == 0, "\(edited.stderr)")
            #expect(try await sync.syncJSON(a, url).status == 0)
            _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 1)
            let b = try await makeStore(dir, "b")
            try await insert(b, ["butter"])
            let joined = try await sync.syncJSON(b, url)
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(sync.int(joined.json, "bootstraps") == 1, "B did not bootstrap: \(joined.json)")
            #expect(try await sync.syncJSON(a, url).status == 0)
            #expect(try await sync.syncJSON(b, url).status == 0)
            try await body(dir, url, a, b)
        }
    }

    @Test("verify passes, every object of the snapshot replays with the blame of a store that holds the whole history, and replay --until shows only states the store had")
    func toolsReadAnAdoptedStore() async throws {
        try await withBootstrappedDevice { _, _, a, b in
            let (digestA, objectsA) = try await export(a)
            let (digestB, objectsB) = try await export(b)
            #expect(digestA == digestB)
            #expect(objectsB.count == 4)
            // verify: healthy, and it says the log records an adoption.
            let verified = try await strata(["verify", b])
            #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
            #expect(verified.stdout.contains("adopted state"))
            // The adoption is in the log.
            let listed = try await strata(["log", b, "--kind", "adopt"])
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.contains("adopt zone"), "\(listed.stdout)")
            // Blame of every field of every object, as A (whole history) tells it.
            for id in objectsA.keys.sorted() {
                let onA = try await json(["replay", a, "--object", id])
                let onB = try await json(["replay", b, "--object", id])
                #expect(onB["exists"] as? Bool == true, "\(id) on B: \(onB)")
                let blameA = try #require(onA["blame"] as? [String: [String: Any]])
                let blameB = try #require(onB["blame"] as? [String: [String: Any]])
                #expect(Set(blameA.keys) == Set(blameB.keys))
                for (field, source) in blameA {
                    #expect(source["replica"] as? String == blameB[field]?["replica"] as? String, "\(id).\(field)")
                    #expect((source["sequence"] as? NSNumber) == (blameB[field]?["sequence"] as? NSNumber), "\(id).\(field)")
                }
            }
            // replay --until every position: before the adoption only B's own state (its schema and
            // its note), from the adoption on A's notes too, and at the end the store's digest.
            let inspected = try await json(["inspect", b])
            let end = try #require((inspected["endPosition"] as? NSNumber)?.uint64Value)
            let final = try await titles(b)
            #expect(final == (try await titles(a)))
            #expect(final.contains("oat milk") && final.contains("butter"))
            var sawOwnOnly = false, sawMerged = false
            for position in 0..<end {
                let state = try await json(["replay", b, "--until", String(position)])
                let objects = try #require(state["objects"] as? [[String: Any]])
                let titles = Set(objects.compactMap { ($0["values"] as? [String: Any])?["title"] as? String })
                if titles == ["butter"] { sawOwnOnly = true }
                if titles == final { sawMerged = true }
                // Every state is one B had: its own, the adopted snapshot's merged in, then A's edit.
                #expect(titles.isEmpty || titles.contains("butter"), "position \(position): \(titles)")
                #expect(titles.isSubset(of: ["milk", "oat milk", "eggs", "bread", "butter"]), "position \(position): \(titles)")
                if position == end - 1 { #expect(state["digest"] as? String == digestB) }
            }
            #expect(sawOwnOnly && sawMerged)
        }
    }

    @Test("repair of a healthy adopted store changes nothing; a damaged one is cut, what is cut is quarantined, and the next sync brings back the zone's state")
    func repairKeepsTheAdoptedState() async throws {
        try await withBootstrappedDevice { dir, url, a, b in
            let digestA = try await export(a).digest
            // Healthy: nothing to repair, nothing changed.
            let before = try await export(b)
            let healthy = try await strata(["verify", b, "--repair", "--yes"])
            #expect(healthy.status == 0, "\(healthy.stdout)")
            #expect(try await export(b).digest == before.digest)
            // Damage the first record of B's log (a flipped byte in its payload, past the segment's
            // and the record's 48-byte headers): everything from there on is cut.
            let logDir = b + "/log"
            let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: logDir).filter { $0.hasSuffix(".seg") }.sorted().first)
            let path = logDir + "/" + segment
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            try #require(bytes.count > 120)
            bytes[100] ^= 0xFF
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let found = try await strata(["verify", b])
            #expect(found.status == 1, "\(found.stdout)")
            let repaired = try await strata(["verify", b, "--repair", "--yes"])
            #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
            #expect(repaired.stdout.contains("quarantine"), "\(repaired.stdout)")
            #expect(FileManager.default.fileExists(atPath: b + "/quarantine"))
            // The cursor was set aside: the next sync pulls the zone again and the store converges.
            let again = try await sync.syncJSON(b, url)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try await sync.syncJSON(a, url).status == 0)
            #expect(try await sync.syncJSON(b, url).status == 0)
            #expect(try await export(b).digest == (try await export(a).digest))
            #expect(try await export(b).objects.count == 4)
            _ = digestA
            _ = dir
        }
    }
}
