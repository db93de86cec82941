import ArgumentParser
import Foundation
import StrataServer

/// `strata serve --data DIR [--port N] [--users FILE]`: the log server with embedded storage.
///
/// Once it listens it prints `listening on http://HOST:PORT` (the port picked when `--port 0`).
/// SIGTERM or SIGINT shut it down promptly: long polls are answered at once (an empty page, so
/// clients poll again), requests in flight finish, the storage is closed, and it exits 0.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the log server (zones, push, pull) with embedded storage."
    )

    @Option(help: "Where the zones live.")
    var data: String

    @Option(help: "The port to listen on (0 picks a free one).")
    var port: Int = 8080

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The users file: {\"users\": [{\"name\": …, \"tokenSHA256\": …}]}.")
    var users: String = "users.json"

    @Option(help: "Keep this many transactions of each zone's history; older ones are compacted into a snapshot (default: keep everything).")
    var retain: UInt64?

    @Option(help: "Seconds between compactions (with --retain).")
    var compactEvery: Int = 600

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535, got \(port)") }
    }

    func run() async throws {
        do {
            let retention = retain.map { Retention(transactions: $0, interval: .seconds(compactEvery)) }
            let host = self.host
            try await StrataServerApp.serve(dataDirectory: data, port: port, usersFile: users, host: host, retention: retention) { port in
                // Unbuffered, so that a script or test reading the output sees it at once.
                FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
            }
        } catch {
            throw CLIError("the server stopped: \(error)")
        }
    }
}
