/// Finds the objects whose state differs between two sides — held by both with other values, or
/// existing on one side only — by exchanging digests of object ID ranges (``StateDigests``) and
/// descending only into the ranges whose digests differ.
///
/// Where ``DigestBisection`` compares histories (which events each holds, with what content),
/// this compares what the histories produced: it finds a merge that went wrong on one side, or a
/// difference in objects whose events one side no longer holds (compacted into a snapshot).
///
/// A differing range is cut into `fanOut` pieces: at this side's own objects' quantiles when it
/// holds at least as many objects there as the other (the pieces then hold about as many each,
/// whatever the IDs look like), else into equal widths of the ID space (this side may hold none
/// of the other's objects there). A range where neither side holds more than `leafSize` objects
/// is compared object by object. With one differing object among n, that is about
/// log_fanOut(n / leafSize) + 2 round trips.
///
/// A state machine — ``nextRequests()``, then ``receive(_:)`` — as ``DigestBisection`` is.
public struct StateBisection: Sendable {
    public enum Request: Sendable, Hashable {
        /// The digest of each range.
        case digests([ClosedRange<ObjectID>])
        /// Every object in the ranges with its fingerprint, in ID order.
        case objects([ClosedRange<ObjectID>])
    }

    public enum Answer: Sendable, Hashable {
        case digests([DigestSum])
        case objects([ObjectFingerprint])
    }

    public struct Outcome: Sendable {
        /// Objects both sides hold with other states, in ID order.
        public var differing: [ObjectID] = []
        /// Objects that exist on this side only, and on the other side only.
        public var onlyHere: [ObjectID] = []
        public var onlyThere: [ObjectID] = []
        /// Whether more may differ than were listed (`limit` reached).
        public var truncated = false
        public var rounds = 0
        /// What the round trips carry in a compact binary form: 32 bytes per range asked about,
        /// 24 per digest and 32 per object answered.
        public var bytesExchanged = 0

        /// Every object found, in ID order.
        public var all: [ObjectID] { (differing + onlyHere + onlyThere).sorted() }
        public var isEmpty: Bool { differing.isEmpty && onlyHere.isEmpty && onlyThere.isEmpty }
    }

    /// The most ranges one request names: a wide frontier is asked about over several rounds.
    public static let maxRangesPerRequest = 4_096
    /// The most objects one answer holds: the leaves of a round are as many as hold at most that
    /// many objects (`leafSize` each).
    public static let maxObjectsPerAnswer = 65_536
    /// The most rounds a comparison takes before the other side's answers are taken for lies:
    /// 32 levels of cuts by width reach single IDs; a wide frontier and many leaves add rounds
    /// of `maxRangesPerRequest`.
    public static let maxRounds = 256

    private let local: StateDigests
    private let fanOut: Int
    private let leafSize: Int
    private let limit: Int
    /// Ranges whose digests are to be asked for, and ranges to compare object by object.
    private var frontier: [ClosedRange<ObjectID>]
    private var leaves: [ClosedRange<ObjectID>] = []
    private var askedDigests: [ClosedRange<ObjectID>] = []
    private var askedLeaves: [ClosedRange<ObjectID>] = []
    private var found = 0
    public private(set) var outcome = Outcome()

    public init(local: StateDigests, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 1_000) {
        self.local = local
        self.fanOut = max(2, fanOut)
        self.leafSize = max(1, leafSize)
        self.limit = max(1, limit)
        frontier = [ObjectID(rawValue: 0)...ObjectID(rawValue: .max)]
    }

