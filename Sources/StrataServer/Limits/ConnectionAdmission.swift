import Logging
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
    /// How long a connection must have been idle before it may be closed for another: a real
    /// client sends its request at once, and one between two requests may be about to send.
    let sheddableAfter: Duration
    /// How far past the cap admissions may run while the connections closed for them have not
    /// closed yet (each stays counted until then).
    static let shedOvershoot = 32
    private let trustedProxies: Set<String>
    private struct Idle {
        var channel: any Channel
        var since: ContinuousClock.Instant
        var stamp: UInt64
    }
    private struct State {
        var total = 0
        var byAddress: [String: Int] = [:]
        /// Channels admitted and not yet released: only these may be marked idle (a refused
        /// connection, answered 503 and closing, is no room to make).
        var admitted: Set<ObjectIdentifier> = []
        /// Admitted connections with no request in flight or begun, by connection number.
        var idle: [UInt64: Idle] = [:]
        /// The idle connections in the order they became idle (entries whose stamp no longer
        /// matches are stale and skipped): the longest idle is found without a scan.
        var queue: [(connection: UInt64, stamp: UInt64)] = []
        var head = 0
        var stamps: UInt64 = 0
        var nextConnection: UInt64 = 0

        /// Takes the connection idle the longest, if it has been idle since `before`.
        mutating func takeOldest(idleSince before: ContinuousClock.Instant) -> (any Channel)? {
            while head < queue.count {
                let entry = queue[head]
                guard let idle = idle[entry.connection], idle.stamp == entry.stamp else {
                    head += 1
                    continue
                }
                guard idle.since <= before else { return nil }
                head += 1
                self.idle[entry.connection] = nil
                compact()
                return idle.channel
            }
            compact()
            return nil
        }

        mutating func compact() {
            if head > 1024, head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
        }
    }
    private let state = Mutex(State())
    /// Where the open connections are shown (`strata_open_connections`).
    private let metrics: ServerMetrics?

    /// - Parameter openFilesLimit: the process's soft open-files limit (read now by default;
    ///   `nil`: unknown, no room limit from it). `openNow`: descriptors the process holds already
    ///   (the storage's, read now by default on Linux).
    init(limits: ServerConfiguration.Limits, metrics: ServerMetrics? = nil, openFilesLimit: UInt64? = FileDescriptorLimit.soft(),
         openNow: Int = FileDescriptorLimit.openNow()) {
        self.metrics = metrics
        maxConnections = max(1, limits.maxConnections)
        maxPerAddress = max(1, limits.maxConnectionsPerAddress)
        descriptorRoom = FileDescriptorLimit.connectionRoom(under: openFilesLimit, openNow: openNow)
        self.sheddableAfter = limits.shedIdleAfter
        trustedProxies = Set(limits.trustedProxies)
    }

    /// The most connections open at once.
    var capacity: Int { min(maxConnections, descriptorRoom) }

    /// Says at start what the cap is when the open-files limit lowered it.
    func logCapacity(_ logger: Logger) {
        guard descriptorRoom < maxConnections else { return }
        logger.notice("the connection cap is lowered to what the open-files limit leaves room for; at the cap the longest-idle connection is closed for a new one", metadata: [
            "connectionCap": "\(capacity)", "maxConnections": "\(maxConnections)",
            "openFilesLimit": "\(FileDescriptorLimit.soft().map { "\($0)" } ?? "-")",
        ])
    }

    /// What ``admit(_:channel:)`` decided.
    struct Admission {
        /// Why the connection may not open (`nil`: admitted).
        var refusal: Refusal?
        /// An idle connection to close to make room for the admitted one.
        var shed: (any Channel)?
    }

    /// Counts a new connection from `address` (`nil` when the peer has none, a Unix socket's),
    /// or says why it may not open; at the cap, names the idle connection to close for it (one
    /// idle for at least ``sheddableAfter``). Every admitted connection is given back with
    /// ``release(_:channel:)``.
    func admit(_ address: String?, channel: any Channel) -> Admission {
        let perAddress = address.flatMap { trustedProxies.contains($0) ? nil : $0 }
        let capacity = self.capacity
        let before = ContinuousClock.now - sheddableAfter
        return state.withLock { state -> Admission in
            if let perAddress, state.byAddress[perAddress, default: 0] >= maxPerAddress {
                return Admission(refusal: .perAddress(limit: maxPerAddress))
            }
            var shed: (any Channel)?
            if state.total >= capacity {
                // The longest idle goes; it is counted until it has closed (its release), so
                // admissions may run a little past the cap meanwhile, never further.
                guard state.total < capacity + Self.shedOvershoot, let oldest = state.takeOldest(idleSince: before) else {
                    return Admission(refusal: .total(limit: capacity))
                }
                shed = oldest
            }
            if let perAddress { state.byAddress[perAddress, default: 0] += 1 }
            state.total += 1
            state.admitted.insert(ObjectIdentifier(channel))
            metrics?.setOpenConnections(state.total)
            return Admission(refusal: nil, shed: shed)
        }
    }

    /// Gives back a connection ``admit(_:channel:)`` counted.
    func release(_ address: String?, channel: any Channel) {
        let perAddress = address.flatMap { trustedProxies.contains($0) ? nil : $0 }
        state.withLock { state in
            state.total = max(0, state.total - 1)
            state.admitted.remove(ObjectIdentifier(channel))
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

    /// The connection has nothing in flight and no request begun: it may be closed for another
    /// (once admitted; a refused one is ignored).
    func idle(_ connection: UInt64, _ channel: any Channel) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard state.admitted.contains(ObjectIdentifier(channel)) else { return }
            if state.idle[connection] != nil { return }
            state.stamps += 1
            state.idle[connection] = Idle(channel: channel, since: now, stamp: state.stamps)
            state.queue.append((connection, state.stamps))
            // Entries go stale as connections turn busy, and only a shed at the cap skips them:
            // rebuilt from the live ones when stale ones outnumber them, so that a server below
            // its cap does not keep one entry per request it ever answered.
            if state.queue.count - state.head > 4 * state.idle.count + 1024 {
                state.queue = state.idle.map { ($0.key, $0.value.stamp) }.sorted { $0.1 < $1.1 }
                state.head = 0
            }
        }
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
