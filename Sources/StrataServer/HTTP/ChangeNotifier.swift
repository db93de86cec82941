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

    private enum Slot {
        /// Registered, not waiting yet.
        case armed
        /// Woken before it waited.
        case fired
        case waiting(CheckedContinuation<Void, Never>)
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
            s.zones[zone, default: [:]][s.nextID] = s.shutDown ? .fired : .armed
            return Waiter(zone: zone, id: s.nextID)
        }
    }

    /// Wakes every waiter of `zone`.
    public func notify(zone: String) {
        let continuations = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard var slots = s.zones[zone] else { return [] }
            var woken: [CheckedContinuation<Void, Never>] = []
            for (id, slot) in slots {
                if case .waiting(let continuation) = slot { woken.append(continuation) }
                slots[id] = .fired
            }
            s.zones[zone] = slots
            return woken
        }
        for continuation in continuations { continuation.resume() }
    }

    /// Wakes every waiter of every zone, now and from now on: after this, waits return at once.
    /// Called when the server begins to shut down. Idempotent.
    public func shutDown() {
        let continuations = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.shutDown = true
            var woken: [CheckedContinuation<Void, Never>] = []
            for (zone, var slots) in s.zones {
                for (id, slot) in slots {
                    if case .waiting(let continuation) = slot { woken.append(continuation) }
                    slots[id] = .fired
                }
                s.zones[zone] = slots
            }
            return woken
        }
        for continuation in continuations { continuation.resume() }
    }

    /// Whether ``shutDown()`` was called.
    public var isShutDown: Bool {
        state.withLock { $0.shutDown }
    }

    /// Waits until `waiter`'s zone is notified (since it registered), `timeout` passes, the task
    /// is cancelled or the notifier is shut down.
    public func wait(_ waiter: Waiter, timeout: Duration) async {
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }  // cancelled: woken already
            self?.fire(waiter)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { s -> Bool in
                    guard case .armed = s.zones[waiter.zone]?[waiter.id] else { return true }
                    s.zones[waiter.zone]?[waiter.id] = .waiting(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            fire(waiter)
        }
    }

    /// Forgets `waiter` (waking it if it still waits).
    public func remove(_ waiter: Waiter) {
        let continuation = state.withLock { s -> CheckedContinuation<Void, Never>? in
            let slot = s.zones[waiter.zone]?.removeValue(forKey: waiter.id)
            if s.zones[waiter.zone]?.isEmpty == true { s.zones[waiter.zone] = nil }
            if case .waiting(let continuation) = slot { return continuation }
            return nil
        }
        continuation?.resume()
    }

    /// How many waiters are registered for `zone` (for tests and metrics).
    public func waiterCount(zone: String) -> Int {
        state.withLock { $0.zones[zone]?.count ?? 0 }
    }

    private func fire(_ waiter: Waiter) {
        let continuation = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let slot = s.zones[waiter.zone]?[waiter.id] else { return nil }
            s.zones[waiter.zone]?[waiter.id] = .fired
            if case .waiting(let continuation) = slot { return continuation }
            return nil
        }
        continuation?.resume()
    }
}
