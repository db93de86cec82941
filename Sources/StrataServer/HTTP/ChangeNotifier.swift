import Synchronization

/// Wakes the pulls that wait for a zone to change (long polls) when a push lands or the zone is
/// deleted.
///
/// A waiter registers *before* it looks at the zone and waits only if it found nothing, so that an
/// append landing in between is never missed:
///
/// ```swift
/// let waiter = notifier.register(zone: "notes")
/// defer { notifier.remove(waiter) }
/// if try await storage.endPosition(zone: "notes") == position {
///     await notifier.wait(waiter, timeout: .seconds(30))
/// }
/// ```
///
/// The notifier is in-process: a storage shared by several server processes would have to signal
/// it from its own change notifications.
///
/// When the server shuts down, ``shutDown()`` wakes every waiter at once and every later
/// ``wait(_:timeout:)`` returns immediately, so that no long poll holds the process up.
public final class ChangeNotifier: Sendable {
    /// A registered waiter.
    public struct Waiter: Sendable, Hashable {
        public let zone: String
        let id: UInt64
    }

    /// Why a ``wait(_:timeout:)`` returned.
    public enum Wake: Sendable, Hashable {
        /// The zone was notified (or the waiter removed).
        case notified
        /// The timeout passed.
        case timedOut
        /// The waiting task was cancelled.
        case cancelled
        /// The notifier was shut down.
        case shutDown
    }

    private enum Slot {
        /// Registered, not waiting yet.
        case armed
        /// Woken before it waited.
        case fired(Wake)
        case waiting(CheckedContinuation<Wake, Never>)
    }

    private struct State {
        var nextID: UInt64 = 0
        var zones: [String: [UInt64: Slot]] = [:]
        var shutDown = false
        /// Timeouts by tick (see ``tick``): the waiters (ID to zone) whose wait ends in that
        /// tick, and each waiter's tick. A waiter that wakes or is removed earlier leaves its
        /// bucket at once, so the buckets hold only waits in progress.
        var deadlines: [Int: [UInt64: String]] = [:]
        var deadlineTicks: [UInt64: Int] = [:]
        /// The first tick not yet fired.
        var nextTick = 0
        var tickerRunning = false
        /// Per zone, its users as the last change of them here said (see
        /// ``notify(zone:users:nowUsers:)``): a push whose request read the zone before a grant
        /// landed still wakes the new grantee.
        var zoneUsers: [String: Set<String>] = [:]
    }

    private let state = Mutex(State())
    /// Timeouts fire in ticks of this length, from one task per notifier that runs while any
    /// wait has a deadline: a long poll costs no timer task of its own, so ten thousand of them
    /// cost one sleeping task, not ten thousand (and a poll cut short leaves no timer behind).
    /// A wait ends at most one tick after its timeout.
    private let tick: Duration
    private let origin = ContinuousClock.now

    public init() {
        tick = .milliseconds(50)
    }

    /// The tick `instant` falls in.
    private func tickIndex(_ instant: ContinuousClock.Instant) -> Int {
        Int((instant - origin) / tick)
    }

    /// Registers a waiter for changes of `zone`.
    public func register(zone: String) -> Waiter {
        state.withLock { s in
            s.nextID += 1
            s.zones[zone, default: [:]][s.nextID] = s.shutDown ? .fired(.shutDown) : .armed
            return Waiter(zone: zone, id: s.nextID)
        }
    }

    /// Registers a waiter for changes of any zone in `user`'s database (a database changes long
    /// poll, `GET /v1/database/changes`, which then looks which of its caller's zones changed).
    public func register(databaseOf user: String) -> Waiter {
        register(zone: Self.databaseKey(of: user))
    }

    /// The key database waiters of `user` register under: a zone name never starts with NUL.
    static func databaseKey(of user: String) -> String { databasePrefix + user }
    private static let databasePrefix = "\u{0}database\u{0}"

