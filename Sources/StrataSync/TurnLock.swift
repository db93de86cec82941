import Synchronization

/// A first-come, first-served lock for async code: whoever holds the turn runs; the others wait
/// (suspended, not blocking a thread) in the order they asked.
///
/// Continuous mode pushes a local commit while its long poll waits (the poll is not cut short,
/// so its connection stays open — see `SyncEngine.longPoll()`). An actor lets the push and the
/// processing of the poll's answer interleave at every `await`; both read and write the cursor
/// and the store, so each takes the turn, and the poll gives it up only while its request waits.
final class TurnLock: Sendable {
    private struct State {
        var held = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Waits for the turn. Not cancellable: every holder gives the turn back soon (its own work
    /// ends at its task's cancellation), and a waiter handed the turn must pass it on.
    func acquire() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.held {
                    state.waiters.append(waiter)
                    return false
                }
                state.held = true
                return true
            }
            if now { waiter.resume() }
        }
    }

    /// Gives the turn to the longest waiter, or frees it.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.held = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
