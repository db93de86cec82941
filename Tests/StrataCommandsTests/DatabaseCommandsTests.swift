import Foundation
import Logging
import Strata
@testable import StrataCommands
import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// The tools on a database directory (several zones), `strata sync` of a database, and `strata
/// zones` / `strata share` between two users: the built executable against a log server on a
/// real port, as a script would run it.
@Suite("strata on databases: reading tools per zone, database sync, zones and sharing")
struct DatabaseCommandsTests: NoteStoreCLI {
    /// A log server on a free port of 127.0.0.1 with the users alice and bob (tokens
    /// `alice-secret`, `bob-secret`).
    func withServer(_ directory: String, _ body: (URL) async throws -> Void) async throws {
        try await withLogServer(directory, users: try UserDirectory(tokens: ["alice": "alice-secret", "bob": "bob-secret"])) { url, _ in try await body(url) }
    }

    /// A database of notes with the zones `default` and `extra` zones, one note per title in each.
    @discardableResult
    func makeDatabase(_ path: String, _ notes: [ZoneReference: [String]]) async throws -> [String: ObjectID] {
        let database = try await Database.open(at: path, schema: try Schema.fromJSON(Data(Self.schema.utf8)))
        var ids: [String: ObjectID] = [:]
        for zone in notes.keys where database.store(for: zone) == nil { try await database.addZone(zone) }
        for (zone, titles) in notes {
            let made = try await database.transaction { tx in
                try titles.map { ($0, try tx.insert("Note", ["title": .string($0)], in: zone)) }
            }
            for (title, id) in made { ids[title] = id }
        }
        try await database.close()
        return ids
    }

    func run(_ arguments: String...) async throws -> ChildProcess.Result { try await strata(arguments) }

