import Synchronization

/// A clock that moves only when a test advances it: sleepers wake when it reaches their
/// deadline, so a test asserts what a wait does (who sleeps, until when, what happens after)
/// without waiting for it.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The deadlines of the sleepers waiting now, earliest first.
    public var deadlines: [Instant] { state.withLock { $0.sleepers.values.map(\.deadline).sorted() } }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { s -> Int in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { s -> Bool in
                    if deadline <= s.now || Task.isCancelled { return true }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Moves the clock forward by `duration`, waking every sleeper whose deadline it reaches.
    public func advance(by duration: Duration) {
        let woken = state.withLock { s -> [Sleeper] in
            s.now = s.now.advanced(by: duration)
            let due = s.sleepers.filter { $0.value.deadline <= s.now }
            for id in due.keys { s.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits (yielding, not sleeping) until `count` sleepers wait, or gives up after `spins`.
    public func waitForSleepers(_ count: Int, spins: Int = 100_000) async -> Bool {
        for _ in 0..<spins {
            if state.withLock({ $0.sleepers.count }) >= count { return true }
            await Task.yield()
        }
        return false
    }
}
