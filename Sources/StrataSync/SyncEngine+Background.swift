import Strata
import StrataCore

/// Background sync: as much of a sync as fits in the time an app is given (iOS's
/// `BGAppRefreshTask`, a silent push's few seconds), leaving the store consistent and saying
/// what is left.
extension SyncEngine {
    /// Syncs as ``sync()`` does — push first, then pull in pages — but stops at `deadline`:
    /// no request starts after it, and one in flight then is cancelled. Every page applied and
    /// every push acknowledged before the deadline stays (each is saved as it lands), so the
    /// store is consistent and the next sync, of either kind, goes on from there. The report
    /// says what was done and what is left (``SyncReport/finished``,
    /// ``SyncReport/leftToPush``, ``SyncReport/moreToPull``).
    ///
    /// ```swift
    /// // In a BGAppRefreshTask, with about 25 seconds to spend:
    /// let report = try await engine.syncOnce(deadline: .now + .seconds(20))
    /// task.setTaskCompleted(success: report.finished)   // (a thrown error: success false)
    /// ```
    ///
    /// Errors are the sync's own (``SyncError``); running out of time is not one, nor is the
    /// calling task being cancelled (a `BGTask`'s expiration handler): either ends the sync as
    /// described and returns the report. A deadline already past does nothing and reports
    /// everything as left. Do not call it while continuous mode runs (``start()``): stop that
    /// first, as an app going to the background would (the two would push and pull side by side).
    @discardableResult
    public func syncOnce(deadline: ContinuousClock.Instant) async throws -> SyncReport {
        var report = SyncReport()
        pullFinished = false
        do {
            try await SyncBudget.$current.withValue(SyncBudget(deadline: deadline)) {
                try SyncBudget.check()
                try await sync(into: &report)
            }
            return report
        } catch let error where error is SyncBudget.Spent || Task.isCancelled {
            // The calling task cancelled (a BGTask's expiration handler) ends the sync as the
            // deadline does: what landed stays, and the report says what is left.
            report.finished = false
            report.moreToPull = !pullFinished
            report.leftToPush = (try? await unpushedEdits().count) ?? status.pending
            report.token = cursor.token
            let left = report.leftToPush
            update { $0.phase = .idle; $0.pending = left }
            return report
        }
    }

    /// ``syncOnce(deadline:)`` with a deadline `budget` from now.
    @discardableResult
    public func syncOnce(within budget: Duration) async throws -> SyncReport {
        try await syncOnce(deadline: .now.advanced(by: budget))
    }
}
