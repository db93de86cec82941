import NIOCore
import Synchronization

/// Counts open connections, in all and per client address, and admits a new one only under
/// ``ServerConfiguration/Limits/maxConnections``, the room the process's open-files limit leaves
/// (after a reserve for the storage and accepts: see ``FileDescriptorLimit``), and
/// ``ServerConfiguration/Limits/maxConnectionsPerAddress``. Connections from a trusted proxy
/// count only towards the total: many clients share them.
///
/// At the total cap a new connection does not wait behind idle ones: the connection idle the
/// longest (no request in flight, none begun) is closed to make room, and only when none is idle
/// is the new one answered `503 serverBusy`. Idle connections cost a descriptor each and serve
/// nobody; without this, a few hundred of them held every descriptor and real requests timed out
/// in the kernel's accept queue.
final class ConnectionAdmission: Sendable {
    /// Why a connection was refused.
    enum Refusal: Sendable, Hashable {
        case total(limit: Int)
        case perAddress(limit: Int)
    }

    let maxConnections: Int
    let maxPerAddress: Int
    /// The connections the open-files limit leaves room for.
    let descriptorRoom: Int
    private let trustedProxies: Set<String>
    private struct Idle {
        var channel: any Channel
        var since: NIODeadline
    }
    private struct State {
        var total = 0
        var byAddress: [String: Int] = [:]
        /// Connections with no request in flight or begun, by connection number.
        var idle: [UInt64: Idle] = [:]
        var nextConnection: UInt64 = 0
    }
    private let state = Mutex(State())
    /// Where the open connections are shown (`strata_open_connections`).
    private let metrics: ServerMetrics?

    /// - Parameter openFilesLimit: the process's soft open-files limit (read now by default;
    ///   `nil`: unknown, no room limit from it).
    init(limits: ServerConfiguration.Limits, metrics: ServerMetrics? = nil, openFilesLimit: UInt64? = FileDescriptorLimit.soft()) {
        self.metrics = metrics
        maxConnections = max(1, limits.maxConnections)
        maxPerAddress = max(1, limits.maxConnectionsPerAddress)
        descriptorRoom = FileDescriptorLimit.connectionRoom(under: openFilesLimit)
        trustedProxies = Set(limits.trustedProxies)
    }

    /// The most connections open at once.
    var capacity: Int { min(maxConnections, descriptorRoom) }

    /// What ``admit(_:)`` decided.
    struct Admission {
        /// Why the connection may not open (`nil`: admitted).
        var refusal: Refusal?
        /// An idle connection to close to make room for the admitted one.
        var shed: (any Channel)?
    }

    /// Counts a new connection from `address` (`nil` when the peer has none, a Unix socket's),
    /// or says why it may not open; at the cap, names the idle connection to close for it. Every
    /// admitted connection is given back with ``release(_:)``.
    func admit(_ address: String?) -> Admission {
        let perAddress = address.flatMap { trustedProxies.contains($0) ? nil : $0 }
        let capacity = self.capacity
        return state.withLock { state -> Admission in
            if let perAddress, state.byAddress[perAddress, default: 0] >= maxPerAddress {
                return Admission(refusal: .perAddress(limit: maxPerAddress))
            }
            var shed: (any Channel)?
            if state.total >= capacity {
                // The longest idle goes; it is counted until it has closed (its release).
                guard let oldest = state.idle.min(by: { $0.value.since < $1.value.since }) else {
                    return Admission(refusal: .total(limit: capacity))
                }
                state.idle[oldest.key] = nil
                shed = oldest.value.channel
            }
            if let perAddress { state.byAddress[perAddress, default: 0] += 1 }
            state.total += 1
            metrics?.setOpenConnections(state.total)
            return Admission(refusal: nil, shed: shed)
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

    /// A number for a new connection's idle tracking.
    func connectionNumber() -> UInt64 {
        state.withLock { state in
            state.nextConnection += 1
            return state.nextConnection
        }
    }

    /// The connection has nothing in flight and no request begun: it may be closed for another.
    func idle(_ connection: UInt64, _ channel: any Channel) {
        state.withLock { $0.idle[connection] = Idle(channel: channel, since: .now()) }
    }

    /// The connection began a request, or closed.
    func busy(_ connection: UInt64) {
        _ = state.withLock { $0.idle.removeValue(forKey: connection) }
    }

    /// Connections open now, in all.
    var openConnections: Int { state.withLock { $0.total } }

    /// Connections idle now.
    var idleConnections: Int { state.withLock { $0.idle.count } }
}
