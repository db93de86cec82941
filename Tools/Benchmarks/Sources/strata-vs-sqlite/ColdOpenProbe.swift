// W2's fresh processes. The parent re-runs this executable as `strata-vs-sqlite --open-strata PATH`
// or `--open-sqlite PATH`; the child opens the store, answers the query, prints one line of JSON
// (a `ColdOpenProbe`) and exits — as strata-store-bench's OpenProbe does. A fresh process has a
// fresh heap, so its peak resident set is the store's.
import BenchSupport
import Foundation
import GRDB
import Strata
import StrataCore
import StrataLog

/// What a child measured.
struct ColdOpenProbe: Codable {
    /// Wall time of the open (Strata: `Store.open`; SQLite: open the pool and load every row
    /// into in-memory objects), then of the query, in the child.
    var openSeconds: Double
    var querySeconds: Double
    /// The query's answers: objects of `Entry`, and how many have `"level":"error"` in their body.
    var objects: Int
    var errors: Int
    /// Strata only: events replayed after the snapshot (or all of them), and whether there was one.
    var replayedEvents: Int
    var fromSnapshot: Bool
    var rssAfterQuery: Int
    var peakRSS: Int
    /// Measured by the parent: the child's whole life, from spawn to exit.
    var processSeconds: Double?

    var answerSeconds: Double { openSeconds + querySeconds }
}

/// What the SQLite side loads each row into: the same shape as Strata's `ObjectSnapshot` (the
/// object type its reads return; it has no public initializer), so both sides end with the same
/// in-memory objects and run the same query over them.
struct LoadedObject: Sendable {
    var id: ObjectID
    var entity: String
    var values: [String: Value]
}

enum ColdOpenChild {
    static func strata(_ path: String) async -> Never {
        do {
            // No automatic compaction: an open that replayed past the threshold would compact
            // afterwards, so the replay store would open from a snapshot from the second run on
            // (and close() would wait for that compaction).
            var options = StoreOptions(durability: .buffered)
            options.autoCompaction = .disabled
            let start = monotonicNanos()
            let store = try await Store.open(at: path, schema: entrySchema, options: options)
            let opened = monotonicNanos()
            let objects = store.count("Entry")
            let errors = store.fetch("Entry", where: { isError($0["body"].stringValue ?? "") }).count
            let queried = monotonicNanos()
            let memory = ProcessMemory.current()
            let probe = ColdOpenProbe(openSeconds: seconds(opened - start), querySeconds: seconds(queried - opened),
                                      objects: objects, errors: errors,
                                      replayedEvents: store.openReport.replayedEvents,
                                      fromSnapshot: store.openReport.snapshot != nil,
                                      rssAfterQuery: memory.rss, peakRSS: memory.peak)
            try await store.close()
            emit(probe)
        } catch {
            fail("open-strata \(path): \(error)", status: 1)
        }
    }

    static func sqlite(_ path: String) -> Never {
        do {
            let start = monotonicNanos()
            let (pool, _) = try SQLiteSetup.open(path)
            let loaded = try pool.read { db in
                var objects: [ObjectID: LoadedObject] = [:]
                let rows = try Row.fetchCursor(db, sql: "SELECT id, body FROM entry")
                while let row = try rows.next() {
                    let id = try row.withUnsafeData(atIndex: 0) { bytes -> ObjectID in
                        guard let bytes, bytes.count == 16 else { throw BenchError("entry.id is not 16 bytes") }
                        return ObjectID(bytes: bytes)
                    }
                    let body: String = row[1]
                    objects[id] = LoadedObject(id: id, entity: "Entry", values: ["body": .string(body)])
                }
                return objects
            }
            let opened = monotonicNanos()
            let objects = loaded.count
            let errors = loaded.values.reduce(0) { $0 + (isError($1.values["body"]?.stringValue ?? "") ? 1 : 0) }
            let queried = monotonicNanos()
            let memory = ProcessMemory.current()
            try pool.close()
            emit(ColdOpenProbe(openSeconds: seconds(opened - start), querySeconds: seconds(queried - opened),
                               objects: objects, errors: errors, replayedEvents: 0, fromSnapshot: false,
                               rssAfterQuery: memory.rss, peakRSS: memory.peak))
        } catch {
            fail("open-sqlite \(path): \(error)", status: 1)
        }
    }

    private static func emit(_ probe: ColdOpenProbe) -> Never {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        print(String(decoding: (try? encoder.encode(probe)) ?? Data(), as: UTF8.self))
        exit(0)
    }

    /// Runs a child (`--open-strata` or `--open-sqlite`) on `path` and returns what it printed.
    static func probe(_ flag: String, _ path: String) throws -> ColdOpenProbe {
        var (probe, seconds) = try ChildRun.json(ColdOpenProbe.self, arguments: [flag, path])
        probe.processSeconds = seconds
        return probe
    }
}

/// Several probes of one store: the median run (by time to answer) speaks for them.
struct ColdOpenRuns {
    var runs: [ColdOpenProbe] = []
    var median: ColdOpenProbe { runs.sorted { $0.answerSeconds < $1.answerSeconds }[runs.count / 2] }
    var times: String { runs.map { fixed($0.answerSeconds, 3) }.joined(separator: ", ") + " s" }
}
