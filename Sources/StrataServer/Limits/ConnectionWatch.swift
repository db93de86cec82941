import NIOCore
import Synchronization

/// Ends the long polls of a connection whose client has gone away.
///
/// A client that stops waiting — Strata's own sync engines cut their long poll short for every
/// local commit — closes its connection. The HTTP server reads that as the end of the request
/// stream but does not tell the handler, which would hold the connection, its descriptor and
/// its task until the poll's wait ended: a minute each, piling up by the thousand at fleet scale
/// until the process runs out of descriptors. The connection's ``RequestTimeoutHandler`` reports
/// the client's close here, and a long poll registered for that connection ends at once.
///
/// Connections are told apart by the identity of their `Channel` (alive, and so unique, while
/// registered: an entry goes when its connection does).
final class ConnectionWatch: Sendable {
    /// One per process: the channel handlers and the routes of every server in it meet here.
    static let shared = ConnectionWatch()

    private struct Entry {
        /// The client closed its side (or the connection ended).
        var closed = false
        var actions: [UInt64: @Sendable () -> Void] = [:]
    }

    private struct State {
        var next: UInt64 = 0
        var entries: [ObjectIdentifier: Entry] = [:]
    }

    private let state = Mutex(State())

    /// Runs `action` once when `connection`'s client closes its side or the connection ends — at
    /// once when that has happened already. Returns what ``forget(_:_:)`` takes back.
    func onClose(_ connection: ObjectIdentifier, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let (token, runNow) = state.withLock { s -> (UInt64, Bool) in
            s.next += 1
            if s.entries[connection]?.closed == true { return (s.next, true) }
            s.entries[connection, default: Entry()].actions[s.next] = action
            return (s.next, false)
        }
        if runNow { action() }
        return token
    }

    /// Takes a registration back (the long poll ended first).
    func forget(_ connection: ObjectIdentifier, _ token: UInt64) {
        state.withLock { s in
            guard var entry = s.entries.removeValue(forKey: connection) else { return }
            entry.actions[token] = nil
            // A closed connection keeps its mark until it ends: a request still being read when
            // the client closed must not wait after it.
            if entry.closed || !entry.actions.isEmpty { s.entries[connection] = entry }
        }
    }

    /// The client closed its side: what waits for the connection runs now, and whatever
    /// registers later runs at once.
    func clientClosed(_ connection: ObjectIdentifier) {
        let actions = state.withLock { s -> [@Sendable () -> Void] in
            var entry = s.entries.removeValue(forKey: connection) ?? Entry()
            entry.closed = true
            let actions = Array(entry.actions.values)
            entry.actions = [:]
            s.entries[connection] = entry
            return actions
        }
        for action in actions { action() }
    }

    /// The connection ended: what waits for it runs now, and it is forgotten.
    func ended(_ connection: ObjectIdentifier) {
        let actions = state.withLock { s in s.entries.removeValue(forKey: connection).map { Array($0.actions.values) } ?? [] }
        for action in actions { action() }
    }

    /// Connections with a registration or a close mark (for tests).
    var count: Int { state.withLock { $0.entries.count } }
}
