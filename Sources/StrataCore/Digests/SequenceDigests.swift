/// The events of one replica that a side holds with their content, by sequence: the sorted
/// sequences, the prefix sums of their fingerprints, so that the digest of any set of sequence
/// ranges costs two binary searches per range, and each event's HLC, so that a comparison can
/// order the events it finds in the merge order (40 bytes an event).
public struct SequenceDigests: Sendable {
    /// One held event: what the digests are built from.
    public typealias Held = (sequence: UInt64, fingerprint: Fingerprint, hlc: UInt64)

    /// Sorted, each once.
    public private(set) var sequences: [UInt64] = []
    /// `prefix[i]`: the digest of the first `i` events (`prefix.count == sequences.count + 1`).
    private var prefix: [DigestSum] = [.zero]
    /// `clocks[i]`: the HLC of `sequences[i]`'s event (0 when it was not given).
    private var clocks: [UInt64] = []

    /// From `(sequence, fingerprint)` pairs in any order, without their HLCs (answered as
    /// unknown). A sequence given twice keeps its first fingerprint.
    public init(_ pairs: [(sequence: UInt64, fingerprint: Fingerprint)]) {
        self.init(held: pairs.map { ($0.sequence, $0.fingerprint, 0) })
    }

    /// From held events in any order. A sequence given twice keeps its first fingerprint: a
    /// projection applies an event once, the first time it arrives.
    public init(held events: [Held]) {
        sequences.reserveCapacity(events.count)
        prefix.reserveCapacity(events.count + 1)
        clocks.reserveCapacity(events.count)
        var sum = DigestSum.zero
        func take(_ event: Held) {
            if let last = sequences.last, last == event.sequence { return }
            sequences.append(event.sequence)
            sum.add(event.fingerprint)
            prefix.append(sum)
            clocks.append(event.hlc)
        }
        // A log holds a replica's events mostly in sequence order: then no sort (a sort of a
        // million indexes was a tenth of a diff's first pass).
        if events.indices.dropFirst().allSatisfy({ events[$0 - 1].sequence < events[$0].sequence }) {
            for event in events { take(event) }
            return
        }
        let order = events.indices.sorted { (events[$0].sequence, $0) < (events[$1].sequence, $1) }
        for i in order { take(events[i]) }
    }

    public var count: Int { sequences.count }

    /// Adds events seen later. A sequence already held keeps its fingerprint (the first seen).
    /// Sequences past the last held (a replica's new events) are appended; others rebuild.
    package mutating func add(_ events: [Held]) {
        guard !events.isEmpty else { return }
        let ordered = events.indices.sorted { (events[$0].sequence, $0) < (events[$1].sequence, $1) }
        if let last = sequences.last, events[ordered[0]].sequence <= last {
            let held = fingerprints(in: [0..<UInt64.max]).map { (sequence: $0.sequence, fingerprint: $0.fingerprint, hlc: $0.hlc ?? 0) }
            self = SequenceDigests(held: held + events)
            return
        }
        var sum = prefix[prefix.count - 1]
        for i in ordered {
            let event = events[i]
            if let last = sequences.last, last == event.sequence { continue }
            sequences.append(event.sequence)
            sum.add(event.fingerprint)
            prefix.append(sum)
            clocks.append(event.hlc)
        }
    }

    /// The sequences held, as maximal runs.
    public var ranges: [Range<UInt64>] {
        var runs: [Range<UInt64>] = []
        var start: UInt64?
        var end: UInt64 = 0
        for s in sequences {
            if let first = start, s == end {
                end = s + 1
                start = first
            } else {
                if let first = start { runs.append(first..<end) }
                start = s
                end = s + 1
            }
        }
        if let first = start { runs.append(first..<end) }
        return runs
    }

