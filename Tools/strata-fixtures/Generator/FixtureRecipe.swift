public import StrataLog

/// The deterministic content of the golden logs: fixed log ID, fixed timestamps, entries from a
/// seeded generator. The golden tests check every entry read from `Fixtures/` against this.
public enum FixtureRecipe {
    public static let logID = LogID(bytes: Array(0..<16))!
    /// 2026-01-01T00:00:00Z, in microseconds.
    public static let baseTime: LogTimestamp = 1_767_225_600_000_000

    /// Records of the `basic` log: one record of each interesting shape.
    public static func basicRecords() -> [[LogEntry]] {
        let shapes: [[[UInt8]]] = [
            [[]],                                                         // an empty entry
            [Array("a".utf8)],                                            // a tiny one
            (0..<16).map { Array("{\"event\":\($0),\"kind\":\"insert\",\"title\":\"hello world\"}".utf8) },
            [pseudoRandomBytes(seed: 7, count: 3000)],                    // incompressible: stored raw
            [[UInt8](repeating: 0x41, count: 20_000)],                    // highly repetitive: LZ4
            [Array("x".utf8), [], Array("last record".utf8)],
        ]
        return stamp(shapes)
    }

    /// Records of the `multi-segment` log: 60 records of 1–8 event-like entries.
    public static func multiSegmentRecords() -> [[LogEntry]] {
        var state: UInt64 = 42
        var shapes: [[[UInt8]]] = []
        for record in 0..<60 {
            let count = 1 + Int(next(&state) % 8)
            shapes.append((0..<count).map { i in
                let value = next(&state) % 100_000
                return Array("{\"record\":\(record),\"entry\":\(i),\"object\":\"\(value)\",\"field\":\"title\",\"value\":\"v\(value * 7)\"}".utf8)
            })
        }
        return stamp(shapes)
    }

    /// The payload of the `multi-segment` log's snapshot at position `position`.
    public static func snapshotPayload(position: LogPosition) -> [UInt8] {
        Array("projection of positions 0..<\(position)\n".utf8) + pseudoRandomBytes(seed: 3, count: 100)
            + [UInt8](repeating: 0x5A, count: 10_000)
    }

    /// Options that make the written bytes reproducible.
    public static func options(segmentSize: Int) -> LogOptions {
        var options = LogOptions(durability: .buffered)
        options.segmentSize = segmentSize
        options.indexInterval = 512
        options.newLogID = logID
        options.fixedTimestamp = baseTime
        return options
    }

    /// Entry `i` of record `r` is stamped `baseTime + r seconds + i microseconds`.
    static func stamp(_ shapes: [[[UInt8]]]) -> [[LogEntry]] {
        shapes.enumerated().map { r, entries in
            entries.enumerated().map { i, bytes in
                LogEntry(bytes, timestamp: baseTime + LogTimestamp(r) * 1_000_000 + LogTimestamp(i))
            }
        }
    }

    /// xorshift64*, so fixtures do not depend on the standard library's random generator.
    public static func pseudoRandomBytes(seed: UInt64, count: Int) -> [UInt8] {
        var state = seed | 1
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: next(&state) >> 32) }
    }

    static func next(_ state: inout UInt64) -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}
