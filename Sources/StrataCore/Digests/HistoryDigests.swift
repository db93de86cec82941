/// A side's history by content: for each replica, the events it holds with their content
/// (``SequenceDigests``). What it holds *without* content — events folded into a snapshot or
/// into an adopted state, or withheld by a download mask — is not in it: those are compared by
/// which sequences were applied (a projection's applied sets) and by the state they left.
public struct HistoryDigests: Sendable {
    public private(set) var replicas: [ReplicaID: SequenceDigests] = [:]

    public init(replicas: [ReplicaID: SequenceDigests] = [:]) {
        self.replicas = replicas
    }

    /// Collects fingerprints transaction by transaction, then sorts them once.
    package struct Builder {
        private var pairs: [ReplicaID: [SequenceDigests.Held]] = [:]

        package init() {}

        /// - Parameters:
        ///   - localOnly: the local-only attributes of the store's schema (entity name →
        ///     attribute names), left out of the fingerprints of `own` replicas' events.
        ///   - own: the store's own replicas (its replica and those it forked from).
        package mutating func add(_ transaction: DecodedTransaction, leavingOut localOnly: [String: Set<String>] = [:], own: Set<ReplicaID> = []) {
            // The replica's list is taken out and put back, so that it is appended to in place
            // (one hash lookup a transaction, not one an event, and no array per transaction).
            var list = pairs.removeValue(forKey: transaction.replica) ?? []
            transaction.fingerprints(leavingOut: own.contains(transaction.replica) ? localOnly : [:]) { list.append($0) }
            if !list.isEmpty { pairs[transaction.replica] = list }
        }

        package func finish() -> HistoryDigests {
            HistoryDigests(replicas: pairs.mapValues { SequenceDigests(held: $0) })
        }
    }

    /// Every replica's held ranges (the first question of a bisection).
    public var contentRanges: [ReplicaID: [Range<UInt64>]] { replicas.mapValues(\.ranges) }
}

/// One side of a digest comparison: a store's ``HistoryDigests`` here, a server's zone across
/// the network. Each call is one round trip of a remote bisection.
public protocol HistoryDigestSource: Sendable {
    /// Per replica, the sequence ranges whose events this side holds with their content.
    func contentRanges() async throws -> [ReplicaID: [Range<UInt64>]]
    /// The answers to one round of a bisection, in order.
    func answer(_ requests: [DigestBisection.Request]) async throws -> [DigestBisection.Answer]
}

extension HistoryDigests: HistoryDigestSource {
    public func contentRanges() async throws -> [ReplicaID: [Range<UInt64>]] { contentRanges }

    public func answer(_ requests: [DigestBisection.Request]) async throws -> [DigestBisection.Answer] {
        requests.map(answerNow)
    }

    /// The answer to `request`, at once (the other side is in this process).
    public func answerNow(_ request: DigestBisection.Request) -> DigestBisection.Answer {
        switch request {
        case .digests(let replica, let pieces):
            .digests(pieces.map { replicas[replica]?.digest($0) ?? .zero })
        case .fingerprints(let replica, let ranges):
            .fingerprints(replicas[replica]?.fingerprints(in: ranges) ?? [])
        }
    }
}