    /// Wakes every waiter of `zone`, and the database waiters of `users` — the users whose
    /// database lists the zone, as the caller read it — and of the users the last change of the
    /// zone's users here left it with. Waking only them keeps a push's cost independent of how
    /// many devices of other users hold a database long poll.
    ///
    /// - Parameters:
    ///   - zone: the zone that changed (its ID's description).
    ///   - users: the users whose database lists the zone as the caller read it; for a change of
    ///     who they are, the users before and after.
    ///   - nowUsers: for a change of who the zone's users are (a grant, a revocation, a creation,
    ///     a deletion: empty), the users it has now; they are remembered, so that a request that
    ///     read the zone before this change (a push whose body took a while) still wakes them.
    public func notify(zone: String, users: some Sequence<String>, nowUsers: Set<String>? = nil) {
        let keys = state.withLock { s -> [String] in
            var all = Set(users)
            if let remembered = s.zoneUsers[zone] { all.formUnion(remembered) }
            if let nowUsers { s.zoneUsers[zone] = nowUsers.isEmpty ? nil : nowUsers }
            return [zone] + all.map(Self.databaseKey(of:))
        }
        wake(keys, .notified)
    }

    /// Wakes every waiter of `zone` and every database waiter: for a change whose zone's users
    /// are not known here (announced by another process sharing the storage). Correct, but a
    /// cost in every database long poll.
    public func notify(zone: String) {
        let keys = state.withLock { s in [zone] + s.zones.keys.filter { $0.hasPrefix(Self.databasePrefix) } }
        wake(keys, .notified)
    }

    private func wake(_ keys: [String], _ reason: Wake) {
        let continuations = state.withLock { s -> [CheckedContinuation<Wake, Never>] in
            var woken: [CheckedContinuation<Wake, Never>] = []
            for key in Set(keys) {
                // Taken out while changed, so the dictionary is not copied.
                guard var slots = s.zones.removeValue(forKey: key) else { continue }
                for (id, slot) in slots {
                    switch slot {
                    case .waiting(let continuation):
                        woken.append(continuation)
                        Self.dropDeadline(id, &s)
                    case .fired: continue  // keeps the first reason
                    case .armed: break
                    }
                    slots[id] = .fired(reason)
                }
                s.zones[key] = slots
            }
            return woken
        }
        for continuation in continuations { continuation.resume(returning: reason) }
    }

    /// Wakes every waiter of every zone and every database waiter once (the users were
    /// reloaded: each long poll checks its caller again).
    public func notifyAll() {
        wake(state.withLock { Array($0.zones.keys) }, .notified)
    }

    /// Wakes every waiter of every zone, now and from now on: after this, waits return at once.
    /// Called when the server begins to shut down. Idempotent.
    public func shutDown() {
        let continuations = state.withLock { s -> [CheckedContinuation<Wake, Never>] in
            s.shutDown = true
            var woken: [CheckedContinuation<Wake, Never>] = []
            for (zone, var slots) in s.zones {
                for (id, slot) in slots {
                    switch slot {
                    case .waiting(let continuation):
                        woken.append(continuation)
                        Self.dropDeadline(id, &s)
                    case .fired: continue
                    case .armed: break
                    }
                    slots[id] = .fired(.shutDown)
                }
                s.zones[zone] = slots
            }
            return woken
        }
        for continuation in continuations { continuation.resume(returning: .shutDown) }
    }

    /// Whether ``shutDown()`` was called.
    public var isShutDown: Bool {
        state.withLock { $0.shutDown }
    }

