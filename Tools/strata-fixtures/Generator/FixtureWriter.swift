public import StrataLog
import Foundation

/// Writes the golden fixtures (see `Fixtures/README.md` for what each one is and how it was made).
public enum FixtureWriter {
    /// The fixture folders written under `log-v1/`.
    public static let names = ["basic", "multi-segment", "torn-tail", "mid-log-corruption"]

    /// The snapshot position of the `multi-segment` log.
    public static let multiSegmentSnapshotPosition: LogPosition = 150

    /// Writes every fixture into `root/log-v1/`, replacing what is there.
    public static func writeAll(into root: String) async throws {
        let base = root + "/log-v1"
        for name in names { try? FileManager.default.removeItem(atPath: base + "/" + name) }
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)

        // basic: one segment, one record of each shape.
        let basic = base + "/basic"
        let log = try SegmentLog.open(at: basic, options: FixtureRecipe.options(segmentSize: 1 << 20))
        for record in FixtureRecipe.basicRecords() { try await log.append(record) }
        let offsets = try recordOffsets(log)
        try await log.close()

        // multi-segment: small segments with index files, a snapshot, the segments it covers retired.
        let multi = base + "/multi-segment"
        let multiLog = try SegmentLog.open(at: multi, options: FixtureRecipe.options(segmentSize: 4096))
        let records = FixtureRecipe.multiSegmentRecords()
        for record in records { try await multiLog.append(record) }
        let position = multiSegmentSnapshotPosition
        let snapshot = try multiLog.writeSnapshot(FixtureRecipe.snapshotPayload(position: position), position: position)
        try multiLog.retireSegments(coveredBy: snapshot)
        try await multiLog.close()

        // torn-tail: basic with its last record cut in half, as a crash during the write leaves it.
        let torn = base + "/torn-tail"
        try copyLog(from: basic, to: torn)
        let segment = torn + "/00000000000000000000.seg"
        let size = try fileSize(segment)
        let last = offsets[offsets.count - 1]
        try truncate(segment, to: last + (size - last) / 2)

        // mid-log-corruption: basic with one bit flipped inside the payload of its third record.
        let corrupt = base + "/mid-log-corruption"
        try copyLog(from: basic, to: corrupt)
        try flipBit(in: corrupt + "/00000000000000000000.seg", at: offsets[2] + 60, bit: 3)

        // The lock file is the writer's, not part of the format.
        for name in names { try? FileManager.default.removeItem(atPath: base + "/" + name + "/LOCK") }
    }

    /// The byte offset of every record of a log, in order.
    public static func recordOffsets(_ log: SegmentLog) throws -> [Int64] {
        var cursor = try log.records(from: log.startPosition)
        var offsets: [Int64] = []
        while let record = try cursor.next() { offsets.append(record.offset) }
        return offsets
    }

    static func copyLog(from: String, to: String) throws {
        try FileManager.default.createDirectory(atPath: to, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: from) {
            try FileManager.default.copyItem(atPath: from + "/" + name, toPath: to + "/" + name)
        }
    }

    static func fileSize(_ path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.size] as? NSNumber)?.int64Value ?? 0
    }

    static func truncate(_ path: String, to size: Int64) throws {
        let handle = try Foundation.FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
    }

    static func flipBit(in path: String, at offset: Int64, bit: Int) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        data[Int(offset)] ^= UInt8(1 << bit)
        try data.write(to: URL(fileURLWithPath: path))
    }
}
