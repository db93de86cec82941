/// Finds the events two sides both hold whose content differs (a forked replica: one ID, two
/// events; a value changed after it was written) by exchanging digests of sequence ranges and
/// descending only into the ranges whose digests differ.
///
/// Per replica, the comparison covers the sequences both sides hold with content. Its root is one
/// digest; a differing range is cut into `fanOut` pieces whose digests are asked for at once; a
/// range of at most `leafSize` events is compared event by event. With one differing event among
/// n, that is about log_fanOut(n / leafSize) + 2 round trips and a few kilobytes, whatever n is.
///
/// A state machine — ``nextRequest()``, then ``receive(_:)`` with the other side's answer — so
/// that one algorithm serves another store in this process (``compare(_:with:)``) and a server
/// across the network (``run(local:remote:fanOut:leafSize:limit:)``).
public struct DigestBisection: Sendable {
    /// One question to the other side.
    public enum Request: Sendable, Hashable {
        /// The digest of each piece (sorted ranges of the replica's sequences).
        case digests(ReplicaID, pieces: [[Range<UInt64>]])
        /// Each held event's fingerprint in the ranges, in sequence order.
        case fingerprints(ReplicaID, ranges: [Range<UInt64>])
    }

    public enum Answer: Sendable, Hashable {
        case digests([DigestSum])
        case fingerprints([SequenceFingerprint])
    }

    public struct Outcome: Sendable {
        /// The events both hold whose content differs, in replica and sequence order; at most
        /// `limit` of each replica (the lowest sequences: a replica's earliest is among them).
        public var differing: [EventID] = []
        /// Whether a replica may have more than were listed.
        public var truncated = false
        /// Round trips to the other side (the first, for its held ranges, included).
        public var rounds = 1
        /// The bytes those round trips carry in a compact binary form: 16 per replica or range
        /// asked about, 24 per digest or fingerprint answered.
        public var bytesExchanged = 0
    }

    private let local: HistoryDigests
    private let fanOut: Int
    private let leafSize: Int
    private let limit: Int
    /// The replicas still to compare, each with the ranges both sides hold.
    private var queue: [(ReplicaID, [Range<UInt64>])]
    private var current: ReplicaID?
    private var frontier: [[Range<UInt64>]] = []
    private var next: [[Range<UInt64>]] = []
    private var inner: [[Range<UInt64>]] = []
    private var leaves: [Range<UInt64>] = []
    private var found: [UInt64] = []
    /// Whether pieces were left unexplored once `limit` events were found.
    private var cut = false
    public private(set) var outcome = Outcome()

    /// - Parameter remoteRanges: what the other side answered to ``HistoryDigestSource/contentRanges()``.
    public init(local: HistoryDigests, remoteRanges: [ReplicaID: [Range<UInt64>]], fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) {
        self.local = local
        self.fanOut = max(2, fanOut)
        self.leafSize = max(1, leafSize)
        self.limit = max(1, limit)
        outcome.bytesExchanged = 16 + remoteRanges.reduce(0) { $0 + 16 + 16 * $1.value.count }
        queue = local.replicas.keys.sorted().compactMap { replica in
            guard let mine = local.replicas[replica], let theirs = remoteRanges[replica] else { return nil }
            let shared = SequenceRangeSet.intersection(mine.ranges, theirs)
            return shared.isEmpty ? nil : (replica, shared)
        }
        queue.reverse()  // popped from the end: lowest replica first
    }

    /// The next question, or `nil` when the comparison is done (see ``outcome``).
    public mutating func nextRequest() -> Request? {
        while true {
            if let replica = current {
                if !inner.isEmpty { return .digests(replica, pieces: inner) }
                if !leaves.isEmpty { return .fingerprints(replica, ranges: leaves) }
                // A level done: the pieces cut from those whose digests differed are the next one.
                // Once `limit` events are found, a piece after the limit-th cannot hold an
                // earlier one: it is left (the list may be longer than shown).
                frontier = next
                next = []
                found.sort()
                if found.count >= limit {
                    let bound = found[limit - 1]
                    let before = frontier.count
                    frontier = frontier.filter { ($0.first?.lowerBound ?? .max) < bound }
                    if frontier.count < before { cut = true }
                }
                if frontier.isEmpty {
                    finish(replica)
                    continue
                }
                inner = frontier
                frontier = []
            } else {
                guard let (replica, shared) = queue.popLast() else { return nil }
                current = replica
                next = [shared]
            }
        }
    }

    /// Takes the other side's answer to the request ``nextRequest()`` gave last.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the answer does not fit the request.
    public mutating func receive(_ answer: Answer) throws {
        guard let replica = current, let mine = local.replicas[replica] else {
            throw StoreError(.corruptEvent, "a digest answer arrived with no question asked")
        }
        outcome.rounds += 1
        switch answer {
        case .digests(let sums):
            guard !inner.isEmpty, sums.count == inner.count else {
                throw StoreError(.corruptEvent, "the other side answered \(sums.count) digests for \(inner.count) ranges of replica \(replica)")
            }
            outcome.bytesExchanged += 16 + inner.reduce(0) { $0 + 16 * $1.count } + 24 * sums.count
            for (piece, sum) in zip(inner, sums) where sum != mine.digest(piece) {
                if SequenceRangeSet.count(piece) <= UInt64(leafSize) {
                    leaves.append(contentsOf: piece)
                } else {
                    next.append(contentsOf: SequenceRangeSet.split(piece, into: fanOut))
                }
            }
            inner = []
        case .fingerprints(let theirs):
            guard !leaves.isEmpty, inner.isEmpty else {
                throw StoreError(.corruptEvent, "the other side answered fingerprints no one asked for (replica \(replica))")
            }
            outcome.bytesExchanged += 16 + 16 * leaves.count + 24 * theirs.count
            var byID: [UInt64: Fingerprint] = [:]
            for one in theirs where byID[one.sequence] == nil { byID[one.sequence] = one.fingerprint }
            for own in mine.fingerprints(in: leaves) where byID[own.sequence] != own.fingerprint {
                found.append(own.sequence)
            }
            leaves = []
        }
    }

    private mutating func finish(_ replica: ReplicaID) {
        found.sort()
        if found.count > limit {
            found.removeLast(found.count - limit)
            cut = true
        }
        if cut { outcome.truncated = true }
        outcome.differing += found.map { EventID(replica: replica, sequence: $0) }
        found = []
        cut = false
        frontier = []
        next = []
        current = nil
    }

    /// Compares `local` with another side's digests held in this process.
    public static func compare(_ local: HistoryDigests, with other: HistoryDigests, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) throws -> Outcome {
        var bisection = DigestBisection(local: local, remoteRanges: other.contentRanges, fanOut: fanOut, leafSize: leafSize, limit: limit)
        while let request = bisection.nextRequest() { try bisection.receive(other.answerNow(request)) }
        return bisection.outcome
    }

    /// Compares `local` with a side across the network, one round trip per step.
    public static func run(local: HistoryDigests, remote: some HistoryDigestSource, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) async throws -> Outcome {
        var bisection = DigestBisection(local: local, remoteRanges: try await remote.contentRanges(), fanOut: fanOut, leafSize: leafSize, limit: limit)
        while let request = bisection.nextRequest() { try bisection.receive(try await remote.answer(request)) }
        return bisection.outcome
    }
}
