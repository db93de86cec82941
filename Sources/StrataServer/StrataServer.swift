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

/// When the server sweeps the assets nothing needs any more (``AssetStorage/sweepAssets(grace:)``):
/// at most once per `interval`, with `grace`. It runs whether or not history is compacted — a
/// deleted zone's assets and abandoned uploads need it as much as compacted history does — and
/// never beside a compaction (the compactor runs it after a pass when there is one).
public struct AssetSweepSchedule: Sendable, Hashable {
    /// How long an asset's link, not named by the zone's retained history, is kept after it was
    /// last confirmed (uploaded, or checked by a push), and an upload after its last chunk.
    public var grace: Duration
    /// The least time between two sweeps.
    public var interval: Duration

    public init(grace: Duration = .seconds(24 * 3600), interval: Duration = .seconds(3600)) {
        self.grace = grace
        self.interval = interval
    }
}

/// Compacts every zone once per `retention.interval` until cancelled (counting each pass in
/// `metrics`, when given), and after a pass sweeps assets when `assetSweep`'s interval has passed
/// since the last sweep.
func compactPeriodically(_ storage: any ZoneStorage, retention: Retention, assetSweep: AssetSweepSchedule?,
                         logger: Logger, metrics: ServerMetrics? = nil) async {
    let clock = ContinuousClock()
    var lastSweep = clock.now
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
        if let assetSweep, clock.now - lastSweep >= assetSweep.interval {
            lastSweep = clock.now
            await sweepAssets(storage, grace: assetSweep.grace, logger: logger, metrics: metrics)
        }
    }
}

/// Sweeps assets once per `schedule.interval` until cancelled: the server's asset collection
/// when no compactor runs.
func sweepAssetsPeriodically(_ storage: any ZoneStorage, schedule: AssetSweepSchedule, logger: Logger, metrics: ServerMetrics? = nil) async {
    while !Task.isCancelled {
        do {
            try await Task.sleep(for: schedule.interval)
        } catch {
            return
        }
        await sweepAssets(storage, grace: schedule.grace, logger: logger, metrics: metrics)
    }
}

/// One sweep of unreferenced assets, counted in `metrics` and logged; a failure is logged (the
/// next sweep tries again).
func sweepAssets(_ storage: any ZoneStorage, grace: Duration, logger: Logger, metrics: ServerMetrics? = nil) async {
    do {
        let report = try await storage.sweepAssets(grace: grace)
        metrics?.assetBytesSwept.increment(by: report.bytesFreed)
        logger.info("assets swept", metadata: ["links": "\(report.links)", "manifests": "\(report.manifests)", "chunks": "\(report.chunks)",
                                               "uploads": "\(report.uploads)", "bytesFreed": "\(report.bytesFreed)"])
    } catch {
        logger.error("asset sweep failed", metadata: ["error": "\(error)"])
    }
}