    /// The digest of the events held in `ranges`.
    public func digest(_ ranges: [Range<UInt64>]) -> DigestSum {
        var sum = DigestSum.zero
        for range in ranges {
            sum = sum + (prefix[index(of: range.upperBound)] - prefix[index(of: range.lowerBound)])
        }
        return sum
    }

    /// Each held event's fingerprint (and HLC, when known) in `ranges`, in sequence order.
    public func fingerprints(in ranges: [Range<UInt64>]) -> [SequenceFingerprint] {
        var result: [SequenceFingerprint] = []
        for range in ranges {
            for i in index(of: range.lowerBound)..<index(of: range.upperBound) {
                let one = prefix[i + 1] - prefix[i]
                result.append(SequenceFingerprint(sequence: sequences[i], fingerprint: Fingerprint(high: one.high, low: one.low),
                                                  hlc: clocks[i] == 0 ? nil : clocks[i]))
            }
        }
        return result
    }

    /// The index of the first held sequence ≥ `sequence`.
    private func index(of sequence: UInt64) -> Int {
        sequences.partitionIndex { $0 >= sequence }
    }
}

/// One event's sequence and fingerprint, and its HLC when the side knows it (a server before
/// release 0.16 does not send it): what orders events found to differ in the merge order.
public struct SequenceFingerprint: Hashable, Sendable, Codable {
    public var sequence: UInt64
    public var fingerprint: Fingerprint
    public var hlc: UInt64?

    public init(sequence: UInt64, fingerprint: Fingerprint, hlc: UInt64? = nil) {
        self.sequence = sequence
        self.fingerprint = fingerprint
        self.hlc = hlc
    }
}

/// Sets of sequences as sorted, disjoint ranges.
package enum SequenceRangeSet {
    /// The sequences in both `a` and `b` (each sorted and disjoint).
    package static func intersection(_ a: [Range<UInt64>], _ b: [Range<UInt64>]) -> [Range<UInt64>] {
        var result: [Range<UInt64>] = []
        var i = 0
        var j = 0
        while i < a.count && j < b.count {
            let low = max(a[i].lowerBound, b[j].lowerBound)
            let high = min(a[i].upperBound, b[j].upperBound)
            if low < high { result.append(low..<high) }
            if a[i].upperBound < b[j].upperBound { i += 1 } else { j += 1 }
        }
        return result
    }

    package static func count(_ ranges: [Range<UInt64>]) -> UInt64 {
        ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) }
    }

    /// The most ranges one piece names: a held set cut into many runs (a masked zone's withheld
    /// events, gaps) is asked about in several pieces, so that no question grows past what a
    /// server answers.
    package static let maxRangesPerPiece = 256

    /// `pieces` with every piece of more than ``maxRangesPerPiece`` ranges cut into consecutive
    /// pieces of at most that many.
    package static func bounded(_ pieces: [[Range<UInt64>]]) -> [[Range<UInt64>]] {
        pieces.flatMap { piece -> [[Range<UInt64>]] in
            guard piece.count > maxRangesPerPiece else { return [piece] }
            return stride(from: 0, to: piece.count, by: maxRangesPerPiece).map { Array(piece[$0..<min(piece.count, $0 + maxRangesPerPiece)]) }
        }
    }

    /// `ranges` cut into at most `pieces` consecutive parts of about equal numbers of sequences.
    package static func split(_ ranges: [Range<UInt64>], into pieces: Int) -> [[Range<UInt64>]] {
        let total = count(ranges)
        guard pieces > 1, total > 1 else { return [ranges] }
        let size = (total + UInt64(pieces) - 1) / UInt64(pieces)
        var result: [[Range<UInt64>]] = []
        var current: [Range<UInt64>] = []
        var room = size
        for range in ranges {
            var low = range.lowerBound
            while low < range.upperBound {
                let take = min(room, range.upperBound - low)
                current.append(low..<low + take)
                low += take
                room -= take
                if room == 0 {
                    result.append(current)
                    current = []
                    room = size
                }
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }
}
