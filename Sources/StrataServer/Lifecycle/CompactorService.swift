import Logging
import ServiceLifecycle

/// The compactor of `strata serve` as a service: compacts every zone once per
/// `retention.interval` until the shutdown reaches it. The group stops it after the HTTP server
/// (no more pushes) and before the storage closes; a compaction under way finishes first.
struct CompactorService: Service {
    let storage: any ZoneStorage
    let retention: Retention
    /// Assets swept after a compaction pass (`nil`: never).
    let assetSweep: AssetSweepSchedule?
    let logger: Logger
    let metrics: ServerMetrics?

    func run() async throws {
        // Graceful shutdown cancels the loop; its sleep ends at once, a compaction under way
        // finishes (the storage's calls are not cut short by cancellation).
        await cancelWhenGracefulShutdown {
            await compactPeriodically(storage, retention: retention, assetSweep: assetSweep, logger: logger, metrics: metrics)
        }
        logger.debug("compactor stopped")
    }
}

/// The asset sweep of `strata serve` when no compactor runs (``ServeOptions/retention`` unset):
/// sweeps once per interval until the shutdown reaches it; a sweep under way finishes first.
struct AssetSweeperService: Service {
    let storage: any ZoneStorage
    let schedule: AssetSweepSchedule
    let logger: Logger
    let metrics: ServerMetrics?

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await sweepAssetsPeriodically(storage, schedule: schedule, logger: logger, metrics: metrics)
        }
        logger.debug("asset sweeper stopped")
    }
}
