import ArgumentParser
import Foundation
import Logging
import Strata
@testable import StrataCommands
import StrataServer
import StrataProtocol
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

/// `strata sync --json` and `--from-scratch`: the built executable against a log server on a real
/// port (in this process), as a script would run it.
@Suite("strata sync: --json and --from-scratch, end to end")
struct SyncCommandTests: NoteStoreCLI {
    /// Runs `body` with a log server listening on a free port of 127.0.0.1 (storage in
    /// `directory`, the user alice with the token `alice-secret`).
    func withServer(_ directory: String, _ body: (URL, EmbeddedZoneStorage) async throws -> Void) async throws {
        try await withLogServer(directory, users: try UserDirectory(tokens: ["alice": "alice-secret"]), body)
    }

    /// `strata sync STORE … --json [extra]`: the exit status, the parsed object and stderr.
    func syncJSON(_ store: String, _ url: URL, token: String = "alice-secret", _ extra: String...) async throws -> (status: Int32, json: [String: Any], stderr: String) {
        let result = try await strata(["sync", store, "--server", url.absoluteString, "--zone", "notes", "--token", token, "--json"] + extra)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                                  "not one JSON object: \(result.stdout) (stderr: \(result.stderr))")
        return (result.status, object, result.stderr)
    }

    /// One transaction of `titles.count` inserted notes, with `strata apply`.
    func insert(_ store: String, _ titles: String...) async throws {
        try await insert(store, titles)
    }

    func int(_ json: [String: Any], _ key: String) -> Int? { (json[key] as? NSNumber)?.intValue }

    @Test("--json: one object with the sync's counts, token and pending count, after pushing to a real server and pulling on another device")
    func jsonCounts() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, "milk", "eggs")
            try await insert(phone, "bread")
            // Three local transactions: the schema (recorded by init) and two applies.
            let first = try await syncJSON(phone, url)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.json["ok"] as? Bool == true)
            #expect(first.json["zone"] as? String == "notes")
            #expect(first.json["owner"] == nil)
            #expect(first.json["mode"] as? String == "sync")
            #expect(first.json["error"] == nil)
            #expect(int(first.json, "pushedTransactions") == 3)
            #expect(int(first.json, "pulledTransactions") == 3)   // its own come back…
            #expect(int(first.json, "appliedEvents") == 0)        // …and are skipped
            #expect(int(first.json, "pending") == 0)
            for key in ["bootstraps", "rewinds", "unpushable", "stateUploads", "stateBytes"] {
                #expect(int(first.json, key) == 0, "\(key)")
            }
            #expect((first.json["forks"] as? [Any])?.isEmpty == true)
            let token = try #require(first.json["token"] as? String)
            #expect(!token.isEmpty)

            // A second device pulls the phone's three transactions (and pushes its own schema).
            let laptop = try await makeStore(dir, "laptop")
            let second = try await syncJSON(laptop, url)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(int(second.json, "pushedTransactions") == 1)
            #expect(int(second.json, "pulledTransactions") == 4)
            #expect(try #require(int(second.json, "appliedEvents")) >= 3)  // the three notes, at least
            #expect(int(second.json, "pending") == 0)
            #expect(try await titles(laptop) == ["milk", "eggs", "bread"])

            // Nothing new: nothing pushed or pulled, the same token.
            let again = try await syncJSON(laptop, url)
            #expect(int(again.json, "pushedTransactions") == 0 && int(again.json, "pulledTransactions") == 0)
            #expect(again.json["token"] as? String == second.json["token"] as? String)

            // The output is what every --json prints: sorted keys.
            let raw = try await strata(["sync", laptop, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--json"])
            let keys = raw.stdout.split(separator: "\n").filter { $0.hasPrefix("  \"") }.map { $0.split(separator: "\"")[1] }
            #expect(keys == keys.sorted() && keys.contains("pending") && keys.contains("token"))
        }
    }

    @Test("--json on a failure: the error object {code, message, status}, ok false and exit 2 — a bad credential, a deleted zone")
    func jsonErrors() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, storage in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, "milk")
            let synced = try await syncJSON(phone, url)
            #expect(synced.status == 0, "\(synced.stderr)")

            // A bad credential: 401 unauthorized; the edit made meanwhile is still pending.
            try await insert(phone, "offline")
            let refused = try await syncJSON(phone, url, token: "wrong-secret")
            #expect(refused.status == 2)
            #expect(refused.json["ok"] as? Bool == false)
            let error = try #require(refused.json["error"] as? [String: Any])
            #expect(error["code"] as? String == "unauthorized")
            #expect(int(error, "status") == 401)
            #expect((error["message"] as? String)?.isEmpty == false)
            #expect(int(refused.json, "pending") == 1)
            #expect(int(refused.json, "pushedTransactions") == 0 && int(refused.json, "pulledTransactions") == 0)
            #expect(refused.json["token"] as? String == synced.json["token"] as? String)  // the token the store still holds
            #expect(refused.json["appliedEvents"] == nil && refused.json["forks"] == nil)
            #expect(refused.stderr.contains("unauthorized"))

            // The zone deleted on the server: zoneDeleted, and nothing recreated…
            try await storage.deleteZone(ZoneID(owner: "alice", name: "notes"))
            let deleted = try await syncJSON(phone, url)
            #expect(deleted.status == 2)
            #expect(deleted.json["ok"] as? Bool == false)
            let deletedError = try #require(deleted.json["error"] as? [String: Any])
            #expect(deletedError["code"] as? String == "zoneDeleted")
            #expect(int(deletedError, "status") == 404)
            #expect(int(deleted.json, "pending") == 1)
            #expect(try await storage.zone(ZoneID(owner: "alice", name: "notes")) == nil)

            // …until asked: --recreate-zone brings it back with what the phone holds.
            let recreated = try await syncJSON(phone, url, "--recreate-zone")
            #expect(recreated.status == 0, "\(recreated.stderr)")
            #expect(recreated.json["mode"] as? String == "recreateZone")
            #expect(int(recreated.json, "stateUploads") == 1)
            #expect(try #require(int(recreated.json, "stateBytes")) > 0)
            #expect(int(recreated.json, "pending") == 0)
            let laptop = try await makeStore(dir, "laptop")
            #expect(try await syncJSON(laptop, url).status == 0)
            #expect(try await titles(laptop) == ["milk", "offline"])

            // A store that cannot be opened is an error object too (nothing was sent).
            let missing = try await syncJSON(dir.sub("no-such-store"), url)
            #expect(missing.status == 2)
            #expect((missing.json["error"] as? [String: Any])?["code"] as? String == "store")
            #expect(missing.json["pending"] == nil)
        }
    }

    @Test("--json lists forks: a copied store that edits forks to a new replica, with the reason, both replicas, keptThrough and reauthored")
    func jsonForks() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, "milk")
            #expect(try await syncJSON(phone, url).status == 0)
            let inspected = try await strata(["inspect", phone, "--json"])
            // A copy of the phone (a restored backup): both write under the same replica.
            try FileManager.default.copyItem(atPath: phone, toPath: dir.sub("copy"))
            try await insert(phone, "from the phone")
            #expect(try await syncJSON(phone, url).status == 0)
            try await insert(dir.sub("copy"), "from the copy")
            let copy = try await syncJSON(dir.sub("copy"), url)
            #expect(copy.status == 0, "\(copy.stderr)")
            let forks = try #require(copy.json["forks"] as? [[String: Any]])
            try #require(forks.count == 1)
            let fork = forks[0]
            #expect(fork["reason"] as? String == "forked")
            let old = try #require(fork["oldReplica"] as? String)
            let new = try #require(fork["newReplica"] as? String)
            #expect(old != new)
            #expect(inspected.stdout.contains(old))  // the phone's replica
            #expect(int(fork, "keptThrough") != nil)
            #expect(try #require(int(fork, "reauthored")) >= 1)
            #expect(int(copy.json, "pending") == 0)
            #expect(try await titles(dir.sub("copy")) == ["milk", "from the phone", "from the copy"])
        }
    }

    @Test("--from-scratch pulls the zone again on a device that is up to date, and still pushes its unpushed edit")
    func fromScratch() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, "milk")
            try await insert(phone, "eggs")
            #expect(try await syncJSON(phone, url).status == 0)
            let laptop = try await makeStore(dir, "laptop")
            #expect(try await syncJSON(laptop, url).status == 0)
            #expect(try await syncJSON(phone, url).status == 0)

            // Up to date: a plain sync pulls nothing.
            let plain = try await syncJSON(laptop, url)
            #expect(int(plain.json, "pulledTransactions") == 0)

            // An edit made offline, then a sync from scratch: the whole zone is pulled again (the
            // store skips what it holds), and the edit is pushed, not dropped.
            try await insert(laptop, "offline edit")
            let resync = try await syncJSON(laptop, url, "--from-scratch")
            #expect(resync.status == 0, "\(resync.stderr)")
            #expect(resync.json["mode"] as? String == "fromScratch")
            #expect(resync.json["ok"] as? Bool == true)
            // The zone: the phone's three transactions, the laptop's schema and its edit.
            #expect(int(resync.json, "pulledTransactions") == 5)
            #expect(int(resync.json, "appliedEvents") == 0)
            #expect(int(resync.json, "pushedTransactions") == 1)
            #expect(int(resync.json, "pending") == 0)
            #expect(resync.json["token"] is String)

            // The edit reached the zone: the phone gets it.
            let phoneSync = try await syncJSON(phone, url)
            #expect(int(phoneSync.json, "pulledTransactions") == 1)
            #expect(try await titles(phone) == ["milk", "eggs", "offline edit"])
            #expect(try await titles(laptop) == ["milk", "eggs", "offline edit"])

            // Text mode says the same in a line.
            let text = try await strata(["sync", laptop, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--from-scratch"])
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout.contains("pushed 0 transaction(s), pulled 5 (0 new event(s))"))
        }
    }

    @Test("--within SECONDS: a sync with a deadline; one that is too short says finished false and what is left (exit 0), the next one finishes; a bad value or --watch with it is a usage error")
    func withinDeadline() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, "milk", "eggs")
            // A millisecond: nothing fits after the process's start (the first request is not even sent).
            let short = try await syncJSON(phone, url, "--within", "0.001")
            #expect(short.status == 0, "\(short.stderr)")
            #expect(short.json["ok"] as? Bool == true && short.json["finished"] as? Bool == false, "\(short.json)")
            #expect(try #require(int(short.json, "leftToPush")) >= 1 && short.json["moreToPull"] as? Bool == true)
            let full = try await syncJSON(phone, url, "--within", "60")
            #expect(full.json["finished"] as? Bool == true && int(full.json, "leftToPush") == 0 && full.json["moreToPull"] as? Bool == false,
                    "\(full.json)")
            #expect(try await titles(phone) == ["milk", "eggs"])
            let text = try await strata(["sync", phone, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--within", "0.001"])
            #expect(text.status == 0 && text.stdout.contains("the time was up"), "\(text.stdout)")
        }
        for bad in [["--within", "0"], ["--within", "-1"], ["--within", "nan"], ["--within", "5", "--watch"], ["--within", "5", "--from-scratch"]] {
            let result = try await strata(["sync", "s", "--server", "http://127.0.0.1:1", "--zone", "z", "--token", "t"] + bad)
            #expect(result.status == 2 && result.stderr.contains("--within"), "\(bad): \(result.stderr)")
        }
    }

    @Test("--from-scratch with --recreate-zone is a usage error (exit 2)")
    func fromScratchWithRecreateZone() async throws {
        let sync = try StrataCLI.parseAsRoot(["sync", "s", "--server", "http://127.0.0.1:1", "--zone", "z", "--token", "t", "--from-scratch", "--json"])
        let parsed = try #require(sync as? SyncCommand)
        #expect(parsed.fromScratch && parsed.json && !parsed.recreateZone && parsed.mode == "fromScratch")
        #expect(throws: (any Error).self) {
            try StrataCLI.parseAsRoot(["sync", "s", "--server", "http://127.0.0.1:1", "--zone", "z", "--token", "t", "--from-scratch", "--recreate-zone"])
        }
        let result = try await strata(["sync", "s", "--server", "http://127.0.0.1:1", "--zone", "z", "--token", "t", "--from-scratch", "--recreate-zone"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--from-scratch and --recreate-zone"))
        #expect(result.stdout.isEmpty)
    }

    @Test("The JSON's keys: an owner when the zone is another user's; the error's status only when the server answered")
    func encoding() throws {
        var report = SyncReport()
        report.pushedTransactions = 2
        report.token = "T"
        let success = try JSONOutput.string(SyncReportJSON(zone: ZoneReference("pub", owner: "bob"), mode: "sync", report: report, pending: 0), pretty: false)
        #expect(success == #"{"appliedEvents":0,"bootstraps":0,"finished":true,"forks":[],"leftToPush":0,"mode":"sync","moreToPull":false,"ok":true,"owner":"bob","pending":0,"pulledTransactions":0,"pushedTransactions":2,"rewinds":0,"stateBytes":0,"stateUploads":0,"token":"T","unpushable":0,"zone":"pub"}"#)
        let failure = try JSONOutput.string(SyncReportJSON(zone: ZoneReference("notes"), mode: "fromScratch",
                                                           error: .init(SyncError(.transport, "connection refused")),
                                                           pushed: 0, pulled: 0, token: nil, pending: 3), pretty: false)
        #expect(failure == #"{"error":{"code":"transport","message":"connection refused"},"mode":"fromScratch","ok":false,"pending":3,"pulledTransactions":0,"pushedTransactions":0,"zone":"notes"}"#)
    }
}
