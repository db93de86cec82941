import Dispatch
import Foundation
import Hummingbird
public import Logging

extension StrataServerApp {
    /// Serves until SIGTERM or SIGINT, then shuts down promptly — for `strata serve`.
    ///
    /// On the signal, ``beginShutdown()`` answers every long poll at once (an empty page with the
    /// same token) and `/ready` turns `503`, while Hummingbird's graceful shutdown (through
    /// swift-service-lifecycle) stops accepting connections and lets the requests in flight —
    /// pushes included — finish before this returns. The caller closes the storage afterwards.
    ///
    /// - Parameter onRunning: called with the port listened on once the server accepts connections.
    public func runUntilSignalled(onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) async throws {
        // Hummingbird's service group listens for the same two signals (and ignores their default
        // action); Dispatch delivers each signal to every source that watches it.
        let sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                logger.notice("signal received: shutting down", metadata: ["signal": "\(number == SIGTERM ? "SIGTERM" : "SIGINT")"])
                beginShutdown()
            }
            source.resume()
            return source
        }
        defer { for source in sources { source.cancel() } }
        do {
            try await buildApplication(onRunning: onRunning).runService()
        } catch {
            beginShutdown()
            throw error
        }
        beginShutdown()
    }

    /// `strata serve`: the server over an ``EmbeddedZoneStorage`` in `dataDirectory`, with the
    /// compactor when `retention` says so, until SIGTERM or SIGINT (see
    /// ``runUntilSignalled(onRunning:)``). On the signal, long polls are answered at once, the
    /// requests in flight finish, the compactor stops, and the storage is closed — every
    /// acknowledged push is durable when this returns.
    public static func serve(dataDirectory: String, port: Int, usersFile: String, host: String = "127.0.0.1",
                             limits: ServerConfiguration.Limits = ServerConfiguration.Limits(),
                             retention: Retention? = nil,
                             logger: Logger = Logger(label: "strata.server"),
                             onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) async throws {
        let users = try UserRegistry(loading: usersFile)
        // SIGHUP reloads the users file (a bad one is logged and the users loaded before stay).
        let hangup = users.reloadingOnHangup(logger: logger)
        defer { hangup.cancel() }
        let storage = try EmbeddedZoneStorage(directory: dataDirectory, logger: logger)
        let server = StrataServerApp(storage: storage, users: users,
                                     configuration: ServerConfiguration(host: host, port: port, limits: limits), logger: logger)
        logger.info("strata server starting", metadata: [
            "host": "\(host)", "port": "\(port)", "dataDirectory": "\(dataDirectory)", "users": "\(users.current.users.count)",
        ])
        let compactor = retention.map { retention in
            Task { await compactPeriodically(storage, retention: retention, logger: logger) }
        }
        let outcome = await Result(catching: { try await server.runUntilSignalled(onRunning: onRunning) })
        // A compaction under way finishes before the storage closes.
        compactor?.cancel()
        await compactor?.value
        do {
            try await storage.close()
        } catch {
            logger.error("closing the storage failed", metadata: ["error": "\(error)"])
            try outcome.get()
            throw error
        }
        try outcome.get()
        logger.info("strata server stopped")
    }
}

extension Result where Failure == any Error {
    fileprivate init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
