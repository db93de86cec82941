import ArgumentParser
import Foundation
import Logging
import StrataPostgres
import StrataServer
import StrataCore

/// `strata serve [--config FILE] [--data DIR | --postgres URL] [--port N] [--users FILE] …`: the
/// log server, on embedded storage in a data directory or on a PostgreSQL database that several
/// instances share.
///
/// Every setting comes from a flag, else a `STRATA_*` environment variable, else the JSON
/// configuration file (`--config` or `STRATA_CONFIG`), else its default (see
/// ``ServeConfiguration``); the effective configuration is logged at start-up. Once it listens it
/// prints `listening on http://HOST:PORT` (`https://` with TLS; the port picked when `--port 0`).
/// SIGTERM or SIGINT shut it down promptly: long polls are answered at once (an empty page, so
/// clients poll again), requests in flight finish, the storage is closed, and it exits 0. SIGHUP
/// reloads the users file. `--jwt-issuer FILE` (repeatable) accepts bearer JWTs of an issuer
/// beside the users file's static tokens.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the log server (zones, push, pull) on embedded storage or PostgreSQL.",
        discussion: """
        Settings come from flags, else STRATA_* environment variables, else the JSON file given by --config \
        (or STRATA_CONFIG), else defaults. Limits: --limit NAME=VALUE (repeatable), STRATA_LIMITS_NAME, or \
        "limits": {NAME: VALUE} in the file; durations in seconds, sizes in bytes. Names: \
        \(ServeConfiguration.limitNames.joined(separator: ", ")).
        """
    )

    @Option(help: "A JSON configuration file (flags and STRATA_* variables override it).")
    var config: String?

    @Option(help: "Where the zones live: a data directory (embedded storage)…")
    var data: String?

    @Option(help: ArgumentHelp("…or a PostgreSQL database, shared by any number of instances (postgres://USER@HOST:PORT/DATABASE; the password may come from STRATA_POSTGRES_PASSWORD).", valueName: "URL"))
    var postgres: String?

    @Option(help: "The most connections to PostgreSQL this instance opens (default 20).")
    var postgresMaxConnections: Int?

    @Option(help: "The port to listen on (0 picks a free one; default 8080).")
    var port: Int?

    @Option(help: "The address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(help: "The users file (default users.json; see `strata users`).")
    var users: String?

    @Option(help: "Keep this many transactions of each zone's history; older ones are compacted into a snapshot (default: keep everything).")
    var retain: UInt64?

    @Option(help: "Seconds between compactions (with --retain; default 600).")
    var compactEvery: Int?

    @Option(help: "Seconds an asset nothing names any more is kept before the sweep removes it (default 86400).")
    var assetGrace: Int?

    @Option(help: "Seconds between sweeps of unneeded assets; 0 never sweeps (default 3600).")
    var assetSweepEvery: Int?

    @Option(help: "Log format: text or json (one JSON object per line on standard error).")
    var logFormat: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    @Option(help: "Serve HTTPS with this PEM certificate chain (with --tls-key).")
    var tlsCert: String?

    @Option(help: "The PEM private key of --tls-cert.")
    var tlsKey: String?

    @Option(name: .customLong("jwt-issuer"),
            help: ArgumentHelp("A JSON file describing an issuer whose bearer JWTs sign users in (repeatable; see the JWTSignIn article).", valueName: "FILE"))
    var jwtIssuer: [String] = []

    @Option(help: ArgumentHelp("Tell this URL which zones changed (a signed JSON POST, coalesced), so that the app's backend wakes devices; needs --webhook-secret-file.", valueName: "URL"))
    var webhookUrl: String?

    @Option(help: ArgumentHelp("A file holding the webhook's signing secret (at least 16 bytes; surrounding whitespace ignored).", valueName: "FILE"))
    var webhookSecretFile: String?

    @Option(help: ArgumentHelp("Seconds a webhook notification gathers changes before it goes (default 1).", valueName: "SECONDS"))
    var webhookCoalesce: String?

    @Option(help: ArgumentHelp("A limit, NAME=VALUE (repeatable); see the discussion for the names.", valueName: "NAME=VALUE"))
    var limit: [String] = []

    @Option(name: .customLong("operator"),
            help: ArgumentHelp("A user of the users file who may open the operator's dashboard at /dashboard (repeatable; they sign in with their name and token).", valueName: "USER"))
    var operators: [String] = []

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be 0…65535, got \(port)") }
        _ = try flagValues()
    }

    /// The flags given, by configuration key.
    func flagValues() throws -> [String: String] {
        var values: [String: String] = [:]
        values["data"] = data
        values["postgres"] = postgres
        values["postgresMaxConnections"] = postgresMaxConnections.map { "\($0)" }
        values["port"] = port.map { "\($0)" }
        values["host"] = host
        values["users"] = users
        values["retain"] = retain.map { "\($0)" }
        values["compactEvery"] = compactEvery.map { "\($0)" }
        values["assetGrace"] = assetGrace.map { "\($0)" }
        values["assetSweepEvery"] = assetSweepEvery.map { "\($0)" }
        values["logFormat"] = logFormat
        values["logLevel"] = logLevel
        values["tls.cert"] = tlsCert
        values["tls.key"] = tlsKey
        if !jwtIssuer.isEmpty { values["jwt.issuers"] = jwtIssuer.joined(separator: ",") }
        values["webhook.url"] = webhookUrl
        values["webhook.secretFile"] = webhookSecretFile
        values["webhook.coalesce"] = webhookCoalesce
        if !operators.isEmpty { values["operators"] = operators.joined(separator: ",") }
        let names = Set(ServeConfiguration.limitNames)
        for assignment in limit {
            guard let equals = assignment.firstIndex(of: "=") else {
                throw ValidationError("--limit takes NAME=VALUE, got \"\(assignment)\"")
            }
            let name = String(assignment[..<equals])
            guard names.contains(name) else {
                throw ValidationError("--limit: unknown limit \"\(name)\" (one of \(names.sorted().joined(separator: ", ")))")
            }
            values["limits." + name] = String(assignment[assignment.index(after: equals)...])
        }
        return values
    }

    func run() async throws {
        let resolved: ServeConfiguration
        do {
            resolved = try ServeConfiguration.resolve(flags: try flagValues(), environment: ProcessInfo.processInfo.environment,
                                                      configFile: config)
        } catch let problem as ServeConfiguration.Problem {
            throw CLIError("bad configuration: \(problem)")
        }
        let logger = Logger.strataServer(format: resolved.logFormat, level: resolved.logLevel)
        logger.info("effective configuration", metadata: resolved.effectiveMetadata)
        var options = resolved.serveOptions
        if let url = resolved.postgres {
            // Run by the server's service group (its first service): a database that cannot be
            // reached, or a newer schema, stops the server with the reason.
            options.storage = PostgresZoneStorage(url: url, options: PostgresZoneStorage.Options(maxConnections: resolved.postgresMaxConnections),
                                                  logger: logger)
        }
        let scheme = options.tls == nil ? "http" : "https"
        let host = options.configuration.host
        do {
            try await StrataServerApp.serve(options, logger: logger) { port in
                // Unbuffered, so that a script or test reading the output sees it at once.
                FileHandle.standardOutput.write(Data("listening on \(scheme)://\(host):\(port)\n".utf8))
            }
        } catch {
            throw CLIError("the server stopped: \(error)")
        }
    }
}
