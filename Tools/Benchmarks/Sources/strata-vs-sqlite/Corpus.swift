// The one corpus both sides write: BenchSupport's seeded EventCorpus (JSON-ish application events
// of 100–200 bytes), prepared once in the forms each side takes, so that the harness's own work
// per event stays small and equal.
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog

/// The Strata schema of every store in the run: one entity whose `body` is the event's JSON.
let entrySchema = Schema {
    Entity("Entry", attributes: [Attribute("body", .string, default: "")])
}

struct Corpus: Sendable {
    /// The events, as text (SQLite binds it as TEXT) and as the Strata insert's values.
    let bodies: [String]
    let values: [[String: Value]]
    /// The events' µs timestamps (SQLite's `ts` column).
    let timestamps: [Int64]
    /// The events as log entries (the raw-log side of W1).
    let entries: [LogEntry]
    let meanBytes: Double

    init(count: Int) {
        let events = EventCorpus.make(count: count)
        bodies = events.map { String(decoding: $0.bytes, as: UTF8.self) }
        values = bodies.map { ["body": .string($0)] }
        timestamps = events.map(\.timestamp)
        entries = events.map { LogEntry($0.bytes, timestamp: $0.timestamp) }
        meanBytes = Double(events.reduce(0) { $0 + $1.bytes.count }) / Double(max(1, count))
    }

    var count: Int { bodies.count }
}

/// The W2 query's filter: does this body contain `"level":"error"`? The same byte search on
/// both sides.
let errorNeedle = Array("\"level\":\"error\"".utf8)

func isError(_ body: String) -> Bool {
    var body = body
    return body.withUTF8 { haystack in
        let n = errorNeedle.count
        guard haystack.count >= n else { return false }
        var i = 0
        while i <= haystack.count - n {
            if haystack[i] == errorNeedle[0] {
                var k = 1
                while k < n && haystack[i + k] == errorNeedle[k] { k += 1 }
                if k == n { return true }
            }
            i += 1
        }
        return false
    }
}
