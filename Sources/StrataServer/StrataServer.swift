import Hummingbird
public import Logging

/// Runs the log server until the process receives SIGINT or SIGTERM: opens (creating when needed)
/// an ``EmbeddedZoneStorage`` in `dataDirectory`, loads the users file, listens on `host:port`,
/// and closes the storage (making everything durable) on the way out.
///
/// ```swift
/// try await runServer(dataDirectory: "/var/lib/strata", port: 8080, usersFile: "/etc/strata/users.json")
/// ```
///
/// - Parameters:
///   - dataDirectory: where the zones live (see ``EmbeddedZoneStorage``).
///   - port: the port to listen on (0 picks a free one).
///   - usersFile: the users and their token digests (see ``UserDirectory``).
///   - host: the address to listen on.
///   - limits: request limits.
///   - retention: how much history zones keep and how often the compactor runs (`nil`: never
///     compacts).
///   - logger: where the server logs.
/// - Throws: ``UserDirectoryError`` for a bad users file, ``ZoneStorageError`` when the data
///   directory cannot be opened, or the error that stopped the HTTP server.
public func runServer(dataDirectory: String, port: Int, usersFile: String, host: String = "127.0.0.1",
                      limits: ServerConfiguration.Limits = ServerConfiguration.Limits(),
                      retention: Retention? = nil,
                      logger: Logger = Logger(label: "strata.server")) async throws {
    // One way to run a server: SIGTERM/SIGINT answer held long polls at once and close the
    // storage after the compactor stops (see `StrataServerApp.serve`).
    try await StrataServerApp.serve(dataDirectory: dataDirectory, port: port, usersFile: usersFile, host: host,
                                    limits: limits, retention: retention, logger: logger)
}

/// How much history the server keeps: every `interval`, each zone is snapshotted and the log
/// segments wholly older than its newest `transactions` transactions are retired. Clients whose
/// token points into retired history get `410 tokenExpired` and bootstrap from the snapshot.
public struct Retention: Sendable, Hashable {
    public var transactions: UInt64
    public var interval: Duration

    public init(transactions: UInt64, interval: Duration = .seconds(600)) {
        self.transactions = transactions
        self.interval = interval
    }
}

/// Compacts every zone once per `retention.interval` until cancelled (counting each pass in
/// `metrics`, when given).
func compactPeriodically(_ storage: any ZoneStorage, retention: Retention, logger: Logger, metrics: ServerMetrics? = nil) async {
    while !Task.isCancelled {
        do {
            try await Task.sleep(for: retention.interval)
        } catch {
            return
        }
        do {
            for zone in try await storage.zones() {
                let end = try await storage.endPosition(zone: zone.id)
                let start = try await storage.startPosition(zone: zone.id)
                guard end - start > retention.transactions else { continue }
                try await storage.compact(zone: zone.id, retaining: retention.transactions)
            }
            metrics?.compactionRuns.increment()
        } catch {
            metrics?.compactionFailures.increment()
            logger.error("compaction failed", metadata: ["error": "\(error)"])
        }
    }
}
