// strata-log-bench: measures StrataLog's append, sync and read paths side by side with the
// machine's raw pwrite+fdatasync limit, in one run, and prints a markdown table.
//
//     swift run -c release --package-path Tools/Benchmarks strata-log-bench [--quick] [--dir PATH] …
import BenchSupport
import Foundation
import StrataLog

#if canImport(Glibc)
import Glibc
#endif

struct Settings {
    var quick = false
    var parent: String?
    var keep = false
    /// Optional workloads to run (the buffered write always runs: the others need its log or its
    /// average record size).
    var only: Set<String> = Settings.optional
    static let optional: Set<String> = ["read", "sync", "concurrent"]

    /// Distinct corpus entries (records cycle over them).
    var corpusEntries: Int { quick ? 8_192 : 65_536 }
    let entriesPerRecord = 256
    /// Records appended to the buffered log (2,097,152 entries in a full run).
    var bufferedRecords: Int { quick ? 256 : 8_192 }
    var readPasses: Int { quick ? 1 : 2 }
    /// Alternating rounds of raw / fsyncPerRecord, seconds each (3.2 s per side in a full run).
    /// Short rounds, many of them: the device's sync latency drifts, and both sides must see the
    /// same drift for their ratio to mean anything.
    var syncRounds: Int { quick ? 2 : 8 }
    var syncRoundSeconds: Double { quick ? 0.1 : 0.4 }
    /// Concurrent appenders in rows 4a/4b (`--appenders`), and their alternating rounds of
    /// fsyncPerRecord / groupCommit (3 s per side in a full run).
    var appenders = 16
    var concurrentRounds: Int { quick ? 2 : 10 }
    var concurrentRoundSeconds: Double { quick ? 0.1 : 0.3 }
}

let usage = """
    usage: strata-log-bench [--quick] [--dir PATH] [--keep] [--only LIST] [--appenders N]

      --quick     small counts, for a smoke run (numbers are not meaningful)
      --dir PATH  make the run's fresh data directory inside PATH (must be on a real disk, not
                  tmpfs); default: <repo>/.build-bench-data, else $TMPDIR or /var/tmp
      --keep      leave the data directory in place
      --only LIST comma-separated subset of read,sync,concurrent (e.g. for profiling one of them);
                  the buffered write (rows 2 and 6) always runs
      --appenders N  concurrent appenders in rows 4a/4b (default 16, which the goal is stated for)
    """

