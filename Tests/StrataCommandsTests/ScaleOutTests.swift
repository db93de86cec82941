import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// Several `strata serve` processes (the real executable) on one PostgreSQL database (a real
/// server: the tests' cluster), with devices (`strata sync`) spread across them, as an operator
/// scales the log server out behind a load balancer.
@Suite("strata serve --postgres: several instances on one database")
struct ScaleOutTests: NoteStoreCLI {
    /// `strata sync STORE --json` against `url` as alice: the exit status and the parsed object.
    func sync(_ store: String, _ url: URL) async throws -> (status: Int32, json: [String: Any], stderr: String) {
        let result = try await strata(["sync", store, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--json"])
        let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
        return (result.status, json, result.stderr)
    }

    /// The users file with alice.
    func usersFile(_ dir: TemporaryDirectory) throws -> String {
        let path = dir.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// `count` instances of `strata serve --postgres URL`, each started once it follows the
    /// others' changes (its log says so): before that a push elsewhere would not wake its polls.
    func instances(_ count: Int, database: String, users: String, scratch: String, arguments: [String] = []) async throws -> [ServeChild] {
        var started: [ServeChild] = []
        for _ in 0..<count {
            started.append(try ServeChild(storage: ["--postgres", database], users: users, scratch: scratch, arguments: arguments))
        }
        for server in started {
            var following = false
            for _ in 0..<3000 where !following {
                following = server.log.contains("following the changes of other instances")
                if !following { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(following, "an instance never followed the others' changes: \(server.stderr)")
        }
        return started
    }

    /// A GET as alice, with a timeout long enough for a 60 s long poll: the status and body.
    func get(_ url: URL, _ path: String, token: String? = "alice-secret") async throws -> (status: Int, body: Data, shuttingDown: String?) {
        var request = URLRequest(url: try #require(URL(string: url.absoluteString + path)))
        request.timeoutInterval = 120
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, data, http.value(forHTTPHeaderField: "Strata-Shutting-Down"))
    }

    /// Waits until the instance's gauge or counter `name` is at least `value` (parsed as a
    /// number: Prometheus prints `1.0`); whether it got there.
    func waitForMetric(_ server: ServeChild, _ name: String, atLeast value: Double) async throws -> Bool {
        for _ in 0..<3000 {
            let metrics = try await get(server.url, "/metrics", token: nil)
            let reached = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").contains { line in
                line.hasPrefix(name + " ") && (Double(line.split(separator: " ").last ?? "") ?? 0) >= value
            }
            if reached { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test("three instances: a push to one wakes a long poll waiting on another, and devices syncing through different instances converge")
    func threeInstances() async throws {
        let dir = TemporaryDirectory()
        let database = try PostgresCluster.shared().createDatabase()
        let servers = try await instances(3, database: database, users: try usersFile(dir), scratch: dir.path)
        defer { for server in servers { server.kill9() } }

        let phone = try await makeStore(dir, "phone")
        try await insert(phone, ["milk"])
        let first = try await sync(phone, servers[0].url)
        #expect(first.status == 0, "\(first.stderr)")
        let token = try #require(first.json["token"] as? String)

        // A long poll waits on the third instance; the laptop pushes through the second.
        let pollURL = servers[2].url
        let poll = Task { try await get(pollURL, "/v1/zones/notes/changes?after=\(token)&wait=60") }
        #expect(try await waitForMetric(servers[2], "strata_long_poll_waiters", atLeast: 1), "the long poll never reached the server")
        let laptop = try await makeStore(dir, "laptop")
        try await insert(laptop, ["bread"])
        let pushed = try await sync(laptop, servers[1].url)
        #expect(pushed.status == 0, "\(pushed.stderr)")
        // Woken by the push on another instance (its transactions in the answer), not by the
        // 60 s wait running out or a shutdown.
        let polled = try await poll.value
        #expect(polled.status == 200 && !polled.body.isEmpty && polled.shuttingDown == nil)

        // Three devices, each on its own instance, edit and sync until they agree.
        let tablet = try await makeStore(dir, "tablet")
        try await insert(tablet, ["eggs"])
        let devices = [(phone, servers[0]), (laptop, servers[1]), (tablet, servers[2])]
        for _ in 0..<2 {
            for (store, server) in devices {
                let synced = try await sync(store, server.url)
                #expect(synced.status == 0 && (synced.json["pending"] as? NSNumber)?.intValue == 0, "\(synced.json) \(synced.stderr)")
            }
        }
        for (store, _) in devices { #expect(try await titles(store) == ["milk", "bread", "eggs"]) }
        // An instance on PostgreSQL shuts down on SIGTERM like one on a data directory.
        let stopped = await servers[1].stop(SIGTERM, limit: 60)
        #expect(stopped?.status == 0, "\(servers[1].stderr)")
    }

    @Test("an instance killed (SIGKILL) in the middle of a device's pushes loses nothing acknowledged: the device goes on through another instance, and another device gets everything")
    func instanceKilledMidPush() async throws {
        let dir = TemporaryDirectory()
        let database = try PostgresCluster.shared().createDatabase()
        // Small bodies, so that the phone's history goes up in many pushes.
        let servers = try await instances(2, database: database, users: try usersFile(dir), scratch: dir.path,
                                          arguments: ["--limit", "maxBodyBytes=16384"])
        defer { for server in servers { server.kill9() } }
        let phone = try await makeStore(dir, "phone")
        var expected: Set<String> = []
        for batch in 0..<24 {
            let titles = (0..<60).map { "note \(batch)-\($0) " + String(repeating: "x", count: 200) }
            try await insert(phone, titles)
            expected.formUnion(titles)
        }
        let killedURL = servers[0].url
        let interrupted = Task { try await sync(phone, killedURL).status }
        // Killed once the instance has acknowledged part of the history.
        #expect(try await waitForMetric(servers[0], "strata_push_transactions_total", atLeast: 1))
        servers[0].kill9()
        // Failed or finished: either way nothing acknowledged may be lost.
        let status = try await interrupted.value
        print("the sync through the killed instance exited \(status) (non-zero: it was cut off mid-push)")

        let failover = try await sync(phone, servers[1].url)
        #expect(failover.status == 0 && (failover.json["pending"] as? NSNumber)?.intValue == 0, "\(failover.json) \(failover.stderr)")
        let laptop = try await makeStore(dir, "laptop")
        let pulled = try await sync(laptop, servers[1].url)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try await titles(laptop) == expected)
        #expect(try await titles(phone) == expected)
    }

    @Test("strata migrate: a stopped server's data directory copied into PostgreSQL; the devices go on through strata serve --postgres with the tokens they hold (no bootstrap, no state upload)")
    func migrateThenServe() async throws {
        let dir = TemporaryDirectory()
        let users = try usersFile(dir)
        let data = dir.sub("server-data")
        let embedded = try ServeChild(data: data, users: users, scratch: dir.path, arguments: ["--retain", "2", "--compact-every", "1"])
        let phone = try await makeStore(dir, "phone")
        for title in ["milk", "eggs", "bread", "tea"] {
            try await insert(phone, [title])
            let synced = try await sync(phone, embedded.url)
            #expect(synced.status == 0, "\(synced.stderr)")
        }
        let stopped = await embedded.stop(SIGTERM)
        #expect(stopped?.status == 0, "\(embedded.stderr)")

        let database = try PostgresCluster.shared().createDatabase()
        let migrated = try await strata(["migrate", "--data", data, "--postgres", database, "--json"])
        #expect(migrated.status == 0, "\(migrated.stdout) \(migrated.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(migrated.stdout.utf8)) as? [String: Any])
        #expect(report["copied"] as? [String] == ["alice/notes"])
        // Run again: nothing to copy, everything verified.
        let again = try await strata(["migrate", "--data", data, "--postgres", database, "--json"])
        #expect(again.status == 0 && again.stdout.contains("\"alreadyThere\""), "\(again.stdout) \(again.stderr)")

        let servers = try await instances(1, database: database, users: users, scratch: dir.path)
        defer { for server in servers { server.kill9() } }
        try await insert(phone, ["jam"])
        let resumed = try await sync(phone, servers[0].url)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect((resumed.json["bootstraps"] as? NSNumber)?.intValue ?? 0 == 0 && (resumed.json["stateUploads"] as? NSNumber)?.intValue ?? 0 == 0,
                "\(resumed.json)")
        #expect((resumed.json["pushedTransactions"] as? NSNumber)?.intValue == 1)
        let laptop = try await makeStore(dir, "laptop")
        #expect(try await sync(laptop, servers[0].url).status == 0)
        #expect(try await titles(laptop) == ["milk", "eggs", "bread", "tea", "jam"])
    }
}
