// Clocks and latency statistics for the harness.
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time in nanoseconds.
@inlinable @inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

public func seconds(_ nanos: UInt64) -> Double { Double(nanos) / 1e9 }

/// Nearest-rank percentile of an ascending array (0 when empty).
public func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count - 1, max(0, rank - 1))]
}
