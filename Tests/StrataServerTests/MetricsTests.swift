import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// `/metrics`, request IDs and JSON logs, through the real router and storage.
@Suite("Observability: /metrics, request IDs, JSON logs")
struct MetricsTests {
    /// The samples of a Prometheus text exposition by series (`name{labels}`), failing on any line
    /// that is neither a `# HELP`/`# TYPE` comment nor `series value`.
    static func parse(_ text: String) throws -> [String: Double] {
        var samples: [String: Double] = [:]
        let sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})?) (\S+)$/
        let comment = /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]*( .*)?$/
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.wholeMatch(of: comment) != nil { continue }
            guard let match = line.wholeMatch(of: sample), let value = Double(match.output.4 == "+Inf" ? "inf" : String(match.output.4)) else {
                throw ServeTestError("not Prometheus text: \(line)")
            }
            samples[String(match.output.1)] = value
        }
        return samples
    }

    @Test("/metrics answers without a token in Prometheus text, and its counters move with pushes and pulls")
    func metricsMove() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes")
            let before = try await client.execute(uri: "/metrics", method: .get)
            #expect(before.status == .ok)
            #expect(before.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
            let first = try Self.parse(String(buffer: before.body))
            #expect(first["strata_push_transactions_total"] == 0)

            let push = try await client.push("notes", [transaction(ReplicaID(rawValue: 3), 1...1), transaction(ReplicaID(rawValue: 3), 2...2)])
            #expect(push.status == .ok)
            let pull = try await client.execute(uri: "/v1/zones/notes/changes", method: .get, headers: auth(Token.alice))
            #expect(pull.status == .ok)
            let refused = try await client.execute(uri: "/v1/zones", method: .get, headers: auth("no-such-token"))
            #expect(refused.status == .unauthorized)

            let after = try Self.parse(String(buffer: try await client.execute(uri: "/metrics", method: .get).body))
            #expect(after["strata_push_transactions_total"] == 2)
            #expect((after["strata_push_bytes_total"] ?? 0) > 0)
            #expect(after["strata_pull_transactions_total"] == 2)
            #expect(after["strata_auth_failures_total"] == 1)
            #expect(after[#"strata_http_requests_total{route="/v1/zones/{zone}/push",method="POST",status="200"}"#] == 1)
            #expect(after[#"strata_http_requests_total{route="/v1/zones",method="GET",status="401"}"#] == 1)
            #expect(after[#"strata_http_request_duration_seconds_count{route="/v1/zones/{zone}/push",method="POST"}"#] == 1)
            #expect(after["strata_long_poll_waiters"] == 0)
            // The push was one log record of two transactions, made durable by one fsync.
            let commits = (after["strata_group_commit_transactions_count"] ?? 0) - (first["strata_group_commit_transactions_count"] ?? 0)
            let committed = (after["strata_group_commit_transactions_sum"] ?? 0) - (first["strata_group_commit_transactions_sum"] ?? 0)
            let syncs = (after["strata_fsync_duration_seconds_count"] ?? 0) - (first["strata_fsync_duration_seconds_count"] ?? 0)
            #expect(commits == 1 && committed == 2 && syncs == 1, "commits \(commits), transactions \(committed), fsyncs \(syncs)")
        }
    }

    @Test("Every answer carries an X-Request-ID: a sane incoming one echoed, an insane one replaced")
    func requestIDs() async throws {
        let server = try TestServer()
        try await server.test { client in
            let echoed = try await client.execute(uri: "/health", method: .get, headers: [HTTPField.Name("X-Request-ID")!: "proxy-42.a"])
            #expect(echoed.headers[HTTPField.Name("X-Request-ID")!] == "proxy-42.a")
            let replaced = try await client.execute(uri: "/health", method: .get, headers: [HTTPField.Name("X-Request-ID")!: "a b\"c"])
            let id = try #require(replaced.headers[HTTPField.Name("X-Request-ID")!])
            #expect(id != "a b\"c" && id.count == 32)
        }
    }

    @Test("JSON logs: one JSON object per line with timestamp, level, label, message, metadata; a request's lines carry its ID")
    func jsonLogs() async throws {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "strata.server") { label in
            JSONLogHandler(label: label, level: .debug, metadataProvider: RequestID.metadataProvider) { line in
                lines.withLock { $0.append(line) }
            }
        }
        logger.logLevel = .debug
        let directory = TemporaryDirectory(#function)
        let storage = try EmbeddedZoneStorage(directory: directory.sub("data"))
        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0), logger: logger)
        try await app.buildApplication().test(.router) { client in
            let response = try await client.execute(uri: "/v1/zones", method: .get,
                                                    headers: [.authorization: "Bearer wrong", HTTPField.Name("X-Request-ID")!: "req-7"])
            #expect(response.status == .unauthorized)
        }
        try await storage.close()
        let logged = lines.withLock { $0 }
        #expect(!logged.isEmpty)
        var tagged = 0
        for line in logged {
            #expect(line.hasSuffix("\n") && line.dropLast().firstIndex(of: "\n") == nil)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
            #expect(object["timestamp"] is String && object["level"] is String && object["label"] as? String == "strata.server")
            #expect(object["message"] is String)
            let metadata = try #require(object["metadata"] as? [String: Any])
            if metadata["request_id"] as? String == "req-7" { tagged += 1 }
        }
        // The gatekeeper's "request refused" line was written while answering the request.
        #expect(tagged >= 1)
    }

    @Test("JSON string escaping keeps each log line one valid JSON object")
    func escaping() throws {
        var line = ""
        JSONLogHandler.appendString("quote\" back\\ newline\n tab\t bell\u{07} é", to: &line)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(line)]".utf8)) as? [String]
        #expect(decoded == ["quote\" back\\ newline\n tab\t bell\u{07} é"])
    }
}

struct ServeTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
