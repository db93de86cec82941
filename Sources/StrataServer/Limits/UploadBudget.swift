import StrataProtocol
import Synchronization

/// The bytes of request bodies the server holds in memory at once
/// (``ServerConfiguration/Limits/uploadMemoryBudget``). A body reserves its bytes before it is
/// read; a reservation that does not fit waits its turn (first come, first served) for at most
/// ``ServerConfiguration/Limits/uploadBudgetWait``, then is refused, so that however many uploads
/// arrive at once, the server's memory for them stays within the budget.
final class UploadBudget: Sendable {
    /// The budget in bytes.
    let capacity: Int
    /// The longest a reservation waits.
    let wait: Duration

    private struct Waiter {
        var id: UInt64
        var bytes: Int
        var continuation: CheckedContinuation<Bool, Never>
        var timer: Task<Void, Never>?
    }
    private struct State {
        var available: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waiters cancelled before they were queued.
        var cancelled: Set<UInt64> = []
    }
    private let state: Mutex<State>

    init(capacity: Int, wait: Duration) {
        self.capacity = max(1, capacity)
        self.wait = wait
        self.state = Mutex(State(available: max(1, capacity)))
    }

    /// Bytes not reserved now.
    var available: Int { state.withLock { $0.available } }

    /// Reservations waiting now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Reserves `bytes` (at most the whole budget: a larger body waits until it has all of it):
    /// `true` once reserved, `false` when ``wait`` passed first or the task was cancelled. Every
    /// reserved byte must be given back with ``release(_:)``.
    func reserve(_ bytes: Int) async -> Bool {
        let bytes = min(max(0, bytes), capacity)
        let (granted, id): (Bool, UInt64) = state.withLock { state in
            if state.waiters.isEmpty, state.available >= bytes {
                state.available -= bytes
                return (true, 0)
            }
            state.nextID += 1
            return (false, state.nextID)
        }
        if granted { return true }
        guard wait > .zero else { return false }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let timer = Task { [wait] in
                    try? await Task.sleep(for: wait)
                    self.expire(id)
                }
                let immediate: Bool? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return false }
                    if state.waiters.isEmpty, state.available >= bytes {
                        state.available -= bytes
                        return true
                    }
                    state.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation, timer: timer))
                    return nil
                }
                if let immediate {
                    timer.cancel()
                    continuation.resume(returning: immediate)
                }
            }
        } onCancel: {
            expire(id, cancelled: true)
        }
    }

    /// Gives back `bytes` reserved earlier and lets waiting reservations through, in order.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let granted = state.withLock { state -> [Waiter] in
            state.available = min(capacity, state.available + bytes)
            return grant(&state)
        }
        for waiter in granted {
            waiter.timer?.cancel()
            waiter.continuation.resume(returning: true)
        }
    }

    /// Ends a waiting reservation unsatisfied (its wait ran out, or its task was cancelled).
    private func expire(_ id: UInt64, cancelled: Bool = false) {
        let (expired, granted) = state.withLock { state -> (Waiter?, [Waiter]) in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                if cancelled { state.cancelled.insert(id) }
                return (nil, [])
            }
            let waiter = state.waiters.remove(at: index)
            // The waiter ahead of the others may have been the one that did not fit.
            return (waiter, index == 0 ? grant(&state) : [])
        }
        if let expired {
            expired.timer?.cancel()
            expired.continuation.resume(returning: false)
        }
        for waiter in granted {
            waiter.timer?.cancel()
            waiter.continuation.resume(returning: true)
        }
    }

    /// Takes the waiters at the head of the queue that fit now.
    private func grant(_ state: inout State) -> [Waiter] {
        var granted: [Waiter] = []
        while let first = state.waiters.first, first.bytes <= state.available {
            state.available -= first.bytes
            granted.append(state.waiters.removeFirst())
        }
        return granted
    }
}

/// The upload budget one request holds: what its body reserved so far, all given back at once
/// when the request is answered (``StrataServerApp`` scopes one around each request, so that a
/// body's bytes stay counted while the handler decodes and stores them).
final class UploadReservation: Sendable {
    /// The reservation of the request the current task serves, if the server scoped one.
    @TaskLocal static var current: UploadReservation?

    let budget: UploadBudget
    private let held = Mutex(0)

    init(budget: UploadBudget) {
        self.budget = budget
    }

    /// Bytes held now.
    var bytes: Int { held.withLock { $0 } }

    /// Reserves `bytes` more, or throws `503 serverBusy` (with `Retry-After`) when the budget had
    /// no room for them within its wait.
    func reserve(_ bytes: Int) async throws(ServerError) {
        guard bytes > 0 else { return }
        guard await budget.reserve(bytes) else {
            let seconds = max(1, Int(budget.wait.components.seconds))
            throw ServerError(.serverBusy, "the server is receiving as many uploads as its memory allows (\(budget.capacity) bytes); retry in \(seconds) s",
                              retryAfter: seconds)
        }
        held.withLock { $0 += min(bytes, budget.capacity) }
    }

    /// Gives back everything held. Idempotent.
    func release() {
        let bytes = held.withLock { held in
            defer { held = 0 }
            return held
        }
        budget.release(bytes)
    }
}
