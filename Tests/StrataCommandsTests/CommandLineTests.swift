import Foundation
import StrataTestSupport
import Testing

/// The built `strata` executable, end to end: what a script or a developer at a terminal sees.
@Suite("strata, the executable")
struct CommandLineTests {
    static let schema = """
    {"entities": [
      {"name": "Folder", "attributes": [{"name": "name", "type": "string", "optional": false}],
       "relationships": [{"name": "notes", "destination": "Note", "toMany": true, "inverse": "folder", "deleteRule": "cascade"}]},
      {"name": "Note", "attributes": [{"name": "title", "type": "string", "default": ""}, {"name": "pinned", "type": "bool", "default": false},
                                      {"name": "due", "type": "date"}, {"name": "rank", "type": "integer"}],
       "relationships": [{"name": "folder", "destination": "Folder", "inverse": "notes"}]}
    ]}
    """
    static let folder = "f01de400-0000-4000-8000-000000000001"
    static let note = "5a0991a6-0000-4000-8000-000000000002"

    func strata(_ arguments: String..., input: String? = nil) throws -> ChildProcess.Result {
        try ChildProcess.run(try ChildProcess.executable("strata"), arguments, input: input)
    }

    /// A store made with init and apply, holding a folder and a note.
    func makeStore(_ dir: TemporaryDirectory) throws -> String {
        let schemaFile = dir.sub("schema.json")
        try Data(Self.schema.utf8).write(to: URL(fileURLWithPath: schemaFile))
        let store = dir.sub("store")
        let created = try strata("init", store, "--schema", schemaFile)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.contains("entities Folder, Note"))
        let changes = """
        {"op": "insert", "entity": "Folder", "id": "\(Self.folder)", "values": {"name": "Home"}}
        {"op": "insert", "entity": "Note", "id": "\(Self.note)", "values": {"title": "Milk", "folder": "\(Self.folder)", "due": "2026-03-01T09:30:00.123456Z", "rank": 3}}

        {"op": "update", "id": "\(Self.note)", "values": {"pinned": true}}
        """
        let applied = try strata("apply", store, "-", input: changes)
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(applied.stdout.contains("applied 3 change(s) as one transaction"))
        return store
    }

    @Test("init, apply and get: a store usable from scripts")
    func initApplyGet() throws {
        let dir = TemporaryDirectory()
        let store = try makeStore(dir)
        let one = try strata("get", store, "Note", Self.note, "--json")
        #expect(one.status == 0, "\(one.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(one.stdout.utf8)) as? [String: Any])
        let values = try #require(object["values"] as? [String: Any])
        #expect(values["title"] as? String == "Milk")
        #expect(values["pinned"] as? Bool == true)
        #expect(values["rank"] as? Int == 3)
        #expect(values["due"] as? String == "2026-03-01T09:30:00.123456Z")
        #expect(values["folder"] as? String == Self.folder)
        let folders = try strata("get", store, "Folder")
        #expect(folders.stdout.contains("Folder \(Self.folder)"))
        #expect(folders.stdout.contains("notes=[5a0991a6]"))
        let missing = try strata("get", store, "Note", "00000000-0000-4000-8000-0000000000ff")
        #expect(missing.status == 1)
        let unknown = try strata("get", store, "Nope")
        #expect(unknown.status == 2 && unknown.stderr.contains("no entity Nope"))
    }

    @Test("--version; init --json lists the entities; IDs as log and diff print them (8 hex digits) name objects (a prefix that names none is a finding, exit 1); replay blame is structured; export --jsonl streams one object per line")
    func scriptingEdges() throws {
        let version = try strata("--version")
        #expect(version.status == 0 && version.stdout.hasPrefix("strata ") && version.stdout.contains("sync protocol v1"), "\(version)")

        let dir = TemporaryDirectory()
        let schemaFile = dir.sub("schema.json")
        try Data(Self.schema.utf8).write(to: URL(fileURLWithPath: schemaFile))
        let created = try strata("init", dir.sub("plain"), "--schema", schemaFile, "--json")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(created.stdout.utf8)) as? [String: Any])
        #expect(info["entities"] as? [String] == ["Folder", "Note"])

        let store = try makeStore(dir)
        let short = String(Self.note.prefix(8))
        let byPrefix = try strata("get", store, "Note", short, "--json")
        #expect(byPrefix.status == 0, "\(byPrefix.stderr)")
        #expect(byPrefix.stdout.contains(Self.note))
        let replay = try strata("replay", store, "--object", short, "--json")
        #expect(replay.status == 0, "\(replay.stderr)")
        let history = try #require(try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as? [String: Any])
        let blame = try #require((history["blame"] as? [String: Any])?["title"] as? [String: Any])
        #expect(blame["sequence"] as? Int != nil && blame["replica"] is String && blame.keys.contains("user"))
        #expect(try strata("log", store, "--object", short).stdout.split(separator: "\n").count == 2)
        let unknown = try strata("replay", store, "--object", "ffffffff")
        #expect(unknown.status == 1 && unknown.stderr.contains("no object"), "nothing found is a finding, as get of a missing object: \(unknown)")
        let notAnID = try strata("replay", store, "--object", "xyz")
        #expect(notAnID.status == 2)

        let lines = try strata("export", store, "--jsonl").stdout.split(separator: "\n")
        #expect(lines.count == 3, "a header and two objects: \(lines)")
        let header = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(header["objectCount"] as? Int == 2 && header["digest"] is String)
        let ids = try lines.dropFirst().map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["id"] as? String }
        #expect(ids == [Self.folder, Self.note], "sorted by entity, then ID")
    }

    @Test("log --json: a remove lists the adds it names")
    func removeNamesItsAdds() throws {
        let dir = TemporaryDirectory()
        let schemaFile = dir.sub("schema.json")
        try Data(Self.tagSchema.utf8).write(to: URL(fileURLWithPath: schemaFile))
        let store = dir.sub("tags")
        #expect(try strata("init", store, "--schema", schemaFile).status == 0)
        let note = "11111111-2222-4333-8444-555555555555", tag = "aaaaaaaa-2222-4333-8444-555555555555"
        let changes = """
        {"op": "insert", "entity": "Note", "id": "\(note)", "values": {"title": "Milk"}}
        {"op": "insert", "entity": "Tag", "id": "\(tag)", "values": {"label": "food"}}
        {"op": "add", "id": "\(note)", "relationship": "tags", "target": "\(tag)"}
        """
        #expect(try strata("apply", store, "-", input: changes).status == 0)
        #expect(try strata("apply", store, "-", input: #"{"op": "remove", "id": "\#(note)", "relationship": "tags", "target": "\#(tag)"}"#).status == 0)
        let log = try strata("log", store, "--json", "--kind", "remove")
        let event = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [String: Any], "\(log)")
        let adds = try #require(event["adds"] as? [[String: Any]])
        #expect(adds.count == 1 && adds[0]["sequence"] as? Int == 4 && adds[0]["replica"] is String)
    }

    static let tagSchema = """
    {"entities": [
      {"name": "Note", "attributes": [{"name": "title", "type": "string"}],
       "relationships": [{"name": "tags", "destination": "Tag", "toMany": true, "inverse": "notes"}]},
      {"name": "Tag", "attributes": [{"name": "label", "type": "string"}],
       "relationships": [{"name": "notes", "destination": "Note", "toMany": true, "inverse": "tags"}]}
    ]}
    """

    @Test("apply: a bad line names the line and the field, and nothing is committed")
    func applyErrors() throws {
        let dir = TemporaryDirectory()
        let store = try makeStore(dir)
        let before = try strata("export", store)
        let cases: [(String, String)] = [
            ("{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"title\": \"ok\"}}\n{\"op\": \"update\", \"id\": \"\(Self.note)\", \"values\": {\"pinned\": \"yes\"}}",
             "stdin:2, field \"values.pinned\": expected bool"),
            ("{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"colour\": 1}}", "stdin:1, field \"values.colour\": Note has no attribute or relationship colour"),
            ("{\"op\": \"rename\", \"id\": \"\(Self.note)\"}", "stdin:1, field \"op\": unknown operation \"rename\""),
            ("{\"op\": \"update\", \"id\": \"nope\", \"values\": {}}", "stdin:1, field \"id\": not a UUID"),
            ("{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"due\": \"next week\"}}", "stdin:1, field \"values.due\": not an ISO 8601 date"),
            ("{\"op\": \"insert\", \"entity\": \"Folder\", \"values\": {}}", "stdin:1, field \"values.name\""),
            ("{\"op\": \"delete\", \"id\": \"00000000-0000-4000-8000-0000000000ff\"}", "stdin:1, field \"id\": no object"),
            ("{\"op\": \"insert\", \"entity\": \"Note\"\n", "stdin:1: not valid JSON"),
            ("{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"folder\": \"00000000-0000-4000-8000-0000000000ff\"}}", "stdin:1"),
        ]
        for (input, expected) in cases {
            let result = try strata("apply", store, "-", input: input)
            #expect(result.status == 2, "\(input)")
            #expect(result.stderr.contains(expected), "\(input) → \(result.stderr)")
        }
        #expect(try strata("export", store).stdout == before.stdout, "a failed apply changed the store")
    }

    @Test("verify finds a corrupted copy (exit 1, file and offset), repair cuts it and says what was dropped")
    func verifyAndRepair() throws {
        let dir = TemporaryDirectory()
        let store = try makeStore(dir)
        for title in ["a", "b", "c"] {
            let more = try strata("apply", store, "-", input: "{\"op\": \"update\", \"id\": \"\(Self.note)\", \"values\": {\"title\": \"\(title)\"}}")
            #expect(more.status == 0)
        }
        let healthy = try strata("verify", store)
        #expect(healthy.status == 0, "\(healthy.stdout)\(healthy.stderr)")
        #expect(healthy.stdout.hasSuffix("ok\n"))

        // Damage the third record: a byte in the middle of its payload.
        let segment = store + "/log/00000000000000000000.seg"
        let inspect = try strata("inspect", store, "--json")
        #expect(inspect.status == 0)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: segment))
        let offsets = try recordOffsets(store)
        #expect(offsets.count == 5)
        let damaged = Int(offsets[2]) + 60
        bytes[damaged] ^= 0x08
        try bytes.write(to: URL(fileURLWithPath: segment))

        let found = try strata("verify", store)
        #expect(found.status == 1)
        #expect(found.stdout.contains("FOUND"))
        #expect(found.stdout.contains("\(segment) at byte \(offsets[2])"), "\(found.stdout)")
        let json = try strata("verify", store, "--json")
        #expect(json.status == 1)
        #expect(json.stdout.contains("\"offset\" : \(offsets[2])"))

        let repaired = try strata("verify", store, "--repair", "--yes")
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(repaired.stdout.contains("truncated 00000000000000000000.seg at byte \(offsets[2])"))
        #expect(repaired.stdout.contains("dropped 2 record(s) that still verified"))
        #expect(repaired.stdout.contains("the store now verifies"))
        #expect(try strata("verify", store).status == 0)
        // The two records before the damage are intact: the note as the first apply left it.
        let note = try strata("get", store, "Note", Self.note, "--json")
        #expect(note.stdout.contains("\"title\" : \"Milk\""))
    }

    /// The byte offsets of the log's records, from `strata log --json`... through inspect's
    /// segment list and the log: the entries' positions map one to one to records here.
    func recordOffsets(_ store: String) throws -> [Int64] {
        // Each apply is one record; walk the file's record headers (48 bytes, length first).
        let data = try Data(contentsOf: URL(fileURLWithPath: store + "/log/00000000000000000000.seg"))
        var offsets: [Int64] = []
        var offset = 48
        while offset + 48 <= data.count {
            let length = data[offset..<(offset + 4)].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            guard length >= 48 else { break }
            offsets.append(Int64(offset))
            offset += length
        }
        return offsets
    }

    @Test("inspect, log, export and compact on a store")
    func inspectLogExportCompact() throws {
        let dir = TemporaryDirectory()
        let store = try makeStore(dir)
        let inspect = try strata("inspect", store)
        #expect(inspect.status == 0)
        for expected in ["segments", "00000000000000000000.seg", "compression ratio", "events by kind", "insert 2", "update 1",
                         "events by entity", "Folder 1", "Note 2", "(this store)", "(never synced)", "schema"] {
            #expect(inspect.stdout.contains(expected), "inspect lacks \(expected)")
        }
        let withObjects = try strata("inspect", store, "--objects")
        #expect(withObjects.stdout.contains("objects           2: Folder 1, Note 1"))
        let json = try strata("inspect", store, "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(parsed["events"] as? Int == 4)
        #expect((parsed["eventsByKind"] as? [String: Int])?["insert"] == 2)

        let log = try strata("log", store, "--json", "--entity", "Note")
        let lines = log.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains("\"entity\":\"Note\"") })
        let updates = try strata("log", store, "--kind", "update")
        #expect(updates.stdout.split(separator: "\n").count == 1)
        #expect(updates.stdout.contains("pinned=true"))
        let byObject = try strata("log", store, "--object", Self.folder)
        // The folder's insert, and the note's insert pointing at it.
        #expect(byObject.stdout.split(separator: "\n").count == 2)
        let limited = try strata("log", store, "--limit", "1")
        #expect(limited.stdout.split(separator: "\n").count == 1)

        let export = try strata("export", store)
        let exported = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any])
        #expect((exported["objects"] as? [Any])?.count == 2)

        let compact = try strata("compact", store)
        #expect(compact.status == 0, "\(compact.stderr)")
        #expect(compact.stdout.contains("snapshot snapshot-"))
        let verified = try strata("verify", store)
        #expect(verified.status == 0)
        #expect(verified.stdout.contains("digest matches a replay") || verified.stdout.contains("snapshot"))
        #expect(try strata("export", store).stdout == export.stdout, "compaction changed the objects")
    }

    @Test("diff: exit 1 with the findings for the divergent fixtures, exit 0 for equal stores; --html writes the page")
    func diffExitCodes() throws {
        let dir = TemporaryDirectory()
        let page = dir.sub("diff.html")
        let diverged = try strata("diff", FixturePaths.deviceA, FixturePaths.deviceB, "--html", page)
        #expect(diverged.status == 1)
        #expect(diverged.stdout.contains("first divergent event (earliest in merge order): a1a10000:49"))
        #expect(FileManager.default.fileExists(atPath: page))
        let copy = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        let equal = try strata("diff", FixturePaths.deviceA, copy)
        #expect(equal.status == 0)
        #expect(equal.stdout.contains("equal"))
        let compacted = try strata("log", FixturePaths.deviceB, "--kind", "delete")
        #expect(compacted.status == 0)
        #expect(compacted.stdout.contains("delete Note 01d1dea0"))
        #expect(compacted.stderr.contains("before position 43 was compacted"))
        let json = try strata("diff", FixturePaths.deviceA, FixturePaths.deviceB, "--json")
        #expect(json.status == 1)
        #expect(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) is [String: Any])
    }

    @Test("replay by time gives the state as of an entry's stored time")
    func replayByTime() throws {
        let dir = TemporaryDirectory()
        let store = try makeStore(dir)
        Thread.sleep(forTimeInterval: 0.01)
        #expect(try strata("apply", store, "-", input: "{\"op\": \"update\", \"id\": \"\(Self.note)\", \"values\": {\"title\": \"Bread\"}}").status == 0)
        let log = try strata("log", store, "--json", "--kind", "update", "--limit", "1")
        let first = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.split(separator: "\n")[0].utf8)) as? [String: Any])
        let stored = try #require(first["stored"] as? String)
        let byTime = try strata("replay", store, "--until", stored, "--json")
        let byPosition = try strata("replay", store, "--until", "\(first["position"] as? Int ?? -1)", "--json")
        #expect(byTime.status == 0 && byPosition.status == 0)
        func objects(_ text: String) throws -> String {
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            return "\(parsed["digest"] ?? "")"
        }
        #expect(try objects(byTime.stdout) == objects(byPosition.stdout))
        #expect(byTime.stdout.contains("Milk") && !byTime.stdout.contains("Bread"))
        let now = try strata("replay", store)
        #expect(now.stdout.contains("Bread"))
    }

    @Test("Usage errors exit 2, with a message on standard error")
    func usage() throws {
        let bad = try strata("replay", "somewhere", "--until", "soon")
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--until"))
        let notAStore = try strata("inspect", "/nonexistent/strata-store")
        #expect(notAStore.status == 2)
        #expect(notAStore.stderr.contains("not a Strata store"))
        #expect(notAStore.stdout.isEmpty)
    }

    @Test("demo, the main job, runs with no arguments and converges")
    func demo() throws {
        let result = try strata("demo")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("converged: every device has the same digest"))
        #expect(result.stdout.contains("first divergent event"))
        #expect(result.stdout.contains("strata inspect phone"))
        #expect(result.stdout.contains("laptop: fetches it on demand: 852 bytes, identical to the phone's"), "\(result.stdout)")
        #expect(result.stdout.contains("assets    1 referenced, held 1 (852 B), remote-only 0 (0 B)"), "\(result.stdout)")
        #expect(result.stderr.isEmpty, "\(result.stderr)")
    }
}

