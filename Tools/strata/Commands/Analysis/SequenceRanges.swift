import Strata
import StrataCore

/// A set of sequence numbers as sorted, disjoint, non-adjacent closed ranges — how the tools
/// compare what two stores have applied of a replica without listing a million numbers.
struct SequenceRanges: Sendable, Hashable, CustomStringConvertible {
    private(set) var ranges: [ClosedRange<UInt64>] = []

    init(_ ranges: [ClosedRange<UInt64>] = []) { self.ranges = ranges }

    init(_ applied: AppliedSequences?) {
        guard let applied else { return }
        if applied.contiguous > 0 { ranges.append(1...applied.contiguous) }
        for s in applied.above { append(s...s) }
    }

    /// Sorted, disjoint `[first, end)` ranges.
    init(halfOpen ranges: [Range<UInt64>]) {
        self.ranges = ranges.filter { !$0.isEmpty }.map { $0.lowerBound...($0.upperBound - 1) }
    }

    /// Any ranges, overlapping or not, in any order.
    init(unsorted: [ClosedRange<UInt64>]) {
        for range in unsorted.sorted(by: { $0.lowerBound < $1.lowerBound }) { append(range) }
    }

    /// Appends a range that starts at or after the start of every range held.
    private mutating func append(_ range: ClosedRange<UInt64>) {
        if let last = ranges.last, range.lowerBound <= last.upperBound &+ 1 {
            ranges[ranges.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
        } else {
            ranges.append(range)
        }
    }

    /// Saturating: applied sets come from snapshots, which may be damaged or hostile.
    var count: UInt64 {
        ranges.reduce(0) { sum, range in
            let width = range.upperBound - range.lowerBound
            return width == .max ? .max : StoreDiff.saturatingSum(sum, width + 1)
        }
    }
    var isEmpty: Bool { ranges.isEmpty }
    var first: UInt64? { ranges.first?.lowerBound }
    /// Whether `sequence` is in one of the ranges (a binary search).
    func contains(_ sequence: UInt64) -> Bool {
        let at = ranges.partitionIndex { $0.upperBound >= sequence }
        return at < ranges.count && ranges[at].contains(sequence)
    }

    /// The sequences in `self` and not in `other`.
    func subtracting(_ other: SequenceRanges) -> SequenceRanges {
        var result = SequenceRanges()
        var j = 0
        for range in ranges {
            var low = range.lowerBound
            while j < other.ranges.count && other.ranges[j].upperBound < low { j += 1 }
            var k = j
            while low <= range.upperBound {
                guard k < other.ranges.count, other.ranges[k].lowerBound <= range.upperBound else {
                    result.append(low...range.upperBound)
                    break
                }
                let hole = other.ranges[k]
                if hole.lowerBound > low { result.append(low...(hole.lowerBound - 1)) }
                if hole.upperBound >= range.upperBound { break }
                low = max(low, hole.upperBound + 1)
                k += 1
            }
        }
        return result
    }

    /// The first `limit` sequences, in order.
    func prefix(_ limit: Int) -> [UInt64] {
        var result: [UInt64] = []
        for range in ranges {
            var s = range.lowerBound
            while result.count < limit {
                result.append(s)
                if s == range.upperBound { break }
                s += 1
            }
            if result.count >= limit { break }
        }
        return result
    }

    /// `1…500, 503, 510…512` (or `none`).
    var description: String {
        guard !ranges.isEmpty else { return "none" }
        let shown = ranges.prefix(8).map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)…\($0.upperBound)" }
        return shown.joined(separator: ", ") + (ranges.count > 8 ? ", … (\(ranges.count - 8) more ranges)" : "")
    }
}
