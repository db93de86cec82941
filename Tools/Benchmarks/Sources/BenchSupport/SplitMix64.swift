// A seeded random generator, so that every run sees the same data.

/// SplitMix64: tiny, fast, and the same sequence on every machine for a given seed.
public struct SplitMix64: Sendable {
    @usableFromInline var state: UInt64
    public init(seed: UInt64) { state = seed }

    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in `0..<bound` (the tiny modulo bias is irrelevant here).
    @inlinable
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    @inlinable
    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    @inlinable
    public mutating func inRange(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }
}
