import ArgumentParser
import Strata

/// The `strata` command line tool. For now it carries the demo of the segment log; later issues
/// add `inspect`, `verify`, `replay`, `diff` and the rest over a commands library.
@main
struct StrataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Strata: an event-sourced sync core.",
        subcommands: [DemoCommand.self, VerifyCommand.self, SyncCommand.self, ServeCommand.self]
    )
}
