#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import ArgumentParser

/// The `strata` command line tool: a store usable from scripts (`init`, `apply`, `get`,
/// `export`), the debugging tools (`inspect`, `log`, `verify`, `replay`, `diff`, `compact`),
/// assets (`asset get`, `asset list`), sync (`serve`, `sync`), zones and sharing on a server
/// (`zones list|show`, `share grant|revoke|accept|leave`) and the `demo`.
///
/// Exit codes: 0 success, 1 a finding (verify found corruption, diff found divergence), 2 usage
/// or I/O error.
public struct StrataCLI: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Strata: an event-sourced sync core — stores, the log server, and the tools to debug them.",
        discussion: "Exit codes: 0 success, 1 a finding (verify found corruption, diff found divergence), 2 usage or I/O error.",
        version: StrataVersion.description,
        subcommands: [
            DemoCommand.self, InitCommand.self, ApplyCommand.self, GetCommand.self, ExportCommand.self,
            InspectCommand.self, LogCommand.self, VerifyCommand.self, ReplayCommand.self, DiffCommand.self, MergeCommand.self, BundleCommand.self,
            CompactCommand.self, AssetCommand.self, SyncCommand.self, ZonesCommand.self, ShareCommand.self, ServeCommand.self, MigrateCommand.self, UsersCommand.self, SchemaCommand.self,
        ]
    )

    public init() {}

    /// Parses `arguments`, runs the command and returns its exit code — usage errors are 2, not
    /// ArgumentParser's 64, per the CLI contract.
    public static func run(arguments: [String]) async -> Int32 {
        defer { BundleCache.removeAll() }
        do {
            var command = try parseAsRoot(arguments)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            return ExitStatus.success
        } catch let error as CLIError {
            StandardError.write("error: \(error.message)\n")
            return error.exitCode
        } catch {
            let code = exitCode(for: error).rawValue
            let message = fullMessage(for: error)
            if code == ExitCode.success.rawValue {
                if !message.isEmpty { print(message) }
                return ExitStatus.success
            }
            if !message.isEmpty { StandardError.write(message + "\n") }
            if error is ExitCode { return code }
            // Everything else ArgumentParser reports (a bad option, a failed validation) is usage.
            return code == ExitCode.validationFailure.rawValue ? ExitStatus.usageOrIO : (code == 1 ? ExitStatus.finding : ExitStatus.usageOrIO)
        }
    }
}

/// `--json`, shared by every command that can print JSON.
struct JSONFlag: ParsableArguments {
    @Flag(help: "Print JSON instead of text.")
    var json = false
}

/// The store directory argument, shared by the commands that open a store.
struct StoreArgument: ParsableArguments {
    @Argument(help: "The store directory.")
    var store: String
}
