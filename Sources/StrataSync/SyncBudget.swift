import Foundation
import Synchronization

/// The time a sync may take: what `SyncEngine.syncOnce(deadline:)` and
/// `DatabaseSyncEngine.syncOnce(deadline:)` give an app woken in the background (iOS's
/// `BGAppRefreshTask`, a silent push), which has seconds and is suspended when they are up.
///
/// It is a task-local value, so that it reaches every request of a sync — a database's zones
/// sync in child tasks, which inherit it — without threading a parameter through each. It is
/// checked before each request, and a request in flight at the deadline is cancelled: no request
/// outlives the deadline. What the store does with an answer (applying a pulled page, saving the
/// cursor) is never cut short, so the store and the cursor are as consistent as after any
/// answer: the next sync goes on from there. A push whose answer the deadline cut off is sent
/// again by the next sync, and the server's exactly-once check answers it from what it holds.
struct SyncBudget: Sendable {
    let deadline: ContinuousClock.Instant

    @TaskLocal static var current: SyncBudget?

    /// Thrown at the first request after the deadline (or by the one it cut short), and caught by
    /// the `syncOnce(deadline:)` that set the budget.
    struct Spent: Error, CustomStringConvertible {
        var description: String { "the sync's time budget is spent" }
    }

    /// Whether the current task's budget is spent (`false` without one).
    static var isSpent: Bool {
        guard let budget = current else { return false }
        return ContinuousClock.now >= budget.deadline
    }

    /// Throws ``Spent`` when the current task's budget is spent.
    static func check() throws {
        if isSpent { throw Spent() }
    }

    /// Whether waiting `delay` (a retry's backoff) would end past the deadline.
    static func cannotWait(_ delay: Duration) -> Bool {
        guard let budget = current else { return false }
        return ContinuousClock.now.advanced(by: delay) >= budget.deadline
    }

    /// Runs `body`, cancelled at the deadline (then ``Spent`` is thrown once it has ended: it is
    /// a child task, and ends before this returns). Without a budget it just runs `body`.
    static func bounding<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let budget = current else { return try await body() }
        try check()
        return try await withThrowingTaskGroup(of: Outcome<T>.self) { group in
            group.addTask { .value(try await body()) }
            group.addTask {
                // A cancelled sleep (the body ended first) ends the timer without an outcome
                // anyone waits for.
                try await Task.sleep(until: budget.deadline, clock: .continuous)
                return .timedOut
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw Spent() }
            switch first {
            case .value(let value): return value
            case .timedOut: throw Spent()
            }
        }
    }

    private enum Outcome<T: Sendable>: Sendable {
        case value(T)
        case timedOut
    }
}