    /// Waits until `waiter`'s zone is notified (since it registered), `timeout` passes, the task
    /// is cancelled or the notifier is shut down, and says which came first.
    @discardableResult
    public func wait(_ waiter: Waiter, timeout: Duration) async -> Wake {
        // Rounded up: a wait never ends before its timeout.
        let due = tickIndex(.now + timeout) + 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (resumeNow, startTicker) = state.withLock { s -> (Wake?, Bool) in
                    switch s.zones[waiter.zone]?[waiter.id] {
                    case .armed:
                        s.zones[waiter.zone]?[waiter.id] = .waiting(continuation)
                        // After a pause with no deadline the ticker resumes from now, not from
                        // where it stopped.
                        if !s.tickerRunning { s.nextTick = max(s.nextTick, tickIndex(.now)) }
                        let tick = max(due, s.nextTick)
                        s.deadlines[tick, default: [:]][waiter.id] = waiter.zone
                        s.deadlineTicks[waiter.id] = tick
                        let start = !s.tickerRunning
                        s.tickerRunning = true
                        return (nil, start)
                    case .fired(let reason): return (reason, false)
                    case .waiting, nil: return (.notified, false)  // removed (or waited twice): nothing to wait for
                    }
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
                if startTicker { runTicker() }
            }
        } onCancel: {
            fire(waiter, .cancelled)
        }
    }

    /// Fires the timeouts tick by tick while any are pending; stops when none are (the next wait
    /// with a deadline starts it again).
    private func runTicker() {
        Task { [weak self] in
            while let self {
                let tick = self.tick
                try? await Task.sleep(for: tick)
                let now = self.tickIndex(.now)
                let (due, more) = self.state.withLock { s -> ([Waiter], Bool) in
                    var due: [Waiter] = []
                    while s.nextTick <= now {
                        if let bucket = s.deadlines.removeValue(forKey: s.nextTick) {
                            for (id, zone) in bucket {
                                s.deadlineTicks[id] = nil
                                due.append(Waiter(zone: zone, id: id))
                            }
                        }
                        s.nextTick += 1
                    }
                    if s.deadlines.isEmpty || s.shutDown {
                        s.deadlines = [:]
                        s.deadlineTicks = [:]
                        s.tickerRunning = false
                        return (due, false)
                    }
                    return (due, true)
                }
                for waiter in due { self.fire(waiter, .timedOut) }
                if !more { return }
            }
        }
    }

    /// Ends `waiter`'s wait (now, or at once when it begins) as ``Wake/cancelled``: its client
    /// went away.
    public func cancel(_ waiter: Waiter) {
        fire(waiter, .cancelled)
    }

    /// Forgets `waiter` (waking it if it still waits).
    public func remove(_ waiter: Waiter) {
        let continuation = state.withLock { s -> CheckedContinuation<Wake, Never>? in
            Self.dropDeadline(waiter.id, &s)
            let slot = s.zones[waiter.zone]?.removeValue(forKey: waiter.id)
            if s.zones[waiter.zone]?.isEmpty == true { s.zones[waiter.zone] = nil }
            if case .waiting(let continuation) = slot { return continuation }
            return nil
        }
        continuation?.resume(returning: .notified)
    }

    /// How many waiters are registered for `zone` (for tests and metrics).
    public func waiterCount(zone: String) -> Int {
        state.withLock { $0.zones[zone]?.count ?? 0 }
    }

    /// How many waits have a timeout pending (only waits in progress: for tests).
    var pendingTimeoutCount: Int {
        state.withLock { $0.deadlineTicks.count }
    }

    /// How many database waiters are registered, of every user (for tests and metrics).
    public var databaseWaiterCount: Int {
        state.withLock { s in s.zones.reduce(0) { $0 + ($1.key.hasPrefix(Self.databasePrefix) ? $1.value.count : 0) } }
    }

    /// How many waiters are registered across all zones (the long polls in progress, for metrics).
    public var totalWaiterCount: Int {
        state.withLock { $0.zones.values.reduce(0) { $0 + $1.count } }
    }

    private func fire(_ waiter: Waiter, _ reason: Wake) {
        let continuation = state.withLock { s -> CheckedContinuation<Wake, Never>? in
            switch s.zones[waiter.zone]?[waiter.id] {
            case .armed:
                s.zones[waiter.zone]?[waiter.id] = .fired(reason)
                return nil
            case .waiting(let continuation):
                s.zones[waiter.zone]?[waiter.id] = .fired(reason)
                Self.dropDeadline(waiter.id, &s)
                return continuation
            case .fired, nil:
                return nil  // the first reason stands
            }
        }
        continuation?.resume(returning: reason)
    }

    /// Takes a waiter's timeout out of its bucket (it woke, or was removed).
    private static func dropDeadline(_ id: UInt64, _ s: inout State) {
        guard let tick = s.deadlineTicks.removeValue(forKey: id) else { return }
        s.deadlines[tick]?[id] = nil
        if s.deadlines[tick]?.isEmpty == true { s.deadlines[tick] = nil }
    }
}
