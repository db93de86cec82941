public import StrataCore

/// The body of `POST /v1/zones/{zone}/state-digests`: one round of a state bisection
/// (`StateBisection`) — at most ``maxQuestions`` questions of at most ``maxRanges`` object ID
/// ranges each — about the zone's state at `position` and `generation` (absent in the first round:
/// the zone's end, which the answer names, and the following rounds name again), in the zone's
/// life `epoch`.
public struct StateDigestQuestions: Sendable, Hashable, Codable {
    public static let maxQuestions = 4
    public static let maxRanges = StateBisection.maxRangesPerRequest
    /// The most objects one answer carries in all.
    public static let maxObjects = StateBisection.maxObjectsPerAnswer

    public var epoch: UInt64
    public var position: UInt64?
    /// The zone's generation the first answer named: a device state merged into the zone since
    /// (which replaces its state without moving its position) is refused `tokenExpired`.
    public var generation: UInt64?
    public var questions: [StateDigestQuestion]

    public init(epoch: UInt64, position: UInt64?, generation: UInt64? = nil, questions: [StateDigestQuestion]) {
        self.epoch = epoch
        self.position = position
        self.generation = generation
        self.questions = questions
    }
}

/// A question: the digests of object ID ranges, or the objects (with their fingerprints) in
/// ranges; each range `[first, last]`, IDs as `ObjectID` writes them, sorted and disjoint.
/// Exactly one of the two.
public struct StateDigestQuestion: Sendable, Hashable, Codable {
    public var digests: [[String]]?
    public var objects: [[String]]?

    public init(_ request: StateBisection.Request) {
        switch request {
        case .digests(let ranges): digests = ranges.map { [$0.lowerBound.description, $0.upperBound.description] }
        case .objects(let ranges): objects = ranges.map { [$0.lowerBound.description, $0.upperBound.description] }
        }
    }

    /// The question as the bisection asks it, or why it does not read.
    public func request() -> Result<StateBisection.Request, DigestWireProblem> {
        switch (digests, objects) {
        case (let pairs?, nil): Self.ranges(pairs).map(StateBisection.Request.digests)
        case (nil, let pairs?): Self.ranges(pairs).map(StateBisection.Request.objects)
        default: .failure(DigestWireProblem("a state question has both digests and objects, or neither"))
        }
    }

    public var rangeCount: Int { (digests?.count ?? 0) + (objects?.count ?? 0) }

    static func ranges(_ pairs: [[String]]) -> Result<[ClosedRange<ObjectID>], DigestWireProblem> {
        var ranges: [ClosedRange<ObjectID>] = []
        for pair in pairs {
            guard pair.count == 2, let first = ObjectID(pair[0]), let last = ObjectID(pair[1]), first <= last else {
                return .failure(DigestWireProblem("a range is not [first, last] of two object IDs with first ≤ last: \(pair.prefix(3).map { String($0.prefix(40)) })"))
            }
            if let previous = ranges.last, first <= previous.upperBound {
                return .failure(DigestWireProblem("object ranges are not sorted and disjoint at [\(first), \(last)]"))
            }
            ranges.append(first...last)
        }
        return .success(ranges)
    }
}

/// The answer to ``StateDigestQuestions``: the position and generation the state is of, and one
/// answer per question.
public struct StateDigestAnswers: Sendable, Hashable, Codable {
    public var position: UInt64
    public var generation: UInt64
    public var answers: [StateDigestAnswer]

    public init(position: UInt64, generation: UInt64, answers: [StateDigestAnswer]) {
        self.position = position
        self.generation = generation
        self.answers = answers
    }
}

/// Digests (`count` and the 128-bit `sum` as 32 hex digits), or objects (`id` and the 128-bit
/// state `fingerprint` as 32 hex digits).
public struct StateDigestAnswer: Sendable, Hashable, Codable {
    public struct Object: Sendable, Hashable, Codable {
        public var id: String
        public var fingerprint: String
    }
    public var digests: [DigestAnswer.Sum]?
    public var objects: [Object]?

    public init(_ answer: StateBisection.Answer) {
        switch answer {
        case .digests(let sums):
            digests = sums.map { DigestAnswer.Sum(count: $0.count, sum: DigestAnswer.hex($0.high, $0.low)) }
        case .objects(let objects):
            self.objects = objects.map { Object(id: $0.id.description, fingerprint: DigestAnswer.hex($0.fingerprint.high, $0.fingerprint.low)) }
        }
    }

    /// The answer as the bisection takes it, or why it does not read.
    public func answer() -> Result<StateBisection.Answer, DigestWireProblem> {
        switch (digests, objects) {
        case (let sums?, nil):
            var parsed: [DigestSum] = []
            for sum in sums {
                guard let (high, low) = DigestAnswer.words(sum.sum) else { return .failure(DigestWireProblem("a state digest is not 32 hex digits: \(sum.sum.prefix(40))")) }
                parsed.append(DigestSum(count: sum.count, high: high, low: low))
            }
            return .success(.digests(parsed))
        case (nil, let objects?):
            var parsed: [ObjectFingerprint] = []
            for object in objects {
                guard let id = ObjectID(object.id) else { return .failure(DigestWireProblem("\"\(object.id.prefix(40))\" is not an object ID")) }
                guard let (high, low) = DigestAnswer.words(object.fingerprint) else {
                    return .failure(DigestWireProblem("the fingerprint of object \(id) is not 32 hex digits"))
                }
                parsed.append(ObjectFingerprint(id: id, fingerprint: Fingerprint(high: high, low: low)))
            }
            return .success(.objects(parsed))
        default:
            return .failure(DigestWireProblem("a state answer has both digests and objects, or neither"))
        }
    }
}