    /// The next round's questions (empty once the comparison is done).
    public mutating func nextRequests() -> [Request] {
        askedDigests = []
        askedLeaves = []
        guard found < limit else {
            if !frontier.isEmpty || !leaves.isEmpty { outcome.truncated = true }
            frontier = []
            leaves = []
            return []
        }
        // In ID order, so that within a round the lowest ranges are asked about first.
        frontier.sort { $0.lowerBound < $1.lowerBound }
        leaves.sort { $0.lowerBound < $1.lowerBound }
        askedDigests = Array(frontier.prefix(Self.maxRangesPerRequest))
        frontier.removeFirst(askedDigests.count)
        askedLeaves = Array(leaves.prefix(min(Self.maxRangesPerRequest, max(1, Self.maxObjectsPerAnswer / leafSize))))
        leaves.removeFirst(askedLeaves.count)
        var requests: [Request] = []
        if !askedDigests.isEmpty { requests.append(.digests(askedDigests)) }
        if !askedLeaves.isEmpty { requests.append(.objects(askedLeaves)) }
        return requests
    }

    /// Takes the other side's answers to the last ``nextRequests()``, in order.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the answers do not fit the questions.
    public mutating func receive(_ answers: [Answer]) throws {
        let expected = (askedDigests.isEmpty ? 0 : 1) + (askedLeaves.isEmpty ? 0 : 1)
        guard answers.count == expected, expected > 0 else {
            throw StoreError(.corruptEvent, "the other side gave \(answers.count) answers to \(expected) state questions")
        }
        outcome.rounds += 1
        // Honest sides finish in about log_16 of the objects, at most 32 levels of cuts by width:
        // an answer that keeps the comparison going past that is not believed.
        guard outcome.rounds <= Self.maxRounds else {
            throw StoreError(.corruptEvent, "the other side's answers kept the comparison going for \(Self.maxRounds) rounds")
        }
        var rest = answers[...]
        if !askedDigests.isEmpty, case .digests(let sums) = rest.removeFirst() {
            guard sums.count == askedDigests.count else {
                throw StoreError(.corruptEvent, "the other side answered \(sums.count) state digests for \(askedDigests.count) ranges")
            }
            outcome.bytesExchanged += 32 * askedDigests.count + 24 * sums.count
            // Each differing range holds at least one differing object: the first `limit` of them
            // (in ID order) are explored, the rest left (the list may then be longer than shown),
            // so that the questions stay within limit × fanOut ranges whatever the other side says.
            var differing = zip(askedDigests, sums).filter { range, theirs in theirs != local.digest(range) }
            if differing.count > limit {
                differing.removeLast(differing.count - limit)
                outcome.truncated = true
            }
            for (range, theirs) in differing {
                // A side cannot hold more objects than a range has IDs: an answer that says so is
                // not believed (it would make a range of one ID be cut forever).
                let width = range.upperBound.rawValue - range.lowerBound.rawValue
                if width < UInt128(UInt64.max), theirs.count > UInt64(width) + 1 {
                    throw StoreError(.corruptEvent, "the other side claims \(theirs.count) objects in [\(range.lowerBound), \(range.upperBound)], a range of \(width + 1) IDs")
                }
                let mine = local.count(in: range)
                let pieces = max(UInt64(mine), theirs.count) <= UInt64(leafSize) || width < UInt128(leafSize) ? [range]
                    : split(range, mine: mine, theirs: theirs.count)
                if pieces.count <= 1 {
                    leaves.append(range)
                } else {
                    frontier.append(contentsOf: pieces)
                }
            }
            // Ranges waiting stay within limit × fanOut (the lowest kept): a comparison's memory is
            // bounded whatever the other side answers.
            if frontier.count > limit * fanOut {
                frontier.sort { $0.lowerBound < $1.lowerBound }
                frontier.removeLast(frontier.count - limit * fanOut)
                outcome.truncated = true
            }
        } else if !askedDigests.isEmpty {
            throw StoreError(.corruptEvent, "the other side answered objects where state digests were asked for")
        }
        if !askedLeaves.isEmpty {
            guard case .objects(let theirs)? = rest.first else {
                throw StoreError(.corruptEvent, "the other side answered digests where objects were asked for")
            }
            outcome.bytesExchanged += 32 * askedLeaves.count + 32 * theirs.count
            try compare(theirs)
        }
        askedDigests = []
        askedLeaves = []
    }

