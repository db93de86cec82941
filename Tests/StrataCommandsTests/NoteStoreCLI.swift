import Foundation
import StrataTestSupport
import Testing

/// What the tests that drive the `strata` executable against a server share: a one-entity
/// schema of notes, running the executable off the cooperative pool, and making a store with
/// `strata init`, inserting notes and reading their titles back.
protocol NoteStoreCLI {}

extension NoteStoreCLI {
    static var schema: String {
        #"{"entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string", "default": ""}]}]}"#
    }

    /// Runs the `strata` executable to its end on a thread of its own.
    func strata(_ arguments: [String], input: String? = nil) async throws -> ChildProcess.Result {
        let executable = try ChildProcess.executable("strata")
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Swift.Result { try ChildProcess.run(executable, arguments, input: input) })
            }
        }
    }

    /// A store made with `strata init` (which records the schema as its first local transaction).
    func makeStore(_ dir: TemporaryDirectory, _ name: String) async throws -> String {
        let schemaFile = dir.sub("schema.json")
        if !FileManager.default.fileExists(atPath: schemaFile) {
            try Data(Self.schema.utf8).write(to: URL(fileURLWithPath: schemaFile))
        }
        let store = dir.sub(name)
        let created = try await strata(["init", store, "--schema", schemaFile])
        #expect(created.status == 0, "\(created.stderr)")
        return store
    }

    /// One transaction inserting a note per title, with `strata apply`.
    func insert(_ store: String, _ titles: [String]) async throws {
        let lines = titles.map { "{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"title\": \"\($0)\"}}" }.joined(separator: "\n")
        let applied = try await strata(["apply", store, "-"], input: lines)
        #expect(applied.status == 0, "\(applied.stderr)")
    }

    /// The titles of the notes in `store` (`strata export`).
    func titles(_ store: String) async throws -> Set<String> {
        let exported = try await strata(["export", store])
        #expect(exported.status == 0, "\(exported.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(exported.stdout.utf8)) as? [String: Any])
        let objects = try #require(json["objects"] as? [[String: Any]])
        return Set(objects.compactMap { ($0["values"] as? [String: Any])?["title"] as? String })
    }
}
