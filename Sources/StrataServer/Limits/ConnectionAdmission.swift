import Synchronization

/// Counts open connections, in all and per client address, and admits a new one only under
/// ``ServerConfiguration/Limits/maxConnections`` and
/// ``ServerConfiguration/Limits/maxConnectionsPerAddress``. Connections from a trusted proxy count
/// only towards the total: many clients share them.
final class ConnectionAdmission: Sendable {
    /// Why a connection was refused.
    enum Refusal: Sendable, Hashable {
        case total(limit: Int)
        case perAddress(limit: Int)
    }

    let maxConnections: Int
    let maxPerAddress: Int
    private let trustedProxies: Set<String>
    private struct State {
        var total = 0
        var byAddress: [String: Int] = [:]
    }
    private let state = Mutex(State())
    /// Where the open connections are shown (`strata_open_connections`).
    private let metrics: ServerMetrics?

    init(limits: ServerConfiguration.Limits, metrics: ServerMetrics? = nil) {
        self.metrics = metrics
        maxConnections = max(1, limits.maxConnections)
        maxPerAddress = max(1, limits.maxConnectionsPerAddress)
        trustedProxies = Set(limits.trustedProxies)
    }

    /// Counts a new connection from `address` (`nil` when the peer has none, a Unix socket's),
    /// or says why it may not open. Every admitted connection is given back with ``release(_:)``.
    func admit(_ address: String?) -> Refusal? {
        let perAddress = address.flatMap { trustedProxies.contains($0) ? nil : $0 }
        return state.withLock { state -> Refusal? in
            guard state.total < maxConnections else { return .total(limit: maxConnections) }
            if let perAddress {
                let open = state.byAddress[perAddress, default: 0]
                guard open < maxPerAddress else { return .perAddress(limit: maxPerAddress) }
                state.byAddress[perAddress] = open + 1
            }
            state.total += 1
            metrics?.setOpenConnections(state.total)
            return nil
        }
    }

    /// Gives back a connection ``admit(_:)`` counted.
    func release(_ address: String?) {
        let perAddress = address.flatMap { trustedProxies.contains($0) ? nil : $0 }
        state.withLock { state in
            state.total = max(0, state.total - 1)
            metrics?.setOpenConnections(state.total)
            if let perAddress, let open = state.byAddress[perAddress] {
                // Forgotten at zero, so that the table holds only addresses with connections.
                state.byAddress[perAddress] = open > 1 ? open - 1 : nil
            }
        }
    }

    /// Connections open now, in all.
    var openConnections: Int { state.withLock { $0.total } }
}