@main
struct StrataLogBench {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--quick": settings.quick = true
            case "--keep": settings.keep = true
            case "--dir": settings.parent = arguments.value(of: argument, "a path")
            case "--only": settings.only = arguments.names(of: argument, from: Settings.optional)
            case "--appenders": settings.appenders = arguments.number(of: argument)
            case "-h", "--help":
                print(usage)
                return
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        let place: DataPlace
        do {
            place = try DataPlace.make(parent: settings.parent, prefix: "strata-bench")
        } catch {
            fail("\(error)", status: 1)
        }
        note("data directory: \(place.run) (\(place.fileSystem))")
        do {
            try await run(settings, place)
        } catch {
            if !settings.keep { place.remove() }
            fail("benchmark failed: \(error)", status: 1)
        }
        if settings.keep { note("kept \(place.run)") } else { place.remove() }
    }

    static func run(_ settings: Settings, _ place: DataPlace) async throws {
        let started = Date()
        note("generating corpus (\(grouped(settings.corpusEntries)) entries, seeded)…")
        let corpus = Corpus(count: settings.corpusEntries, entriesPerRecord: settings.entriesPerRecord)
        let entrySizes = corpus.entries.map(\.payload.count)
        note("  entries \(entrySizes.min()!)–\(entrySizes.max()!) bytes, mean \(fixed(Double(entrySizes.reduce(0, +)) / Double(entrySizes.count), 1))")

        // 2. buffered (first: it also measures Strata's average stored record size for raw).
        note("buffered: \(grouped(settings.bufferedRecords)) records of \(settings.entriesPerRecord) entries…")
        let buffered = try SegmentLog.open(at: place.path("buffered"), options: LogOptions(durability: .buffered))
        var storedBytes = 0
        var payloadBytes = 0
        let writeStart = monotonicNanos()
        var bufferedSample = try await appendRecords(buffered, corpus, startingAt: 0, count: settings.bufferedRecords,
                                                     storedBytes: &storedBytes, payloadBytes: &payloadBytes)
        try await buffered.flush()
        bufferedSample.nanos = monotonicNanos() - writeStart
        let averageStored = Double(storedBytes) / Double(bufferedSample.operations)
        note("  \(rate(bufferedSample.entriesPerSecond)) entries/s; average stored record \(fixed(averageStored, 0)) B for \(fixed(Double(payloadBytes) / Double(bufferedSample.operations), 0)) B of payload")

        // 5. sequential read of the buffered log.
        var readSample: Sample?
        if settings.only.contains("read") {
            note("sequential read: \(settings.readPasses) pass(es) over \(grouped(bufferedSample.entries)) entries…")
            var total = Sample()
            for _ in 0..<settings.readPasses {
                let (sample, readBytes, _) = try readAll(buffered)
                guard sample.entries == bufferedSample.entries, readBytes == payloadBytes else {
                    throw BenchError("read back \(sample.entries) entries / \(readBytes) B, wrote \(bufferedSample.entries) / \(payloadBytes) B")
                }
                total.add(sample)
            }
            note("  \(rate(total.entriesPerSecond)) entries/s")
            readSample = total
        }

        // 6. on-disk size.
        let segments = buffered.segments()
        let onDisk = segments.reduce(Int64(0)) { $0 + $1.byteSize }
        try await buffered.close()

        // 1. raw and 3. fsyncPerRecord, in alternating rounds so that drift hits both alike.
        let blobSize = Int(averageStored.rounded())
        var rawSample: Sample?
        var fsyncSample: Sample?
        var rawPlainSample: Sample?
        var plainSample: Sample?
        let plainBlobSize = Int((Double(payloadBytes) / Double(bufferedSample.operations)).rounded()) + 48 + settings.entriesPerRecord * 3
        if settings.only.contains("sync") {
            note("raw vs fsyncPerRecord: \(settings.syncRounds) alternating rounds of \(settings.syncRoundSeconds) s each, records of \(blobSize) B…")
            let raw = try RawWriter(path: place.path("raw.dat"), blobSize: blobSize)
            let log = try SegmentLog.open(at: place.path("fsync"), options: LogOptions(durability: .fsyncPerRecord))
            var ignoredStored = 0
            var ignoredPayload = 0
            _ = try raw.run(count: 10)  // warm-up
            var next = try await appendRecords(log, corpus, startingAt: 0, count: 10,
                                               storedBytes: &ignoredStored, payloadBytes: &ignoredPayload).operations
            // 3b: the same without compression, against raw writes of the uncompressed size.
            let rawPlain = try RawWriter(path: place.path("raw-plain.dat"), blobSize: plainBlobSize)
            var plainOptions = LogOptions(durability: .fsyncPerRecord)
            plainOptions.compression = .none
            let plainLog = try SegmentLog.open(at: place.path("fsync-plain"), options: plainOptions)
            _ = try rawPlain.run(count: 10)
            var nextPlain = try await appendRecords(plainLog, corpus, startingAt: 0, count: 10,
                                                    storedBytes: &ignoredStored, payloadBytes: &ignoredPayload).operations
            var rawTotal = Sample()
            var fsyncTotal = Sample()
            var rawPlainTotal = Sample()
            var plainTotal = Sample()
            for round in 0..<settings.syncRounds {
                for leg in (round % 2 == 0 ? [0, 1, 2, 3] : [3, 2, 1, 0]) {
                    let deadline = monotonicNanos() + UInt64(settings.syncRoundSeconds * 1e9)
                    switch leg {
                    case 0:
                        rawTotal.add(try raw.run(until: deadline))
                    case 1:
                        let sample = try await appendRecords(log, corpus, startingAt: next, until: deadline,
                                                             storedBytes: &ignoredStored, payloadBytes: &ignoredPayload)
                        next += sample.operations
                        fsyncTotal.add(sample)
                    case 2:
                        rawPlainTotal.add(try rawPlain.run(until: deadline))
                    default:
                        let sample = try await appendRecords(plainLog, corpus, startingAt: nextPlain, until: deadline,
                                                             storedBytes: &ignoredStored, payloadBytes: &ignoredPayload)
                        nextPlain += sample.operations
                        plainTotal.add(sample)
                    }
                }
            }
            rawTotal.entries = rawTotal.operations * settings.entriesPerRecord
            rawPlainTotal.entries = rawPlainTotal.operations * settings.entriesPerRecord
            try await log.close()
            try await plainLog.close()
            rawPlainSample = rawPlainTotal
            plainSample = plainTotal
            note("  raw \(rate(rawTotal.operationsPerSecond)) records/s, fsyncPerRecord \(rate(fsyncTotal.operationsPerSecond)) records/s")
            rawSample = rawTotal
            fsyncSample = fsyncTotal
        }

        // 4. 16 appenders of one-entry records: fsyncPerRecord vs groupCommit, alternating.
        var perRecordSample: Sample?
        var groupSample: Sample?
        if settings.only.contains("concurrent") {
            note("\(settings.appenders) appenders, fsyncPerRecord vs groupCommit: \(settings.concurrentRounds) alternating rounds of \(settings.concurrentRoundSeconds) s each…")
            let perRecordLog = try SegmentLog.open(at: place.path("c16-fsync"), options: LogOptions(durability: .fsyncPerRecord))
            let groupLog = try SegmentLog.open(at: place.path("c16-group"), options: LogOptions(durability: .groupCommit))
            for log in [perRecordLog, groupLog] {  // warm-up
                _ = try await concurrentAppends(log, corpus, appenders: settings.appenders,
                                                until: monotonicNanos() + 100_000_000, seed: 0)
            }
            var perRecordTotal = Sample()
            var groupTotal = Sample()
            for round in 0..<settings.concurrentRounds {
                for leg in (round % 2 == 0 ? [0, 1] : [1, 0]) {
                    let deadline = monotonicNanos() + UInt64(settings.concurrentRoundSeconds * 1e9)
                    let sample = try await concurrentAppends(leg == 0 ? perRecordLog : groupLog, corpus,
                                                             appenders: settings.appenders, until: deadline,
                                                             seed: (round + 1) * 100_003)
                    if leg == 0 { perRecordTotal.add(sample) } else { groupTotal.add(sample) }
                }
            }
            try await perRecordLog.close()
            try await groupLog.close()
            note("  fsyncPerRecord \(rate(perRecordTotal.operationsPerSecond)) records/s, groupCommit \(rate(groupTotal.operationsPerSecond)) records/s")
            perRecordSample = perRecordTotal
            groupSample = groupTotal
        }

        // The report.
        var report = Report()
        let rawLatencies = rawSample?.sortedLatencies() ?? []
        let fdatasyncMean = rawSample.map { $0.nanos / UInt64(max(1, $0.operations)) }
        report.machine = "**Machine:** \(Machine.cores) cores, "
            + (Machine.memoryBytes.map { bytes($0) + " RAM" } ?? "RAM unknown")
            + (fdatasyncMean.map {
                ", fdatasync latency \(latency($0)) mean / \(latency(percentile(rawLatencies, 50))) p50 / \(latency(percentile(rawLatencies, 99))) p99"
                    + " (pwrite \(grouped(blobSize)) B + fdatasync, \(place.fileSystem))"
            } ?? ", fdatasync latency not measured (sync workload skipped), \(place.fileSystem)")
            + ", \(timestamp(started))"
            + (settings.quick ? " — **--quick run: numbers are not meaningful**" : "")

        if let rawSample {
            report.add("1. raw: pwrite \(grouped(blobSize)) B + fdatasync",
                       "\(rate(rawSample.operationsPerSecond)) records/s ≙ \(rate(rawSample.entriesPerSecond)) entries/s",
                       "— (the device's limit)", "baseline")
        }
        report.add("2. buffered, \(settings.entriesPerRecord) entries/record (incl. final flush)",
                   "\(rate(bufferedSample.entriesPerSecond)) entries/s (\(grouped(bufferedSample.entries)) entries in \(fixed(bufferedSample.seconds, 2)) s)",
                   "≥ 1M entries/s",
                   verdict(bufferedSample.entriesPerSecond / 1e6, goal: 1, unit: "× goal"))
        if let rawSample, let fsyncSample {
            report.add("3. fsyncPerRecord, \(settings.entriesPerRecord) entries/record",
                       "\(rate(fsyncSample.entriesPerSecond)) entries/s (\(rate(fsyncSample.operationsPerSecond)) records/s)",
                       "within 15% of raw (≥ 0.85×)",
                       verdict(fsyncSample.operationsPerSecond / rawSample.operationsPerSecond, goal: 0.85, unit: "× raw"))
        }
        if let rawPlainSample, let plainSample {
            report.add("3b. fsyncPerRecord, compression off, vs raw pwrite \(grouped(plainBlobSize)) B + fdatasync",
                       "\(rate(plainSample.entriesPerSecond)) entries/s (\(rate(plainSample.operationsPerSecond)) records/s; raw \(rate(rawPlainSample.operationsPerSecond)) records/s)",
                       "within 15% of raw (≥ 0.85×)",
                       verdict(plainSample.operationsPerSecond / rawPlainSample.operationsPerSecond, goal: 0.85, unit: "× raw"))
        }
        if let perRecordSample, let groupSample {
            let perRecordLatencies = perRecordSample.sortedLatencies()
            let groupLatencies = groupSample.sortedLatencies()
            report.add("4a. \(settings.appenders) appenders, fsyncPerRecord, 1 entry/record",
                       "\(rate(perRecordSample.operationsPerSecond)) records/s; latency p50 \(latency(percentile(perRecordLatencies, 50))), p99 \(latency(percentile(perRecordLatencies, 99)))",
                       "—", "baseline for 4b")
            report.add("4b. \(settings.appenders) appenders, groupCommit, 1 entry/record",
                       "\(rate(groupSample.operationsPerSecond)) records/s; latency p50 \(latency(percentile(groupLatencies, 50))), p99 \(latency(percentile(groupLatencies, 99)))",
                       "≥ 10× 4a",
                       verdict(groupSample.operationsPerSecond / perRecordSample.operationsPerSecond, goal: 10, unit: "× 4a"))
        }
        if let readSample {
            report.add("5. sequential read (records(from: 0) cursor)",
                       "\(rate(readSample.entriesPerSecond)) entries/s (\(bytes(Double(payloadBytes * settings.readPasses) / readSample.seconds))/s of payload)",
                       "≥ 3M entries/s",
                       verdict(readSample.entriesPerSecond / 3e6, goal: 1, unit: "× goal"))
        }
        let sizeRatio = Double(onDisk) / Double(payloadBytes)
        report.add("6. on-disk size vs entry bytes",
                   "\(bytes(Double(onDisk))) in \(segments.count) segment(s) for \(bytes(Double(payloadBytes))) of entries",
                   "— (informational)",
                   "\(fixed(sizeRatio, 3))× (\(fixed((1 - sizeRatio) * 100, 1))% saved)")
        print(report.render())
    }
}