    func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not one JSON object: \(text)")
    }

    func array(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "not a JSON array: \(text)")
    }

    func title(_ object: [String: Any]) -> String? { (object["values"] as? [String: Any])?["title"] as? String }

    @Test("inspect, log, export, get and verify read every zone of a database, tagged with its zone, and --zone restricts them to one")
    func readingTools() async throws {
        let dir = TemporaryDirectory()
        let db = dir.sub("db")
        let ids = try await makeDatabase(db, [ZoneReference("default"): ["milk", "eggs"], ZoneReference("work"): ["report"]])

        let inspected = try await run("inspect", db, "--json")
        #expect(inspected.status == 0, "\(inspected.stderr)")
        let inspection = try object(inspected.stdout)
        #expect(inspection["defaultZone"] as? String == "default")
        let zones = try #require(inspection["zones"] as? [[String: Any]])
        #expect(zones.compactMap { $0["zone"] as? String }.sorted() == ["default", "work"])
        #expect(zones.allSatisfy { ($0["events"] as? Int ?? 0) > 0 }, "each zone's section has its counts")
        let text = try await run("inspect", db)
        #expect(text.stdout.contains("== zone default (default) ==") && text.stdout.contains("== zone work =="), "\(text.stdout)")
        let one = try object(try await run("inspect", db, "--zone", "work", "--json").stdout)
        #expect((one["zones"] as? [[String: Any]])?.compactMap { $0["zone"] as? String } == ["work"])

        let logged = try await run("log", db, "--json", "--kind", "insert")
        #expect(logged.status == 0, "\(logged.stderr)")
        let lines = try logged.stdout.split(separator: "\n").map { try object(String($0)) }
        #expect(lines.count == 3)
        #expect(Set(lines.compactMap { $0["zone"] as? String }) == ["default", "work"])
        let workLog = try await run("log", db, "--zone", "work", "--kind", "insert")
        #expect(workLog.stdout.split(separator: "\n").count == 1 && workLog.stdout.hasPrefix("[work] "), "\(workLog.stdout)")

        let exported = try object(try await run("export", db).stdout)
        let objects = try #require(exported["objects"] as? [[String: Any]])
        #expect(Dictionary(uniqueKeysWithValues: objects.compactMap { o in title(o).map { ($0, o["zone"] as? String ?? "-") } })
                == ["milk": "default", "eggs": "default", "report": "work"])
        #expect((exported["zones"] as? [[String: Any]])?.count == 2)
        let workExport = try object(try await run("export", db, "--zone", "work").stdout)
        #expect((workExport["objects"] as? [[String: Any]])?.compactMap(title) == ["report"])

        let report = try #require(ids["report"])
        let got = try await run("get", db, "Note", report.description, "--json")
        #expect(got.status == 0, "\(got.stderr)")
        let gotObject = try object(got.stdout)
        #expect(gotObject["zone"] as? String == "work" && title(gotObject) == "report")
        let gotText = try await run("get", db, "Note", String(report.description.prefix(8)))
        #expect(gotText.stdout.hasPrefix("[work] "), "says which zone holds it: \(gotText.stdout)")
        let all = try array(try await run("get", db, "Note", "--json").stdout)
        #expect(all.count == 3)
        let inDefault = try await run("get", db, "Note", report.description, "--zone", "default")
        #expect(inDefault.status == 1, "the object is not in that zone: \(inDefault.stderr)")
        let unknownZone = try await run("get", db, "Note", "--zone", "nowhere")
        #expect(unknownZone.status == 2 && unknownZone.stderr.contains("holds no such zone"), "\(unknownZone.stderr)")

        let verified = try await run("verify", db, "--json")
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        #expect((try object(verified.stdout)["zones"] as? [[String: Any]])?.compactMap { $0["zone"] as? String }.sorted() == ["default", "work"])
        let repairAll = try await run("verify", db, "--repair", "--yes")
        #expect(repairAll.status == 2 && repairAll.stderr.contains("needs --zone"), "\(repairAll.stderr)")

        // A plain store reads as before: no zone field; --zone is refused.
        let store = try await makeStore(dir, "store")
        try await insert(store, ["plain"])
        let plain = try object(try await run("export", store).stdout)
        #expect((plain["objects"] as? [[String: Any]])?.allSatisfy { $0["zone"] == nil } == true)
        #expect(plain["zones"] == nil && plain["replica"] != nil)
        let plainZone = try await run("inspect", store, "--zone", "work")
        #expect(plainZone.status == 2 && plainZone.stderr.contains("not a database"), "\(plainZone.stderr)")
    }

    @Test("A database whose database.json is damaged is refused by every tool with the file named, exit 2")
    func damagedManifest() async throws {
        let dir = TemporaryDirectory()
        let db = dir.sub("db")
        try await makeDatabase(db, [ZoneReference("default"): ["milk"]])
        try Data("{\"format\": 1, \"zones\": [".utf8).write(to: URL(fileURLWithPath: db + "/database.json"))
        for arguments in [["inspect", db], ["log", db], ["export", db], ["get", db, "Note"],
                          ["sync", db, "--server", "http://127.0.0.1:9", "--token", "t"]] {
            let result = try await strata(arguments)
            #expect(result.status == 2, "\(arguments[0]): \(result.stdout)")
            #expect(result.stderr.contains("database.json does not decode"), "\(arguments[0]): \(result.stderr)")
        }
    }

    @Test("strata sync --omit: a database's zones come without what the mask leaves out, a changed mask downloads them again, a malformed one is refused naming it (exit 2)")
    func syncWithADownloadMask() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            let server = url.absoluteString
            let alice = dir.sub("alice")
            try await makeDatabase(alice, [ZoneReference("default"): ["private"], ZoneReference("groceries"): ["milk", "eggs"]])
            #expect(try await run("sync", alice, "--server", server, "--token", "alice-secret").status == 0)

            let tablet = dir.sub("tablet")
            try await makeDatabase(tablet, [ZoneReference("default"): []])
            let masked = try await run("sync", tablet, "--server", server, "--token", "alice-secret", "--omit", "Note.title", "--json")
            #expect(masked.status == 0, "\(masked.stderr)")
            let notes = try array(try await run("get", tablet, "Note", "--json").stdout)
            #expect(notes.count == 3 && notes.allSatisfy { (title($0) ?? "") == "" }, "a masked attribute reads as its default: \(notes)")
            let none = try await run("sync", tablet, "--server", server, "--token", "alice-secret", "--omit", "Note", "--json")
            #expect(none.status == 0, "\(none.stderr)")
            #expect(try array(try await run("get", tablet, "Note", "--json").stdout).isEmpty, "the zones were not downloaded again with the new mask")
            // The tools read a store holding withheld placeholders.
            for tool in [["verify", tablet], ["inspect", tablet, "--json"], ["log", tablet, "--kind", "withheld"], ["replay", tablet + "/zones/own/default"], ["verify", tablet + "/zones/own/default"]] {
                let result = try await strata(tool)
                #expect(result.status == 0, "\(tool): \(result.stderr)")
            }
            #expect(try await run("log", tablet, "--kind", "withheld").stdout.contains("withheld"))
            #expect(try await run("sync", tablet, "--server", server, "--token", "alice-secret").status == 0)
            let all = try array(try await run("get", tablet, "Note", "--json").stdout)
            #expect(Set(all.compactMap(title)) == ["private", "milk", "eggs"])

            let bad = try await run("sync", tablet, "--server", server, "--token", "alice-secret", "--omit", "Note.title.x")
            #expect(bad.status == 2 && bad.stderr.contains("--omit"), "\(bad.stderr)")
        }
    }

    @Test("Database sync reports per zone; share, zones list/show, accept, leave and revoke work end to end between alice and bob")
    func syncAndSharing() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            let server = url.absoluteString
            let alice = dir.sub("alice")
            try await makeDatabase(alice, [ZoneReference("default"): ["private"], ZoneReference("groceries"): ["milk", "eggs"]])
            let first = try await run("sync", alice, "--server", server, "--token", "alice-secret", "--json")
            #expect(first.status == 0, "\(first.stderr)")
            let synced = try object(first.stdout)
            #expect(synced["ok"] as? Bool == true)
            let zones = try #require(synced["zones"] as? [String: [String: Any]])
            #expect(Set(zones.keys) == ["default", "groceries"])
            #expect(zones["groceries"]?["pushedTransactions"] as? Int ?? 0 >= 1)
            #expect(zones["groceries"]?["pending"] as? Int == 0)
            #expect((synced["failures"] as? [String: Any])?.isEmpty == true)
            #expect(synced["added"] is [Any] && synced["removed"] is [Any] && synced["pendingShares"] is [Any])

            // alice shares groceries with bob.
            let granted = try await run("share", "grant", "groceries", "--with", "bob", "--access", "readWrite", "--server", server, "--token", "alice-secret", "--json")
            #expect(granted.status == 0, "\(granted.stderr)")
            let participants = try #require(try object(granted.stdout)["participants"] as? [[String: Any]])
            #expect(participants.count == 1 && participants.first?["user"] as? String == "bob" && participants.first?["accepted"] as? Bool == false)

            // bob sees it, not yet accepted, and accepts it.
            let listed = try array(try await run("zones", "list", "--server", server, "--token", "bob-secret", "--json").stdout)
            let shared = try #require(listed.first { $0["owner"] as? String == "alice" && $0["name"] as? String == "groceries" })
            #expect(shared["role"] as? String == "readWrite" && shared["accepted"] as? Bool == false)
            let accepted = try await run("share", "accept", "groceries", "--owner", "alice", "--server", server, "--token", "bob-secret", "--json")
            #expect(accepted.status == 0, "\(accepted.stderr)")
            let shown = try object(try await run("zones", "show", "groceries", "--server", server, "--token", "alice-secret", "--json").stdout)
            #expect((shown["participants"] as? [[String: Any]])?.first?["accepted"] as? Bool == true)

            // bob's database adds the zone on its next sync, and get finds alice's note in it.
            let bob = dir.sub("bob")
            try await makeDatabase(bob, [ZoneReference("default"): ["bob's"]])
            let bobSync = try object(try await run("sync", bob, "--server", server, "--token", "bob-secret", "--json").stdout)
            #expect((bobSync["added"] as? [String]) == ["alice/groceries"], "\(bobSync)")
            #expect((bobSync["zones"] as? [String: Any])?["alice/groceries"] != nil)
            let milk = try array(try await run("get", bob, "Note", "--zone", "alice/groceries", "--json").stdout)
            #expect(Set(milk.compactMap(title)) == ["milk", "eggs"] && milk.allSatisfy { $0["zone"] as? String == "alice/groceries" })

            // One zone of a database, through its engine.
            let oneZone = try object(try await run("sync", bob, "--zone", "alice/groceries", "--server", server, "--token", "bob-secret", "--json").stdout)
            #expect((oneZone["zones"] as? [String: Any]).map { Array($0.keys) } == ["alice/groceries"])

            // bob leaves: his database sets the zone aside on the next sync; inspect lists it as lost.
            let left = try await run("share", "leave", "alice/groceries", "--server", server, "--token", "bob-secret", "--json")
            #expect(left.status == 0, "\(left.stderr)")
            let afterLeave = try object(try await run("sync", bob, "--server", server, "--token", "bob-secret", "--json").stdout)
            let removed = try #require(afterLeave["removed"] as? [[String: Any]])
            #expect(removed.first?["zone"] as? String == "alice/groceries" && removed.first?["reason"] as? String == "revoked", "\(afterLeave)")
            let lost = try object(try await run("inspect", bob, "--json").stdout)
            #expect((lost["lost"] as? [[String: Any]])?.first?["zone"] as? String == "alice/groceries")

            // alice revokes the grant: nobody is left.
            let revoked = try await run("share", "revoke", "groceries", "--from", "bob", "--server", server, "--token", "alice-secret", "--json")
            #expect(revoked.status == 0, "\(revoked.stderr)")
            #expect((try object(revoked.stdout)["participants"] as? [Any])?.isEmpty == true)

            // Errors of the server are exit 2 with what was asked: bob cannot share alice's zone.
            let stranger = try await run("zones", "show", "groceries", "--owner", "alice", "--server", server, "--token", "bob-secret")
            #expect(stranger.status == 2 && stranger.stderr.contains("describing zone alice/groceries"), "\(stranger.stderr)")
        }
    }

    @Test("zones set --min-schema-version: the owner raises a zone's minimum, zones show says it, a sync of an older app fails on that zone with schemaTooOld and succeeds once it is lowered; a zone that does not exist is not created")
    func minimumSchemaVersion() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            let server = url.absoluteString
            let alice = dir.sub("alice")
            _ = try await makeDatabase(alice, [ZoneReference("default"): ["private"], ZoneReference("groceries"): ["milk"]])
            #expect(try await run("sync", alice, "--server", server, "--token", "alice-secret").status == 0)
            let set = try await run("zones", "set", "groceries", "--min-schema-version", "3", "--server", server, "--token", "alice-secret")
            #expect(set.status == 0, "\(set.stderr)")
            #expect(set.stdout.contains("syncs with app schema version 3 and later"))
            let shown = try await run("zones", "show", "groceries", "--server", server, "--token", "alice-secret")
            #expect(shown.stdout.contains("syncs with app schema version 3 and later"), "\(shown.stdout)")
            // A new note makes the zone one to sync (a database syncs the zones with edits or changes).
            _ = try await makeDatabase(alice, [ZoneReference("groceries"): ["bread"]])
            let refused = try await run("sync", alice, "--server", server, "--token", "alice-secret", "--json")
            #expect(refused.status != 0)
            #expect(refused.stdout.contains("schemaTooOld") || refused.stderr.contains("schemaTooOld"), "\(refused.stdout) \(refused.stderr)")
            #expect(try await run("zones", "set", "groceries", "--min-schema-version", "1", "--server", server, "--token", "alice-secret").status == 0)
            #expect(try await run("sync", alice, "--server", server, "--token", "alice-secret").status == 0)
            let typo = try await run("zones", "set", "grocerise", "--min-schema-version", "2", "--server", server, "--token", "alice-secret")
            #expect(typo.status == 2, "\(typo.stdout)")
            let listed = try array(try await run("zones", "list", "--server", server, "--token", "alice-secret", "--json").stdout)
            #expect(!listed.contains { $0["name"] as? String == "grocerise" }, "a zone was created by a typo")
            let zero = try await run("zones", "set", "groceries", "--min-schema-version", "0", "--server", server, "--token", "alice-secret")
            #expect(zero.status == 2)
        }
    }
}
