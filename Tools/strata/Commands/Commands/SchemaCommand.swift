import ArgumentParser
import Foundation
import StrataCore

/// `strata schema check OLD.json NEW.json [--json]`: whether shipping the new schema to a fleet
/// that still runs the old one is safe. Exit 0 when it is (warnings allowed), 1 when not, 2 when
/// a file cannot be read or is not a valid schema.
struct SchemaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check schema changes before shipping them.",
        subcommands: [SchemaCheckCommand.self]
    )
}

struct SchemaCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Say whether a new schema is safe for a fleet that still runs the old one (exit 1 when not).",
        discussion: """
        Both files are schemas as the app declares them (JSON, as `strata init --schema` reads), \
        with their "version" and "migrations". Unsafe: a removed or retyped attribute or entity \
        without a migration, a new required attribute without a default, a changed relationship, \
        old migration steps changed or dropped, a new step at an old version, a step naming \
        something the old version does not have. Warned: a type change some values do not survive \
        (they read as the default on that side and stay stored).
        """
    )

    @Argument(help: "The schema the fleet runs now (JSON).")
    var old: String

    @Argument(help: "The schema about to ship (JSON).")
    var new: String

    @Flag(help: "Print {\"safe\", \"findings\": [{\"severity\", \"subject\", \"message\"}]}.")
    var json = false

    func run() async throws {
        let before = try Self.load(old)
        let after = try Self.load(new)
        let findings = after.fleetFindings(from: before)
        let safe = !findings.contains { $0.severity == .error }
        if json {
            struct Report: Encodable {
                var safe: Bool
                var from: Int
                var to: Int
                var findings: [SchemaFinding]
            }
            print(try JSONOutput.string(Report(safe: safe, from: before.version, to: after.version, findings: findings)))
        } else {
            for finding in findings { print("\(finding.severity.rawValue): \(finding.subject): \(finding.message)") }
            print(safe ? "safe: version \(before.version) and version \(after.version) can run side by side" : "unsafe: do not ship version \(after.version) to a fleet running version \(before.version)")
        }
        if !safe { throw ExitCode(ExitStatus.finding) }
    }

    static func load(_ path: String) throws -> Schema {
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read the schema file \(path)") }
        do {
            return try Schema.fromJSON(data)
        } catch let error as StoreError {
            throw CLIError("\(path): \(error.message)")
        }
    }
}
