import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import StrataServer
import StrataProtocol
import Testing
import StrataCore

/// Tools/openapi/openapi.yaml and the router name the same operations. Tools/scripts/schemathesis.sh
/// checks the answers of the documented operations; this checks that each of them is served (a
/// route removed or renamed would only show there as a documented `404`), and that the documented
/// paths have no other method (one added without being documented).
@Suite("Tools/openapi/openapi.yaml and the router")
struct OpenAPIDocumentTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tools/openapi/openapi.yaml")

    static let methods: [HTTPRequest.Method] = [.get, .put, .post, .delete, .patch]

    /// The document's operations: the paths under `paths:` and the methods under each. A
    /// line-based reading of this one file's layout (two-space indents), not a YAML parser.
    static func operations() throws -> [(method: HTTPRequest.Method, path: String)] {
        let text = try String(contentsOf: document, encoding: .utf8)
        var operations: [(method: HTTPRequest.Method, path: String)] = []
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line == "paths:" {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if let first = line.first, first != " ", first != "#" { break }  // the next top-level key
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if let current = path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"),
                      let method = methods.first(where: { $0.rawValue.lowercased() == line.trimmingCharacters(in: .whitespaces).dropLast() }) {
                operations.append((method, current))
            }
        }
        return operations
    }

    @Test("every operation of the document is served, and its paths have no undocumented method")
    func documentMatchesRouter() async throws {
        let documented = try Self.operations()
        // The document's paths all appear (a reading that found nothing would pass vacuously).
        #expect(Set(documented.map { $0.path }) == ["/v1/zones", "/v1/zones/{zone}", "/v1/zones/{zone}/push", "/v1/zones/{zone}/changes",
                                                  "/v1/zones/{zone}/snapshot", "/v1/zones/{zone}/state", "/v1/zones/{zone}/replicas", "/v1/zones/{zone}/digests",
                                                  "/v1/zones/{zone}/state-digests", "/v1/zones/{zone}/devices",
                                                  "/v1/zones/{zone}/accept", "/v1/zones/{zone}/leave", "/v1/database/changes", "/v1/database/stream",
                                                  "/v1/zones/{zone}/assets/{sha256}", "/v1/zones/{zone}/assets/{sha256}/chunks/{index}",
                                                  "/health", "/ready", "/metrics"])
        // A stream of database changes ends at once rather than after an hour.
        var limits = ServerConfiguration.Limits()
        limits.maxStreamDuration = .milliseconds(100)
        let server = try TestServer(limits: limits)
        try await server.test { client in
            let created = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice))
            #expect(created.status == .created)
            // DELETE last, so that the zone is there for the others.
            let ordered = documented.filter { $0.method != .delete } + documented.filter { $0.method == .delete }
            for (method, path) in ordered {
                let uri = Self.uri(path)
                let response = try await client.execute(uri: uri, method: method, headers: auth(Token.alice))
                let body = String(buffer: response.body)
                // A route that is not served answers `404 notFound` "…: Not Found"; the snapshot of a
                // zone never compacted is a `404 notFound` of its own.
                let unrouted = response.status == .notFound && body.contains("\"notFound\"") && !body.contains("has no snapshot")
                #expect(!unrouted, "\(method) \(path) is documented but not served: \(response.status.code) \(body)")
            }
            for path in Set(documented.map { $0.path }) {
                let uri = Self.uri(path)
                for method in Self.methods where !documented.contains(where: { $0.method == method && $0.path == path }) {
                    let response = try await client.execute(uri: uri, method: method, headers: auth(Token.alice))
                    #expect(response.status == .notFound && String(buffer: response.body).contains("\"notFound\""),
                            "\(method) \(path) is served (\(response.status.code)) but not documented")
                }
            }
        }
    }

    /// A documented path with its parameters filled in: zone `notes`, an asset's hash, chunk 0.
    static func uri(_ path: String) -> String {
        path.replacingOccurrences(of: "{zone}", with: "notes")
            .replacingOccurrences(of: "{sha256}", with: AssetHash.of(Array("a photo".utf8)).hex)
            .replacingOccurrences(of: "{index}", with: "0")
    }

    @Test("the document's error codes, with their statuses, are StrataProtocol's ErrorCode.all, in order; the server answers each with its status")
    func errorCodes() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: "    ErrorCode:"), "no ErrorCode schema in the document")
        var documented: [(name: String, status: Int)] = []
        for line in lines[(start + 3)...] {
            // "        - zoneRewound       # 410"
            guard line.hasPrefix("        - ") else { break }
            let parts = line.dropFirst(10).split(separator: "#").map { $0.trimmingCharacters(in: .whitespaces) }
            documented.append((parts[0], Int(parts.count > 1 ? parts[1] : "") ?? -1))
        }
        #expect(documented.map(\.name) == ErrorCode.all.map(\.name))
        #expect(documented.map(\.status) == ErrorCode.all.map(\.status))
        for code in ErrorCode.all {
            #expect(ServerError(code, "x").response.status.code == code.status, "\(code)")
        }
    }
}
