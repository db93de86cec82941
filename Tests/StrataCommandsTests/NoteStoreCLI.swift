import Foundation
import StrataTestSupport
import Testing

/// What the tests that drive the `strata` executable against a server share: a one-entity
/// schema of notes, running the executable off the cooperative pool, and making a store with
/// `strata init`.
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
}