@Suite("strata schema check, the executable")
struct SchemaCheckCommandTests {
    @Test("exit 0 and \"safe\" for a declared rename; exit 1 naming the attribute for an undeclared one; exit 2 for a file that is not a schema")
    func exitCodes() throws {
        let dir = TemporaryDirectory()
        func write(_ name: String, _ json: String) throws -> String {
            let path = dir.sub(name)
            try Data(json.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
        let v1 = try write("v1.json", #"{"entities": [{"name": "Person", "attributes": [{"name": "name", "type": "string"}]}]}"#)
        let v2 = try write("v2.json", #"{"version": 2, "migrations": [{"version": 2, "kind": "renameAttribute", "entity": "Person", "from": "name", "to": "fullName"}], "entities": [{"name": "Person", "attributes": [{"name": "fullName", "type": "string"}]}]}"#)
        let bad = try write("v2-bad.json", #"{"version": 2, "entities": [{"name": "Person", "attributes": [{"name": "fullName", "type": "string"}]}]}"#)
        let strata = try ChildProcess.executable("strata")
        let safe = try ChildProcess.run(strata, ["schema", "check", v1, v2])
        #expect(safe.status == 0, "\(safe.stdout) \(safe.stderr)")
        #expect(safe.stdout.contains("safe: version 1 and version 2 can run side by side"))
        let unsafe = try ChildProcess.run(strata, ["schema", "check", v1, bad, "--json"])
        #expect(unsafe.status == 1, "\(unsafe.stdout) \(unsafe.stderr)")
        let report = try JSONSerialization.jsonObject(with: Data(unsafe.stdout.utf8)) as? [String: Any]
        #expect(report?["safe"] as? Bool == false)
        let findings = report?["findings"] as? [[String: Any]] ?? []
        #expect(findings.contains { $0["subject"] as? String == "Person.name" && $0["severity"] as? String == "error" }, "\(unsafe.stdout)")
        let notSchema = try ChildProcess.run(strata, ["schema", "check", v1, try write("x.json", "[1]")])
        #expect(notSchema.status == 2)
        #expect(notSchema.stderr.contains("x.json"))
    }
}

@Suite("The tools on a store whose schema has migrations")
struct MigratedStoreToolsTests {
    func strata(_ arguments: String..., input: String? = nil) throws -> ChildProcess.Result {
        try ChildProcess.run(try ChildProcess.executable("strata"), arguments, input: input)
    }

    @Test("init, apply, get, log, replay with blame, verify and diff read a store made with a version-3 schema (a rename and a type change) under its stored names")
    func toolsReadStoredNames() throws {
        let dir = TemporaryDirectory()
        let schema = dir.sub("v3.json")
        try Data(#"{"version": 3, "migrations": [{"version": 2, "kind": "renameAttribute", "entity": "Person", "from": "name", "to": "fullName"}, {"version": 3, "kind": "changeType", "entity": "Person", "attribute": "age", "from": "string", "to": "integer"}], "entities": [{"name": "Person", "attributes": [{"name": "fullName", "type": "string"}, {"name": "age", "type": "integer"}]}]}"#.utf8)
            .write(to: URL(fileURLWithPath: schema))
        let store = dir.sub("store")
        let created = try strata("init", store, "--schema", schema)
        #expect(created.status == 0, "\(created.stderr)")
        // Without the app's code a tool writes and reads the stored names: `name`, `age@3`.
        let id = "5a0991a6-0000-4000-8000-000000000003"
        let applied = try strata("apply", store, "-", input: #"{"op": "insert", "entity": "Person", "id": "\#(id)", "values": {"name": "Ada", "age@3": 36}}"# + "\n")
        #expect(applied.status == 0, "\(applied.stderr)")
        let got = try strata("get", store, "Person", id, "--json")
        #expect(got.status == 0 && got.stdout.contains("\"age@3\"") && got.stdout.contains("Ada"), "\(got.stdout) \(got.stderr)")
        let replay = try strata("replay", store, "--object", String(id.prefix(8)), "--json")
        #expect(replay.status == 0, "\(replay.stderr)")
        let history = try #require(try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as? [String: Any])
        #expect((history["blame"] as? [String: Any])?["age@3"] != nil, "blame names the stored key: \(replay.stdout)")
        #expect(try strata("log", store, "--object", String(id.prefix(8))).status == 0)
        #expect(try strata("verify", store).status == 0)
        let copy = dir.sub("copy")
        try FileManager.default.copyItem(atPath: store, toPath: copy)
        let same = try strata("diff", store, copy)
        #expect(same.status == 0, "a copy does not diverge: \(same.stdout) \(same.stderr)")
    }
}
