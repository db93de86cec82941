// The device's durable-write latency: a small pwrite at the end of a file, then fdatasync, in a
// loop — the floor under every durable commit, whoever makes it.
#if canImport(Glibc)
import Glibc
#endif

public enum FsyncProbe {
    /// `count` rounds of `pwrite` (`blockSize` bytes, appended) + `fdatasync` on a scratch file
    /// in `directory` (removed afterwards); the latency of each round, ascending.
    public static func measure(in directory: String, count: Int = 200, blockSize: Int = 4096) throws -> [UInt64] {
        let path = directory + "/fsync-probe"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd); unlink(path) }
        var rng = SplitMix64(seed: 7)
        let block = (0..<blockSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        var latencies: [UInt64] = []
        latencies.reserveCapacity(count)
        var offset: off_t = 0
        for _ in 0..<count {
            let t0 = monotonicNanos()
            let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
            guard written == blockSize else { throw BenchError("pwrite: \(String(cString: strerror(errno)))") }
            guard fdatasync(fd) == 0 else { throw BenchError("fdatasync: \(String(cString: strerror(errno)))") }
            latencies.append(monotonicNanos() - t0)
            offset += off_t(written)
        }
        return latencies.sorted()
    }

    /// "0.17 ms p50, 0.41 ms p99 (pwrite 4 KiB + fdatasync, 200 rounds)".
    public static func summary(_ sorted: [UInt64], blockSize: Int = 4096) -> String {
        "\(latency(percentile(sorted, 50))) p50, \(latency(percentile(sorted, 99))) p99 (pwrite \(blockSize / 1024) KiB + fdatasync, \(sorted.count) rounds)"
    }
}
