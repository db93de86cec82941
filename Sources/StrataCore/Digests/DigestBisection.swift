/// Finds the events two sides both hold whose content differs (a forked replica: one ID, two
/// events; a value changed after it was written) by exchanging digests of sequence ranges and
/// descending only into the ranges whose digests differ.
///
/// Per replica, the comparison covers the sequences both sides hold with content. Its root is one
/// digest; a differing range is cut into `fanOut` pieces whose digests are asked for at once; a
/// range of at most `leafSize` events is compared event by event. With one differing event among
/// n, that is about log_fanOut(n / leafSize) + 2 round trips and a few kilobytes, whatever n is.
///
/// Every replica is compared at once: a round asks one question per replica still differing.
/// A state machine — ``nextRequests()``, then ``receive(_:)`` with the other side's answers — so
/// that one algorithm serves another store in this process (``compare(_:with:fanOut:leafSize:limit:)``) and a server
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
        /// The other side's HLC of each differing event, where it sent one (a server before
        /// release 0.16 does not): with this side's own, what orders them in the merge order.
        public var otherClocks: [EventID: UInt64] = [:]
        /// Round trips to the other side (the first, for its held ranges, included).
        public var rounds = 1
        /// The bytes those round trips carry in a compact binary form: 16 per replica or range
        /// asked about, 24 per digest or fingerprint answered.
        public var bytesExchanged = 0
    }

    /// One replica's comparison: the pieces of the level being asked about, the events found.
    private struct ReplicaState: Sendable {
        let replica: ReplicaID
        let mine: SequenceDigests
        /// Pieces whose digests are wanted next, and ranges whose fingerprints are.
        var inner: [[Range<UInt64>]]
        var leaves: [Range<UInt64>] = []
        /// Pieces cut from those whose digests differed: the next level.
        var next: [[Range<UInt64>]] = []
        var found: [UInt64] = []
        /// The other side's HLCs of the events found, where it sent them.
        var clocks: [UInt64: UInt64] = [:]
        /// Whether pieces were left unexplored once `limit` events were found.
        var cut = false
        var done = false
        /// What the last request asked (to check the answer against it).
        var asked: Request?
    }

    private let fanOut: Int
    private let leafSize: Int
    private let limit: Int
    private var states: [ReplicaState]
    /// The states the last ``nextRequests()`` asked about, in its order.
    private var askedStates: [Int] = []
    public private(set) var outcome = Outcome()

    /// - Parameters:
    ///   - local: this side's digests.
    ///   - remoteRanges: what the other side answered to ``HistoryDigestSource/contentRanges()``.
    ///   - fanOut: how many pieces a range whose digests differ is cut into.
    ///   - leafSize: the most events of a range compared event by event rather than cut again.
    ///   - limit: the most differing events named per replica (the earliest).
    public init(local: HistoryDigests, remoteRanges: [ReplicaID: [Range<UInt64>]], fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) {
        self.fanOut = max(2, fanOut)
        self.leafSize = max(1, leafSize)
        self.limit = max(1, limit)
        outcome.bytesExchanged = 16 + remoteRanges.reduce(0) { $0 + 16 + 16 * $1.value.count }
        states = local.replicas.keys.sorted().compactMap { replica in
            guard let mine = local.replicas[replica], let theirs = remoteRanges[replica] else { return nil }
            let shared = SequenceRangeSet.intersection(mine.ranges, theirs)
            return shared.isEmpty ? nil : ReplicaState(replica: replica, mine: mine, inner: SequenceRangeSet.bounded([shared]))
        }
    }

    /// The next round's questions, one for each replica still being compared (empty when the
    /// comparison is done: see ``outcome``).
    public mutating func nextRequests() -> [Request] {
        askedStates = []
        var requests: [Request] = []
        for i in states.indices where !states[i].done {
            var state = states[i]
            let request = advance(&state)
            state.asked = request
            states[i] = state
            guard let request else { continue }
            askedStates.append(i)
            requests.append(request)
        }
        return requests
    }

    /// Takes the other side's answers to the questions ``nextRequests()`` gave last, in order.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the answers do not fit the questions.
    public mutating func receive(_ answers: [Answer]) throws {
        guard answers.count == askedStates.count, !askedStates.isEmpty else {
            throw StoreError(.corruptEvent, "the other side gave \(answers.count) answers to \(askedStates.count) digest questions")
        }
        outcome.rounds += 1
        for (i, answer) in zip(askedStates, answers) {
            var state = states[i]
            try receive(answer, into: &state)
            states[i] = state
        }
        askedStates = []
    }

    /// The request of a replica's next step, or `nil` once it is done.
    private mutating func advance(_ s: inout ReplicaState) -> Request? {
        if !s.inner.isEmpty { return .digests(s.replica, pieces: s.inner) }
        if !s.leaves.isEmpty { return .fingerprints(s.replica, ranges: s.leaves) }
        // A level done: the pieces cut from those whose digests differed are the next one. Once
        // `limit` events are found, a piece after the limit-th cannot hold an earlier one: it is
        // left (the list may be longer than shown).
        var frontier = s.next
        s.next = []
        s.found.sort()
        if s.found.count >= limit {
            let bound = s.found[limit - 1]
            let before = frontier.count
            frontier = frontier.filter { ($0.first?.lowerBound ?? .max) < bound }
            if frontier.count < before { s.cut = true }
        }
        if frontier.isEmpty {
            finish(&s)
            return nil
        }
        s.inner = frontier
        return .digests(s.replica, pieces: s.inner)
    }

    private mutating func receive(_ answer: Answer, into s: inout ReplicaState) throws {
        switch (answer, s.asked) {
        case (.digests(let sums), .digests?):
            guard sums.count == s.inner.count else {
                throw StoreError(.corruptEvent, "the other side answered \(sums.count) digests for \(s.inner.count) ranges of replica \(s.replica)")
            }
            outcome.bytesExchanged += 16 + s.inner.reduce(0) { $0 + 16 * $1.count } + 24 * sums.count
            // Each differing piece holds at least one differing event: the first `limit` of them
            // hold the earliest `limit` events, so no more are explored (the questions of a round
            // stay within limit × fanOut pieces and limit × leafSize fingerprints per replica).
            var differing = zip(s.inner, sums).filter { piece, sum in sum != s.mine.digest(piece) }.map(\.0)
            if differing.count > limit {
                differing.removeLast(differing.count - limit)
                s.cut = true
            }
            for piece in differing {
                if SequenceRangeSet.count(piece) <= UInt64(leafSize) {
                    s.leaves.append(contentsOf: piece)
                } else {
                    s.next.append(contentsOf: SequenceRangeSet.bounded(SequenceRangeSet.split(piece, into: fanOut)))
                }
            }
            s.inner = []
        case (.fingerprints(let theirs), .fingerprints?):
            outcome.bytesExchanged += 16 + 16 * s.leaves.count + 24 * theirs.count
            var byID: [UInt64: SequenceFingerprint] = [:]
            for one in theirs where byID[one.sequence] == nil { byID[one.sequence] = one }
            // A sequence the answer leaves out is no longer held there (retired by a compaction
            // since the held ranges were given): unknown, not different.
            for own in s.mine.fingerprints(in: s.leaves) {
                if let theirs = byID[own.sequence], theirs.fingerprint != own.fingerprint {
                    s.found.append(own.sequence)
                    s.clocks[own.sequence] = theirs.hlc
                }
            }
            s.leaves = []
        default:
            throw StoreError(.corruptEvent, "the other side answered a question about replica \(s.replica) that was not asked")
        }
        s.asked = nil
    }

    private mutating func finish(_ s: inout ReplicaState) {
        s.found.sort()
        if s.found.count > limit {
            s.found.removeLast(s.found.count - limit)
            s.cut = true
        }
        if s.cut { outcome.truncated = true }
        outcome.differing += s.found.map { EventID(replica: s.replica, sequence: $0) }
        outcome.differing.sort()
        for sequence in s.found {
            if let hlc = s.clocks[sequence] { outcome.otherClocks[EventID(replica: s.replica, sequence: sequence)] = hlc }
        }
        s.done = true
    }

    /// Compares `local` with another side's digests held in this process.
    public static func compare(_ local: HistoryDigests, with other: HistoryDigests, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) throws -> Outcome {
        var bisection = DigestBisection(local: local, remoteRanges: other.contentRanges, fanOut: fanOut, leafSize: leafSize, limit: limit)
        while case let requests = bisection.nextRequests(), !requests.isEmpty { try bisection.receive(requests.map(other.answerNow)) }
        return bisection.outcome
    }

    /// The other side's HLC of each of `events` it holds with content (events it lacks, or whose
    /// HLC it does not send, are left out): one more round trip, a single-sequence range each.
    /// What orders the first event a side lacks of each replica in the merge order.
    public static func clocks(of events: [EventID], from other: some HistoryDigestSource) async throws -> [EventID: UInt64] {
        let byReplica = Dictionary(grouping: Set(events), by: \.replica)
        let requests = byReplica.keys.sorted().map { replica in
            Request.fingerprints(replica, ranges: byReplica[replica, default: []].map(\.sequence).sorted().map { $0..<$0 + 1 })
        }
        guard !requests.isEmpty else { return [:] }
        let answers = try await other.answer(requests)
        guard answers.count == requests.count else {
            throw StoreError(.corruptEvent, "the other side gave \(answers.count) answers to \(requests.count) questions about clocks")
        }
        var clocks: [EventID: UInt64] = [:]
        for (request, answer) in zip(requests, answers) {
            guard case .fingerprints(let replica, let ranges) = request, case .fingerprints(let prints) = answer else {
                throw StoreError(.corruptEvent, "the other side answered digests to a question about fingerprints")
            }
            let asked = Set(ranges.map(\.lowerBound))
            for print in prints where asked.contains(print.sequence) {
                if let hlc = print.hlc { clocks[EventID(replica: replica, sequence: print.sequence)] = hlc }
            }
        }
        return clocks
    }

    /// Compares `local` with a side across the network, one round trip per step.
    public static func run(local: HistoryDigests, remote: some HistoryDigestSource, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 100) async throws -> Outcome {
        var bisection = DigestBisection(local: local, remoteRanges: try await remote.contentRanges(), fanOut: fanOut, leafSize: leafSize, limit: limit)
        while case let requests = bisection.nextRequests(), !requests.isEmpty { try bisection.receive(try await remote.answer(requests)) }
        return bisection.outcome
    }
}
