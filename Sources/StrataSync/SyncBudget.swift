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

    /// Runs `body`, and returns at the deadline whether or not it has ended: `body` is then
    /// cancelled and ``Spent`` thrown at once. `body` runs in a task of its own (which inherits the
    /// task-local values), so that one that does not heed cancellation — an app's token provider,
    /// a custom transport, a read of the disk — cannot hold the caller past the deadline; it ends
    /// on its own later, and what it did then is what the next sync finds (a push the server took
    /// is acknowledged again by its exactly-once check). Cancelling the caller cancels `body` and
    /// throws `CancellationError`. Without a budget it just runs `body`.
    static func bounding<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let budget = current else { return try await body() }
        try check()
        let race = Race<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.begin(continuation,
                           work: Task {
                               do { race.end(.success(try await body())) } catch { race.end(.failure(error)) }
                           },
                           timer: Task {
                               try? await Task.sleep(until: budget.deadline, clock: .continuous)
                               race.end(.failure(Spent()))
                           })
            }
        } onCancel: {
            race.end(.failure(CancellationError()))
        }
    }

    /// The first of the body's outcome, the deadline and the caller's cancellation: it resumes the
    /// caller once, and cancels the two tasks.
    private final class Race<T: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<T, any Error>?
            var tasks: [Task<Void, Never>] = []
            /// Set when an outcome came before `begin` (a cancellation as the race began).
            var early: Result<T, any Error>?
            var ended = false
        }
        private let state = Mutex(State())

        func begin(_ continuation: CheckedContinuation<T, any Error>, work: Task<Void, Never>, timer: Task<Void, Never>) {
            let early = state.withLock { state -> Result<T, any Error>? in
                if state.ended { return state.early }
                state.continuation = continuation
                state.tasks = [work, timer]
                return nil
            }
            if let early {
                work.cancel()
                timer.cancel()
                continuation.resume(with: early)
            }
        }

        func end(_ outcome: Result<T, any Error>) {
            let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
                guard !state.ended else { return (nil, []) }
                state.ended = true
                guard let continuation = state.continuation else {
                    state.early = outcome
                    return (nil, [])
                }
                state.continuation = nil
                return (continuation, state.tasks)
            }
            for task in tasks { task.cancel() }
            continuation?.resume(with: outcome)
        }
    }

}
