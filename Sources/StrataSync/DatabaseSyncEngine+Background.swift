@_spi(StrataInternals) import Strata
import StrataCore

/// Background sync of a whole database (see `SyncEngine.syncOnce(deadline:)`).
extension DatabaseSyncEngine {
    /// Syncs as ``sync()`` does, but stops at `deadline`: one request for the database's changes,
    /// then the zones that need it — those with local edits first, so that what the user did on
    /// this device reaches the server before anything else is pulled — each pushing, then pulling
    /// in pages, until the deadline. No request starts after it, and one in flight then is
    /// cancelled; whatever landed before stays (the store and cursor of each zone are saved as
    /// each answer lands), and the zones not finished stay marked, so the next sync of either
    /// kind goes on with them.
    ///
    /// ```swift
    /// // A silent push woke the app, which has about 30 seconds:
    /// let report = try await sync.syncOnce(deadline: .now + .seconds(25))
    /// completionHandler(report.receivedChanges ? .newData : .noData)
    /// ```
    ///
    /// Running out of time is not an error, nor is the calling task being cancelled: the report
    /// says it (``DatabaseSyncReport/finished``, which speaks of time only — zones that failed are
    /// in ``DatabaseSyncReport/failures``;
    /// ``DatabaseSyncReport/unfinishedZones``, and each zone's ``SyncReport/leftToPush`` and
    /// ``SyncReport/moreToPull``). It throws as ``sync()`` does, when the server cannot say what
    /// changed. A round of continuous mode running meanwhile is waited for, but not past the
    /// deadline; stop continuous mode first (``stop()``), as an app going to the background would.
    @discardableResult
    public func syncOnce(deadline: ContinuousClock.Instant) async throws -> DatabaseSyncReport {
        var report = DatabaseSyncReport()
        var spent = false
        // Whether this call got its turn: one whose deadline passed while another round ran
        // leaves the status to that round.
        var began = false
        updateStatus { $0.phase = .syncing }
        do {
            try await SyncBudget.$current.withValue(SyncBudget(deadline: deadline)) {
                try SyncBudget.check()
                try await exclusively {
                    began = true
                    // The zones with local edits push before anything else is asked: a listing
                    // of many pages (a first sync, an old token) that does not fit the budget
                    // must not keep them from the server every time.
                    let withEdits = database.zones.filter { (try? database.hasUnpushedEdits(in: $0)) == true }
                    if !withEdits.isEmpty { try await syncZones(withEdits, &report) }
                    let changes = try await fetchChanges(after: state.token, &report)
                    try await apply(changes, &report)
                    try await syncDirtyZones(&report)
                }
            }
        } catch let error where error is SyncBudget.Spent || Task.isCancelled {
            // (A cancelled calling task ends the round as the deadline does.)
            spent = true
            // Every zone still marked is left, and so is a zone added by a round cut before it
            // saved its marks (the token was not saved either: the next round lists it again).
            report.unfinishedZones += state.dirty.filter { database.store(for: $0) != nil }
            report.unfinishedZones += report.added.filter { report.zones[$0]?.finished != true }
        } catch {
            roundEnded(report, failure: error as? SyncError ?? SyncError(.store, "\(error)"))
            throw error
        }
        // A zone that failed early and was then removed (its grant revoked) is reported removed.
        for lost in report.removed { report.failures[lost.zone] = nil }
        report.unfinishedZones = Array(Set(report.unfinishedZones)).sorted()
        report.finished = !spent && report.unfinishedZones.isEmpty
        if began { roundEnded(report, failure: nil) }
        return report
    }

    /// ``syncOnce(deadline:)`` with a deadline `budget` from now.
    @discardableResult
    public func syncOnce(within budget: Duration) async throws -> DatabaseSyncReport {
        try await syncOnce(deadline: .now.advanced(by: budget))
    }
}
