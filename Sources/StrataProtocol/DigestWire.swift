public import StrataCore

/// `GET /v1/zones/{zone}/digests`: which sequences of each replica the zone holds with their
/// content, in the zone's life `epoch` (a `POST` names it back; a zone deleted and created again
/// meanwhile answers `410 zoneReset`).
public struct ZoneDigestRanges: Sendable, Hashable, Codable {
    public var epoch: UInt64
    public var replicas: [ReplicaRanges]

    public init(epoch: UInt64, replicas: [ReplicaRanges]) {
        self.epoch = epoch
        self.replicas = replicas
    }
}

/// One replica's held sequences: `[first, end)` pairs, sorted and disjoint; and the highest
/// sequence of it the zone holds at all (`acknowledged`: those not in `ranges` are held only in
/// the zone's snapshot, compacted).
public struct ReplicaRanges: Sendable, Hashable, Codable {
    public var replica: String
    public var ranges: [[UInt64]]
    public var acknowledged: UInt64?

    public init(replica: ReplicaID, ranges: [Range<UInt64>], acknowledged: UInt64? = nil) {
        self.replica = replica.description
        self.ranges = ranges.map { [$0.lowerBound, $0.upperBound] }
        self.acknowledged = acknowledged
    }
}

/// The body of `POST /v1/zones/{zone}/digests`: one round of a bisection (at most
/// ``maxQuestions`` questions, each at most ``maxPieces`` pieces (none empty) and ``maxRanges``
/// ranges in all; at most ``maxRoundPieces`` pieces and ``maxRoundRanges`` ranges in the round).
public struct DigestQuestions: Sendable, Hashable, Codable {
    public static let maxQuestions = 4_096
    public static let maxPieces = 4_096
    public static let maxRanges = 16_384
    public static let maxRoundPieces = 16_384
    public static let maxRoundRanges = 65_536
    /// The most fingerprints one answer carries in all.
    public static let maxFingerprints = 65_536

    public var epoch: UInt64
    public var questions: [DigestQuestion]

    public init(epoch: UInt64, questions: [DigestQuestion]) {
        self.epoch = epoch
        self.questions = questions
    }
}

/// A question about one replica: the digests of `pieces` (each a list of `[first, end)` ranges),
/// or the fingerprints of the events held in `fingerprints` (a list of ranges). Exactly one of
/// the two.
public struct DigestQuestion: Sendable, Hashable, Codable {
    public var replica: String
    public var pieces: [[[UInt64]]]?
    public var fingerprints: [[UInt64]]?

    public init(_ request: DigestBisection.Request) {
        switch request {
        case .digests(let replica, let pieces):
            self.replica = replica.description
            self.pieces = pieces.map { $0.map { [$0.lowerBound, $0.upperBound] } }
        case .fingerprints(let replica, let ranges):
            self.replica = replica.description
            fingerprints = ranges.map { [$0.lowerBound, $0.upperBound] }
        }
    }

    /// The question as the bisection asks it; `nil` (with the reason) when it does not read.
    public func request() -> Result<DigestBisection.Request, DigestWireProblem> {
        guard let replica = ReplicaID(replica) else { return .failure(DigestWireProblem("replica \"\(replica.prefix(64))\" is not a replica ID")) }
        switch (pieces, fingerprints) {
        case (let pieces?, nil):
            var parsed: [[Range<UInt64>]] = []
            for piece in pieces {
                switch Self.ranges(piece) {
                case .success(let ranges): parsed.append(ranges)
                case .failure(let problem): return .failure(problem)
                }
            }
            return .success(.digests(replica, pieces: parsed))
        case (nil, let ranges?):
            return Self.ranges(ranges).map { .fingerprints(replica, ranges: $0) }
        default:
            return .failure(DigestWireProblem("a question about replica \(replica) has both pieces and fingerprints, or neither"))
        }
    }

