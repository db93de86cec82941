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
    }

    private let state = Mutex(State())

    public init() {}

    /// Registers a waiter for changes of `zone`.
    public func register(zone: String) -> Waiter {
        state.withLock { s in
            s.nextID += 1
            s.zones[zone, default: [:]][s.nextID] = s.shutDown ? .fired(.shutDown) : .armed
            return Waiter(zone: zone, id: s.nextID)
        }
    }

    /// The key of the waiters that wake on a change of any zone: the database changes' long
    /// polls (`GET /v1/database/changes`), which then look whether a zone of their caller changed.
    public static let anyZone = "\u{0}database"

    /// Wakes every waiter of `zone`, and those of ``anyZone``.
    public func notify(zone: String) {
        let continuations = state.withLock { s -> [CheckedContinuation<Wake, Never>] in
            var woken: [CheckedContinuation<Wake, Never>] = []
            for key in zone == Self.anyZone ? [zone] : [zone, Self.anyZone] {
                guard var slots = s.zones[key] else { continue }
                for (id, slot) in slots {
                    switch slot {
                    case .waiting(let continuation): woken.append(continuation)
                    case .fired: continue  // keeps the first reason
                    case .armed: break
                    }
                    slots[id] = .fired(.notified)
                }
                s.zones[key] = slots
            }
            return woken
        }
        for continuation in continuations { continuation.resume(returning: .notified) }
    }

    /// Wakes every waiter of every zone once, as ``notify(zone:)`` does for one (the users were
    /// reloaded: each long poll checks its caller again).
    public func notifyAll() {
        let zones = state.withLock { Array($0.zones.keys) }
        for zone in zones { notify(zone: zone) }
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
                    case .waiting(let continuation): woken.append(continuation)
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
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }  // cancelled: woken already
            self?.fire(waiter, .timedOut)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { s -> Wake? in
                    switch s.zones[waiter.zone]?[waiter.id] {
                    case .armed:
                        s.zones[waiter.zone]?[waiter.id] = .waiting(continuation)
                        return nil
                    case .fired(let reason): return reason
                    case .waiting, nil: return .notified  // removed (or waited twice): nothing to wait for
                    }
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            fire(waiter, .cancelled)
        }
    }

    /// Forgets `waiter` (waking it if it still waits).
    public func remove(_ waiter: Waiter) {
        let continuation = state.withLock { s -> CheckedContinuation<Wake, Never>? in
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
                return continuation
            case .fired, nil:
                return nil  // the first reason stands
            }
        }
        continuation?.resume(returning: reason)
    }
}
