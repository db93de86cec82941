import Crypto

/// A running hash of a zone's history: the value at position `p` folds in the digest of every
/// transaction before `p`, in order. Change tokens carry it (version 4), so that a server which
/// lost history and grew again — restored from a backup, then other devices pushed — tells a
/// token of the history it has from a token of the one it lost, even when the transaction right
/// before the token happens to be the same in both (a device re-pushing what the backup lacked in
/// the order it first pushed it: the check of version 3 tokens, which looks at that one
/// transaction only, misses exactly this).
///
/// Kept in memory for the positions a token can still point at (the log's start through its
/// end), 8 bytes each; rebuilt on open from the digests the ledgers hold (retired history
/// included). A position whose digest is not known (history retired by a server that kept no
/// digests, an empty transaction) is folded in as unknown: two histories that differ only there
/// are not told apart.
package struct HistoryChain: Sendable {
    /// The position of `values[0]`.
    private(set) var start: UInt64
    /// The chain at `start`, `start + 1`, … through the log's end.
    private var values: [UInt64]

    /// The chain of an empty history.
    init() {
        start = 0
        values = [0]
    }

    /// The chain of a log whose transactions at `0..<end` have the digests `digests` (by position;
    /// missing ones unknown), kept from `keepingFrom` on.
    init(digests: [(position: UInt64, digest: TransactionDigest)], end: UInt64, keepingFrom first: UInt64) {
        let sorted = digests.sorted { $0.position < $1.position }
        var value: UInt64 = 0
        var next = sorted.startIndex
        var kept: [UInt64] = []
        kept.reserveCapacity(Int(end - min(first, end)) + 1)
        if first == 0 { kept.append(0) }
        for position in 0..<end {
            while next < sorted.endIndex && sorted[next].position < position { next += 1 }
            let digest = next < sorted.endIndex && sorted[next].position == position ? sorted[next].digest : nil
            value = Self.link(value, digest)
            if position + 1 >= first { kept.append(value) }
        }
        start = min(first, end)
        values = kept
    }

    /// The position after the last transaction folded in.
    var end: UInt64 { start + UInt64(values.count) - 1 }

    /// The chain at `position`: 0 at position 0 (nothing to fingerprint), `nil` outside the
    /// positions kept.
    package func value(at position: UInt64) -> UInt64? {
        guard position >= start, position <= end else { return nil }
        return values[Int(position - start)]
    }

    /// Folds in the next transaction.
    mutating func append(_ digest: TransactionDigest?) {
        values.append(Self.link(values[values.count - 1], digest))
    }

    /// Forgets the positions before `position` (compacted away: no token may point there).
    mutating func drop(below position: UInt64) {
        guard position > start else { return }
        let count = Int(min(position, end) - start)
        values.removeFirst(count)
        start += UInt64(count)
    }

    /// The next link: the first 8 bytes of SHA-256 over the previous value and the digest (zeros
    /// when unknown); never 0, which tokens read as "no fingerprint".
    package static func link(_ previous: UInt64, _ digest: TransactionDigest?) -> UInt64 {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        for field in [previous, digest?.high ?? 0, digest?.low ?? 0] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
        }
        var value: UInt64 = 0
        for byte in SHA256.hash(data: bytes).prefix(8) { value = value << 8 | UInt64(byte) }
        return value == 0 ? 1 : value
    }
}
