// strata-models-bench: what an app pays to read typed models and to see changes.
//
//   swift run -c release --package-path Tools/Benchmarks strata-models-bench [--quick]
//
// 1. Fetching 10,000 typed models: `store.fetch(Note.self)` next to GRDB's
//    `FetchableRecord` (`Note.fetchAll(db)`) over the same rows in SQLite, each repeated and
//    alternated so that drift hits both; the ratio is the point.
// 2. Latency from a remote apply (`applyRemote`, as sync does after a pull) to an observed
//    query's new value (`store.observe`), p50 and p99.
import BenchSupport
import Foundation
import GRDB
@_spi(StrataInternals) import Strata
import StrataCore

struct Note: StrataModel, Equatable, Codable, FetchableRecord, PersistableRecord {
    static let entityName = "Note"
    static let databaseTableName = "note"
    var id: ObjectID
    var title: String
    var body: String?
    var pinned: Bool
    var rank: Int
    var due: Date?

    // GRDB reads the row's columns; Strata reads the object's values: each through its own
    // Codable path, from the same model type.
    init(row: Row) throws {
        id = ObjectID(row["id"] as String) ?? ObjectID()
        title = row["title"]
        body = row["body"]
        pinned = row["pinned"]
        rank = row["rank"]
        due = row["due"]
    }

    init(id: ObjectID, title: String, body: String?, pinned: Bool, rank: Int, due: Date?) {
        self.id = id; self.title = title; self.body = body; self.pinned = pinned; self.rank = rank; self.due = due
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id.description
        container["title"] = title
        container["body"] = body
        container["pinned"] = pinned
        container["rank"] = rank
        container["due"] = due
    }
}

let schema = Schema {
    Entity("Note", attributes: [
        Attribute("title", .string, default: ""),
        Attribute("body", .string),
        Attribute("pinned", .bool, default: false),
        Attribute("rank", .integer, default: 0),
        Attribute("due", .date),
    ])
}

@main
struct StrataModelsBench {
    static func main() async {
        await runQuickHarness("strata-models-bench") { place, quick in try await run(place: place, quick: quick) }
    }

    static func run(place: DataPlace, quick: Bool) async throws {
        let count = 10_000
        let rounds = quick ? 3 : 15
        var rng = SplitMix64(seed: 42)
        var notes: [Note] = []
        for i in 0..<count {
            let title = "note \(i) \(rng.next() % 100_000)"
            let body: String? = i % 3 == 0 ? nil : "body of note \(i)"
            let due: Date? = i % 2 == 0 ? Date(timeIntervalSince1970: 1_767_225_600 + Double(i)) : nil
            let rank = Int(rng.next() % 1000)
            notes.append(Note(id: ObjectID(), title: title, body: body, pinned: i % 7 == 0, rank: rank, due: due))
        }
        note("writing \(count) notes to both stores")
        let store = try await Store.open(at: place.path("strata"), schema: schema, options: StoreOptions(durability: .buffered))
        try await store.transaction { tx in for note in notes { try tx.insert(note) } }
        let pool = try DatabasePool(path: place.path("sqlite.db"))
        let rows = notes
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT, pinned BOOLEAN NOT NULL, rank INTEGER NOT NULL, due DATETIME)")
            for note in rows { try note.insert(db) }
        }

        // 1. Typed fetches, alternated.
        var strataNanos: [UInt64] = [], grdbNanos: [UInt64] = []
        for _ in 0..<rounds {
            var start = monotonicNanos()
            let fetched = try store.fetch(Note.self)
            strataNanos.append(monotonicNanos() - start)
            guard fetched.count == count else { throw BenchError("Strata fetched \(fetched.count) notes") }
            start = monotonicNanos()
            let read = try await pool.read { db in try Note.fetchAll(db) }
            grdbNanos.append(monotonicNanos() - start)
            guard read.count == count else { throw BenchError("GRDB fetched \(read.count) notes") }
        }
        strataNanos.sort(); grdbNanos.sort()
        let strataMedian = percentile(strataNanos, 0.5), grdbMedian = percentile(grdbNanos, 0.5)

        // 2. Remote apply → observed value.
        let source = try await Store.open(at: place.path("source"), schema: schema, options: StoreOptions(durability: .buffered))
        let target = try await Store.open(at: place.path("target"), schema: schema, options: StoreOptions(durability: .buffered))
        let iterations = quick ? 50 : 1000
        var observed = target.observe("Note", where: { $0["pinned"] == true }).makeAsyncIterator()
        _ = await observed.next()
        var latencies: [UInt64] = []
        for i in 0..<iterations {
            try await source.transaction { tx in _ = try tx.insert("Note", ["title": .string("remote \(i)"), "pinned": true]) }
            let latest = try source.transactions(forSync: true).suffix(1).map(\.transaction)
            let start = monotonicNanos()
            _ = try await target.applyRemote(latest)
            guard let value = await observed.next(), value.count == i + 1 else { throw BenchError("the observer missed remote apply \(i)") }
            latencies.append(monotonicNanos() - start)
        }
        latencies.sort()
        try await source.close(); try await target.close(); try await store.close()

        print("| row | what | result |")
        print("| --- | --- | --- |")
        print("| 1a | Strata `store.fetch(Note.self)`, \(grouped(count)) typed models, median of \(rounds) | \(latency(strataMedian)) |")
        print("| 1b | GRDB `Note.fetchAll(db)` (`FetchableRecord`), the same rows, median of \(rounds) | \(latency(grdbMedian)) |")
        print("| 1 | ratio Strata / GRDB (lower is better) | \(fixed(Double(strataMedian) / Double(max(1, grdbMedian)), 2))× |")
        print("| 2 | remote apply → observed query's new value, \(iterations) applies | p50 \(latency(percentile(latencies, 0.5))), p99 \(latency(percentile(latencies, 0.99))) |")
    }
}
