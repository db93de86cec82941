import Foundation
import StrataLog

/// The fuzzer's input as bytes (libFuzzer passes a null pointer for the empty input).
public func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// A target's seed corpus: the committed files under Tools/Fuzz/Corpus/<target>/ are written by
/// the targets themselves (`Tools/scripts/fuzz.sh --seeds`), from real encoded values and the
/// golden files under Fixtures/, never by hand.
public enum FuzzSeeds {
    /// When `STRATA_FUZZ_SEEDS` names a directory, writes `make()`'s seeds there as
    /// `seed-NN` and exits; otherwise does nothing. Called from `LLVMFuzzerInitialize`, before
    /// libFuzzer reads its corpus.
    public static func writeIfAsked(_ make: () throws -> [[UInt8]]) {
        guard let directory = ProcessInfo.processInfo.environment["STRATA_FUZZ_SEEDS"], !directory.isEmpty else { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let seeds = try make()
            for (i, seed) in seeds.enumerated() {
                let name = "seed-" + (i < 10 ? "0" : "") + String(i)
                try Data(seed).write(to: URL(fileURLWithPath: directory).appendingPathComponent(name))
            }
            print("wrote \(seeds.count) seeds to \(directory)")
            exit(0)
        } catch {
            print("cannot write the seeds to \(directory): \(error)")
            exit(1)
        }
    }

    /// The repository's Fixtures/ directory (the golden logs and stores), found from this file.
    public static let fixtures: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<5 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("Fixtures").path
    }()

    /// The bytes of the file at `path`.
    public static func contents(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SeedError(message: "cannot read \(path)") }
        return Array(data)
    }

    /// The bytes of a file under Fixtures/ (`relative` like "log-v1/basic/00000000000000000000.seg").
    public static func fixture(_ relative: String) throws -> [UInt8] {
        try contents(fixtures + "/" + relative)
    }
}

extension FuzzSeeds {
    /// The golden logs whose records and entries seed the targets: plain transactions, a log of
    /// several segments, and a store that adopted a snapshot (its log holds an adoption entry).
    public static let logs = ["log-v1/basic", "log-v1/multi-segment", "divergent/device-a/log", "adopted/device-d/log"]

    /// Every record of the golden logs, as read back, with the log directory (under Fixtures/)
    /// that holds it.
    public static func records() throws -> [(log: String, record: LogRecord)] {
        var records: [(log: String, record: LogRecord)] = []
        for log in logs {
            _ = try SegmentLog.verify(at: fixtures + "/" + log, record: { records.append((log, $0)) })
        }
        return records
    }

    /// Every entry (transaction or adoption record) of the golden logs.
    public static func entries() throws -> [[UInt8]] {
        try records().flatMap { $0.record.entries.map(\.payload) }
    }

    /// The snapshot payloads of the golden logs (what ``ProjectionBuilder`` snapshots hold).
    public static func snapshotPayloads() throws -> [[UInt8]] {
        var payloads: [[UInt8]] = []
        for log in logs {
            let identity = try SegmentLog.identity(at: fixtures + "/" + log)
            for info in identity.snapshots {
                payloads.append(try SegmentLog.readSnapshot(info, logID: identity.logID).payload)
            }
        }
        return payloads
    }

    /// `count` seeds spread over `all` (first, last and evenly between), without duplicates.
    public static func pick(_ all: [[UInt8]], _ count: Int) -> [[UInt8]] {
        guard all.count > count, count > 1 else { return all }
        var picked: [[UInt8]] = []
        for i in 0..<count {
            let seed = all[i * (all.count - 1) / (count - 1)]
            if !picked.contains(seed) { picked.append(seed) }
        }
        return picked
    }
}

/// A seed that could not be made: what and where.
public struct SeedError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
