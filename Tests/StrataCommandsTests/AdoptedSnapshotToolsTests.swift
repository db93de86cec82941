import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataLog
import StrataServer
import StrataTestSupport
import Testing
import StrataCore

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

    /// Every file of a store (but the lock) and its bytes.
    func files(of store: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: store)
        while let name = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard !name.hasSuffix("LOCK"), FileManager.default.fileExists(atPath: store + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            result[name] = try Data(contentsOf: URL(fileURLWithPath: store + "/" + name))
        }
        return result
    }

    /// The kinds of damage a copied store can come with.
    enum Damage: String, CaseIterable, Sendable {
        case none, firstRecord, middleRecord, snapshotBytes, wrongSnapshot, snapshotHoldingMore, missingAdoptedState
    }

    func damage(_ store: String, _ kind: Damage) async throws {
        let logDir = store + "/log"
        let names = try FileManager.default.contentsOfDirectory(atPath: logDir).sorted()
        func flip(_ path: String, at offset: (Int) -> Int) throws {
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            try #require(bytes.count > 120)
            bytes[offset(bytes.count)] ^= 0xFF
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        let segment = logDir + "/" + (try #require(names.first { $0.hasSuffix(".seg") }))
        let snapshot = names.last { $0.hasSuffix(".snap") }.map { logDir + "/" + $0 }
        switch kind {
        case .none:
            break
        case .firstRecord:
            // Past the segment's and the record's 48-byte headers: everything from there is cut.
            try flip(segment) { _ in 100 }
        case .middleRecord:
            // A record in the middle of the log (damage in the last one would read as a torn,
            // never acknowledged append).
            var offsets: [Int64] = []
            _ = try SegmentLog.verify(at: logDir, record: { record in offsets.append(record.offset) })
            try #require(offsets.count > 2)
            let middle = offsets[offsets.count / 2]
            try flip(segment) { _ in Int(middle) + 50 }
        case .snapshotBytes:
            try flip(try #require(snapshot)) { $0 - 10 }
        case .wrongSnapshot:
            // A well-formed snapshot of too little (an empty state) past every other: the log holds
            // everything it holds.
            let log = try SegmentLog.open(at: logDir)
            _ = try log.writeSnapshot(ProjectionBuilder().snapshotPayload(), position: log.endPosition)
            try await log.close()
        case .snapshotHoldingMore:
            // A well-formed snapshot holding an object no event of the log names.
            let builder = ProjectionBuilder()
            let stranger = ReplicaID.random()
            _ = try builder.apply(encoded: TransactionRecord(replica: stranger, events: [
                Event(id: EventID(replica: stranger, sequence: 1), hlc: HLC(rawValue: 1 << 20),
                      change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string("only in the snapshot")])),
            ]).encoded())
            let log = try SegmentLog.open(at: logDir)
            _ = try log.writeSnapshot(builder.snapshotPayload(), position: log.endPosition)
            try await log.close()
        case .missingAdoptedState:
            let adopted = store + "/adopted"
            for name in try FileManager.default.contentsOfDirectory(atPath: adopted) { try FileManager.default.removeItem(atPath: adopted + "/" + name) }
        }
    }

    @Test("repair after every kind of damage: a healthy store is left byte for byte; what is removed is quarantined; an intact snapshot holding what the log does not is kept (refused); then a sync brings the store to the zone's state", arguments: Damage.allCases)
    func repairThenSync(_ kind: Damage) async throws {
        try await withBootstrappedDevice { dir, url, a, b in
            try await damage(b, kind)
            let before = try files(of: b)
            let repaired = try await strata(["verify", b, "--repair", "--yes"])
            let output = repaired.stdout + repaired.stderr
            switch kind {
            case .none:
                #expect(repaired.status == 0, "\(output)")
                #expect(try files(of: b) == before, "a repair of a healthy store changed it")
                #expect(!FileManager.default.fileExists(atPath: b + "/quarantine"))
            case .snapshotHoldingMore:
                #expect(repaired.status == 1, "\(output)")
                #expect(output.contains("not repaired") && output.contains("holds what the log does not"), "\(output)")
                #expect(try files(of: b) == before, "a refused repair changed the store")
                return
            case .missingAdoptedState:
                // Nothing can bring the state back into the log; the store itself still opens from
                // the snapshot past it, so the repair changes nothing and says so.
                #expect(repaired.status == 1, "\(output)")
                #expect(try files(of: b) == before, "a refused repair changed the store")
            case .firstRecord, .middleRecord, .snapshotBytes, .wrongSnapshot:
                #expect(repaired.status == 0, "\(output)")
                #expect(output.contains("quarantine"), "\(output)")
                let quarantined = try files(of: b + "/quarantine")
                #expect(!quarantined.isEmpty)
                // Nothing removed is lost: every byte that left the log is in the quarantine.
                let removed = Set(before.keys).subtracting(try files(of: b).keys).filter { $0.hasPrefix("log/") }
                for name in removed {
                    #expect(quarantined.values.contains(try #require(before[name])), "\(name) is gone and not in the quarantine")
                }
                if kind == .firstRecord {
                    // The cut took the adoption record: the state it named goes to the quarantine
                    // with it (else the next compaction would delete the only copy).
                    #expect(quarantined.keys.contains { $0.contains("/adopted/") }, "\(quarantined.keys.sorted()) \(output)")
                }
            }
            // Sync (the cursor was reset by any repair that changed the store): the zone's state.
            let synced = try await sync.syncJSON(b, url)
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try await sync.syncJSON(a, url).status == 0)
            #expect(try await sync.syncJSON(b, url).status == 0)
            #expect(try await export(b).digest == (try await export(a).digest), "\(kind): the repaired store does not converge with the zone")
            _ = dir
        }
    }
}