    /// `[first, end)` pairs, sorted and disjoint.
    public static func ranges(_ pairs: [[UInt64]]) -> Result<[Range<UInt64>], DigestWireProblem> {
        var ranges: [Range<UInt64>] = []
        for pair in pairs {
            guard pair.count == 2, pair[0] < pair[1] else { return .failure(DigestWireProblem("a range is not [first, end) with first < end: \(pair.prefix(3))")) }
            if let last = ranges.last, pair[0] < last.upperBound { return .failure(DigestWireProblem("ranges are not sorted and disjoint at [\(pair[0]), \(pair[1]))")) }
            ranges.append(pair[0]..<pair[1])
        }
        return .success(ranges)
    }

    /// How many ranges the question names.
    public var rangeCount: Int { (pieces?.reduce(0) { $0 + $1.count } ?? 0) + (fingerprints?.count ?? 0) }
}

/// What does not read in a digest question or answer.
public struct DigestWireProblem: Error, Sendable, Hashable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// The answer to a ``DigestQuestions``: one answer per question, in order.
public struct DigestAnswers: Sendable, Hashable, Codable {
    public var answers: [DigestAnswer]

    public init(answers: [DigestAnswer]) { self.answers = answers }
}

/// Digests (`count` and the 128-bit `sum` as 32 hex digits), or fingerprints (`sequence`, the
/// 128-bit `fingerprint` as 32 hex digits, and the event's `hlc`, which a server since release
/// 0.16 sends so that the asker can order what differs in the merge order; absent before).
public struct DigestAnswer: Sendable, Hashable, Codable {
    public struct Sum: Sendable, Hashable, Codable {
        public var count: UInt64
        public var sum: String
    }
    public struct Print: Sendable, Hashable, Codable {
        public var sequence: UInt64
        public var fingerprint: String
        public var hlc: UInt64?
    }
    public var digests: [Sum]?
    public var fingerprints: [Print]?

    public init(_ answer: DigestBisection.Answer) {
        switch answer {
        case .digests(let sums):
            digests = sums.map { Sum(count: $0.count, sum: Self.hex($0.high, $0.low)) }
        case .fingerprints(let prints):
            fingerprints = prints.map { Print(sequence: $0.sequence, fingerprint: Self.hex($0.fingerprint.high, $0.fingerprint.low), hlc: $0.hlc) }
        }
    }

    /// The answer as the bisection takes it; a failure when it does not read.
    public func answer() -> Result<DigestBisection.Answer, DigestWireProblem> {
        switch (digests, fingerprints) {
        case (let sums?, nil):
            var parsed: [DigestSum] = []
            for sum in sums {
                guard let (high, low) = Self.words(sum.sum) else { return .failure(DigestWireProblem("a digest sum is not 32 hex digits: \(sum.sum.prefix(40))")) }
                parsed.append(DigestSum(count: sum.count, high: high, low: low))
            }
            return .success(.digests(parsed))
        case (nil, let prints?):
            var parsed: [SequenceFingerprint] = []
            for print in prints {
                guard let (high, low) = Self.words(print.fingerprint) else { return .failure(DigestWireProblem("a fingerprint is not 32 hex digits: \(print.fingerprint.prefix(40))")) }
                parsed.append(SequenceFingerprint(sequence: print.sequence, fingerprint: Fingerprint(high: high, low: low), hlc: print.hlc))
            }
            return .success(.fingerprints(parsed))
        default:
            return .failure(DigestWireProblem("an answer has both digests and fingerprints, or neither"))
        }
    }

    static func hex(_ high: UInt64, _ low: UInt64) -> String {
        Fingerprint(high: high, low: low).description
    }

    static func words(_ text: String) -> (UInt64, UInt64)? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 32, let high = UInt64(String(decoding: utf8[0..<16], as: UTF8.self), radix: 16),
              let low = UInt64(String(decoding: utf8[16..<32], as: UTF8.self), radix: 16) else { return nil }
        return (high, low)
    }
}