    /// `range` cut into at most `fanOut` consecutive pieces.
    private func split(_ range: ClosedRange<ObjectID>, mine: Int, theirs: UInt64) -> [ClosedRange<ObjectID>] {
        if mine >= fanOut, UInt64(mine) >= theirs {
            // At this side's quantiles: each piece starts at one of its objects.
            let held = local.ids(in: range)
            var starts: [ObjectID] = [range.lowerBound]
            for k in 1..<fanOut {
                let id = held[held.startIndex + k * mine / fanOut]
                if id > starts[starts.count - 1] { starts.append(id) }
            }
            return starts.indices.map { i in
                let end = i + 1 < starts.count ? ObjectID(rawValue: starts[i + 1].rawValue - 1) : range.upperBound
                return starts[i]...end
            }
        }
        // Equal widths of the ID space (a range of one ID is a leaf by then: it holds at most one
        // object a side).
        let low = range.lowerBound.rawValue
        let width = range.upperBound.rawValue - low
        let step = width / UInt128(fanOut) + 1
        var pieces: [ClosedRange<ObjectID>] = []
        var start = low
        while true {
            let (end, overflow) = start.addingReportingOverflow(step - 1)
            if overflow || end >= range.upperBound.rawValue {
                pieces.append(ObjectID(rawValue: start)...range.upperBound)
                break
            }
            pieces.append(ObjectID(rawValue: start)...ObjectID(rawValue: end))
            start = end + 1
        }
        return pieces
    }

    /// Compares the other side's objects in the leaves asked about with this side's.
    private mutating func compare(_ theirs: [ObjectFingerprint]) throws {
        var byID: [ObjectID: Fingerprint] = [:]
        // The leaves asked about are sorted and disjoint: each object's is found by binary search.
        func inLeaf(_ id: ObjectID) -> Bool {
            let at = askedLeaves.partitionIndex { $0.upperBound >= id }
            return at < askedLeaves.count && askedLeaves[at].contains(id)
        }
        for object in theirs {
            guard inLeaf(object.id) else {
                throw StoreError(.corruptEvent, "the other side answered object \(object.id), outside the ranges asked about")
            }
            byID[object.id] = object.fingerprint
        }
        for range in askedLeaves {
            for mine in local.fingerprints(in: range) {
                if let other = byID.removeValue(forKey: mine.id) {
                    if other != mine.fingerprint { outcome.differing.append(mine.id) }
                } else {
                    outcome.onlyHere.append(mine.id)
                }
            }
        }
        outcome.onlyThere.append(contentsOf: byID.keys)
        outcome.differing.sort()
        outcome.onlyHere.sort()
        outcome.onlyThere.sort()
        found = outcome.differing.count + outcome.onlyHere.count + outcome.onlyThere.count
        if found > limit {
            // The lowest `limit` IDs among them stay listed.
            let kept = Set(outcome.all.prefix(limit))
            outcome.differing.removeAll { !kept.contains($0) }
            outcome.onlyHere.removeAll { !kept.contains($0) }
            outcome.onlyThere.removeAll { !kept.contains($0) }
            outcome.truncated = true
        }
    }

    /// Answers a question from digests held in this process.
    public static func answer(_ request: Request, from digests: StateDigests) -> Answer {
        switch request {
        case .digests(let ranges): .digests(ranges.map(digests.digest))
        case .objects(let ranges): .objects(ranges.flatMap { digests.fingerprints(in: $0) })
        }
    }

    /// Compares `local` with another side's digests held in this process.
    public static func compare(_ local: StateDigests, with other: StateDigests, fanOut: Int = 16, leafSize: Int = 64, limit: Int = 1_000) throws -> Outcome {
        var bisection = StateBisection(local: local, fanOut: fanOut, leafSize: leafSize, limit: limit)
        while case let requests = bisection.nextRequests(), !requests.isEmpty {
            try bisection.receive(requests.map { answer($0, from: other) })
        }
        return bisection.outcome
    }
}
