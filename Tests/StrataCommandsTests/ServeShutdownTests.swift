import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// `strata serve` as an operator runs it: the built executable on a free port, stopped with
/// SIGTERM while a long poll waits.
@Suite("strata serve: prompt shutdown on SIGTERM, nothing acknowledged lost")
struct ServeShutdownTests: NoteStoreCLI {
    typealias Server = ServeChild

    /// `strata sync STORE --json` against `url` as alice: the parsed object.
    func sync(_ store: String, _ url: URL) async throws -> [String: Any] {
        let result = try await strata(["sync", store, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--json"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                            "not one JSON object: \(result.stdout) (stderr: \(result.stderr))")
    }

    /// An HTTP answer: its status, body and the pull headers.
    struct Answer: Sendable {
        var status: Int
        var body: Data
        var nextToken: String?
        var moreComing: String?
        var shuttingDown: String?
    }

    /// A GET as alice (or without a token), with a timeout long enough for a 60 s long poll.
    func get(_ url: URL, _ path: String, token: String? = "alice-secret") async throws -> Answer {
        var request = URLRequest(url: try #require(URL(string: url.absoluteString + path)))
        request.timeoutInterval = 120
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return Answer(status: http.statusCode, body: data, nextToken: http.value(forHTTPHeaderField: "Strata-Next-Token"),
                      moreComing: http.value(forHTTPHeaderField: "Strata-More-Coming"),
                      shuttingDown: http.value(forHTTPHeaderField: "Strata-Shutting-Down"))
    }

    @Test("SIGTERM with a 60 s long poll in flight: the poll is answered empty and marked as a shutdown answer, the process exits 0, and the pushed transaction survives a restart")
    func sigtermWithLongPoll() async throws {
        let dir = TemporaryDirectory()
        let users = dir.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: users))
        let data = dir.sub("server-data")

        let server = try Server(data: data, users: users, scratch: dir.path)
        defer { server.kill9() }

        let health = try await get(server.url, "/health", token: nil)
        #expect(health.status == 200)
        #expect(String(decoding: health.body, as: UTF8.self).contains("\"ok\""))
        #expect(try await get(server.url, "/ready", token: nil).status == 200)

        // A device pushes (and is acknowledged), then a long poll waits past the zone's end.
        let phone = try await makeStore(dir, "phone")
        let applied = try await strata(["apply", phone, "-"], input: #"{"op": "insert", "entity": "Note", "values": {"title": "milk"}}"#)
        #expect(applied.status == 0, "\(applied.stderr)")
        let synced = try await sync(phone, server.url)
        #expect(synced["ok"] as? Bool == true)
        #expect((synced["pushedTransactions"] as? NSNumber)?.intValue == 2)
        #expect((synced["pending"] as? NSNumber)?.intValue == 0)
        let token = try #require(synced["token"] as? String)

        let url = server.url
        let poll = Task { () throws -> Answer in
            try await get(url, "/v1/zones/notes/changes?after=\(token)&wait=60")
        }
        // The poll must be waiting on the server before the signal: wait for that cause (the
        // server's gauge of waiting long polls), not for a time — on a loaded machine the poll
        // can take seconds to connect.
        var waiting = false
        for _ in 0..<3000 where !waiting {
            let metrics = try await get(url, "/metrics", token: nil)
            // "strata_long_poll_waiters 1.0": the gauge's value, however it is printed.
            waiting = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").contains { line in
                line.hasPrefix("strata_long_poll_waiters ") && (Double(line.split(separator: " ").last ?? "") ?? 0) >= 1
            }
            if !waiting { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(waiting, "the long poll never reached the server")

        let stopped = await server.stop(SIGTERM, limit: 120)
        let exit = try #require(stopped, "strata serve did not exit within 120 s of SIGTERM: \(server.stderr)")
        #expect(exit.status == 0, "\(server.stderr)")
        print("strata serve exited \(exit.seconds) s after SIGTERM with a long poll in flight")

        // Answered because the server shut down, not because the 60 s wait ran out: the header
        // says so, which needs no timing (timed assertions fail on a loaded machine).
        let polled = try await poll.value
        #expect(polled.shuttingDown == "true")
        #expect(polled.status == 200)
        #expect(polled.body.isEmpty)
        #expect(polled.nextToken == token)
        #expect(polled.moreComing == "false")

        // Restarted on the same directory: the zone ends where it did, and a new device pulls the note.
        let restarted = try Server(data: data, users: users, scratch: dir.path)
        defer { restarted.kill9() }
        let zone = try await get(restarted.url, "/v1/zones/notes")
        #expect(zone.status == 200)
        let description = try #require(try JSONSerialization.jsonObject(with: zone.body) as? [String: Any])
        #expect(description["token"] as? String == token)
        let laptop = try await makeStore(dir, "laptop")
        #expect(try await sync(laptop, restarted.url)["ok"] as? Bool == true)
        #expect(try await titles(laptop) == ["milk"])
        let second = await restarted.stop(SIGINT, limit: 60)
        #expect(second?.status == 0, "\(restarted.stderr)")
    }
}
