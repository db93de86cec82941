// The workloads. Each returns plain numbers; the report decides what they mean.
import BenchSupport
import StrataLog

#if canImport(Glibc)
import Glibc
#endif

// MARK: 1. raw

/// The physical limit: `pwrite` of a blob of Strata's average record size at the end of a file,
/// then `fdatasync`, one after another — what `fsyncPerRecord` does minus everything Strata adds.
final class RawWriter {
    let path: String
    let fd: Int32
    let blob: [UInt8]
    private var offset: Int64 = 0

    init(path: String, blobSize: Int) throws {
        self.path = path
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
        var rng = SplitMix64(seed: 42)
        // Incompressible is irrelevant here (no compression), but avoid an all-zero page anyway.
        blob = (0..<blobSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    deinit { close(fd) }

    /// Appends `count` blobs, or as many as fit before `deadline`.
    func run(count: Int = .max, until deadline: UInt64 = .max) throws -> Sample {
        var sample = Sample()
        sample.latencies.reserveCapacity(min(count, 100_000))
        let start = monotonicNanos()
        var now = start
        while sample.operations < count && now < deadline {
            let t0 = now
            let written = blob.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard written == blob.count else { throw BenchError("pwrite: \(String(cString: strerror(errno)))") }
            guard fdatasync(fd) == 0 else { throw BenchError("fdatasync: \(String(cString: strerror(errno)))") }
            offset += Int64(written)
            now = monotonicNanos()
            sample.latencies.append(now - t0)
            sample.operations += 1
        }
        sample.nanos = now - start
        return sample
    }
}

// MARK: 2./3. one appender, big records

/// Appends `corpus.records` in turn (one record per call) until `count` records or `deadline`.
func appendRecords(_ log: SegmentLog, _ corpus: Corpus, startingAt first: Int, count: Int = .max,
                   until deadline: UInt64 = .max, storedBytes: inout Int, payloadBytes: inout Int) async throws -> Sample {
    var sample = Sample()
    let start = monotonicNanos()
    var now = start
    var index = first
    while sample.operations < count && now < deadline {
        let slot = index % corpus.records.count
        let result = try await log.append(corpus.records[slot])
        storedBytes += result.storedSize
        payloadBytes += corpus.recordPayloadBytes[slot]
        sample.entries += corpus.records[slot].count
        sample.operations += 1
        index += 1
        if deadline != .max { now = monotonicNanos() }
    }
    sample.nanos = monotonicNanos() - start
    return sample
}

// MARK: 4. many appenders, one entry each

/// `appenders` tasks each append one-entry records until `deadline`, timing every append.
func concurrentAppends(_ log: SegmentLog, _ corpus: Corpus, appenders: Int, until deadline: UInt64,
                       seed: Int) async throws -> Sample {
    let singles = corpus.singles
    var sample = try await timedTasks(appenders, until: deadline) { task, iteration in
        try await log.append(singles[(seed &+ task &* 7919 &+ iteration) % singles.count])
    }
    sample.entries = sample.operations
    return sample
}

// MARK: 5. sequential read

/// Reads every record of `log` with the cursor, touching each entry's payload.
func readAll(_ log: SegmentLog) throws -> (sample: Sample, payloadBytes: Int, checksum: UInt64) {
    var sample = Sample()
    var payloadBytes = 0
    var checksum: UInt64 = 0
    let start = monotonicNanos()
    var cursor = try log.records(from: 0)
    while let record = try cursor.next() {
        sample.operations += 1
        sample.entries += record.entries.count
        for entry in record.entries {
            payloadBytes &+= entry.payload.count
            checksum = checksum &* 31 &+ UInt64(entry.payload[entry.payload.count / 2])
        }
    }
    sample.nanos = monotonicNanos() - start
    return (sample, payloadBytes, checksum)
}
