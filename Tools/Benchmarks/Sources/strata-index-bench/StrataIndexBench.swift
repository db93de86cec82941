// strata-index-bench: indexed queries next to SQLite's (issue 27's goals: an indexed equality and
// an indexed range query on 100,000 objects within 1.5× of SQLite with an index on the same
// column; 100,000 four-attribute objects with one index in ≤ 400 B per object).
//
//   swift run -c release --package-path Tools/Benchmarks strata-index-bench [--quick] [--dir PATH] [--keep]
//
// One data set on both sides: `Item` objects with a category (integer, 1,000 values), a price
// (double, uniform in 0..<10,000), a name (string) and a creation date. Strata indexes category and
// price (`StoreOptions.indexes`); SQLite (GRDB, WAL) has a table with an index on each. The queries
// — category = c (about 100 rows) and price in [p, p + 10] (about 100 rows) — run alternately on
// both sides with the same random parameters, and each side turns its rows into values (Strata's
// `ObjectSnapshot`s, SQLite's rows decoded into a struct). Strata's full scan (the same filter as a
// closure) runs next to them. Both sides read synchronously on the calling thread (GRDB's
// blocking `read`), so neither pays a hop to another executor, and SQLite's statements are
// prepared once (GRDB's statement cache). Memory and open times are measured in fresh child processes (this
// executable run again): resident memory after opening the store from its snapshot and answering
// one query, with and without one index, less an empty store's opened and queried the same way,
// divided by the number of objects.
import BenchSupport
import Foundation
import GRDB
import Strata
import StrataCore

/// glibc's `malloc_trim` (not in the Glibc module): returns freed heap pages to the system.
@_silgen_name("malloc_trim") func mallocTrim(_ pad: Int) -> Int32

/// GRDB's blocking read, from a synchronous function (the async context picks the async one).
func readNow<T>(_ pool: DatabasePool, _ body: (GRDB.Database) throws -> T) throws -> T { try pool.read(body) }

let schema = Schema {
    Entity("Item", attributes: [Attribute("category", .integer), Attribute("price", .double),
                                Attribute("name", .string), Attribute("created", .date)])
}

func options(indexes: Int) -> StoreOptions {
    var options = StoreOptions(durability: .buffered)
    options.autoCompaction = .disabled
    options.indexes = Array([AttributeIndex("Item", on: "category"), AttributeIndex("Item", on: "price")].prefix(indexes))
    return options
}

struct Row: FetchableRecord, Decodable, Sendable {
    var id: String
    var category: Int64
    var price: Double
    var name: String
    var created: Int64
}

struct MemoryProbe: Codable {
    var baseline: Int
    var resident: Int
    var openSeconds: Double
    var firstQuerySeconds: Double
}

/// `--child-memory PATH INDEXES`: opens the store, answers one query, reports memory and times.
func childMemory(_ path: String, indexes: Int) async throws -> Never {
    // The baseline is an empty store opened and queried the same way: what the objects cost, not
    // the code and runtime an open brings in (as the store benchmark's memory row measures).
    let empty = path + "-empty-\(getpid())"
    do {
        let store = try await Store.open(at: empty, schema: schema, options: options(indexes: indexes))
        _ = store.fetch("Item", matching: .equal("category", .integer(7)))
        try await store.close()
        try? FileManager.default.removeItem(atPath: empty)
    }
    _ = mallocTrim(0)
    let baseline = ProcessMemory.current().rss
    let start = monotonicNanos()
    let store = try await Store.open(at: path, schema: schema, options: options(indexes: indexes))
    let opened = monotonicNanos()
    let found = store.fetch("Item", matching: .equal("category", .integer(7)))
    let queried = monotonicNanos()
    precondition(!found.isEmpty)
    // What the store keeps, not what the open's decoding freed and the allocator still holds.
    _ = mallocTrim(0)
    let probe = MemoryProbe(baseline: baseline, resident: ProcessMemory.current().rss,
                            openSeconds: seconds(opened - start), firstQuerySeconds: seconds(queried - opened))
    print(String(decoding: try JSONEncoder().encode(probe), as: UTF8.self))
    try await store.close()
    exit(0)
}

func median(_ values: [UInt64]) -> UInt64 { values.sorted()[values.count / 2] }

func run(_ place: DataPlace, quick: Bool) async throws {
    let count = quick ? 10_000 : 100_000
    let rounds = quick ? 40 : 300
    var rng = SplitMix64(seed: 27)
    let storePath = place.path("store")
    note("index-bench: \(grouped(count)) objects…")
    var rows: [Row] = []
    rows.reserveCapacity(count)
    for i in 0..<count {
        rows.append(Row(id: ObjectID().description, category: Int64(rng.next() % 1_000),
                        price: Double(rng.next() % 1_000_000) / 100, name: "item-\(i)",
                        created: 1_700_000_000_000_000 + Int64(i) * 1_000_000))
    }
    do {
        let store = try await Store.open(at: storePath, schema: schema, options: options(indexes: 0))
        for start in stride(from: 0, to: count, by: 1_000) {
            try await store.transaction { tx in
                for row in rows[start..<min(start + 1_000, count)] {
                    _ = try tx.insert("Item", id: ObjectID(row.id)!, ["category": .integer(row.category), "price": .double(row.price),
                                                                      "name": .string(row.name), "created": .date(row.created)])
                }
            }
        }
        _ = try await store.compact()
        try await store.close()
    }
    let sqlitePath = place.path("items.sqlite")
    let pool = try DatabasePool(path: sqlitePath)
    let all = rows
    try await pool.write { db in
        try db.execute(sql: "CREATE TABLE item (id TEXT PRIMARY KEY, category INTEGER, price REAL, name TEXT, created INTEGER)")
        for row in all {
            try db.execute(sql: "INSERT INTO item VALUES (?, ?, ?, ?, ?)", arguments: [row.id, row.category, row.price, row.name, row.created])
        }
        try db.execute(sql: "CREATE INDEX item_category ON item(category)")
        try db.execute(sql: "CREATE INDEX item_price ON item(price)")
        try db.execute(sql: "ANALYZE")
    }

    note("index-bench: queries, \(rounds) rounds…")
    let store = try await Store.open(at: storePath, schema: schema, options: options(indexes: 2))
    _ = store.fetch("Item", matching: .equal("category", .integer(0)))  // warms the caches
    var times: [String: [UInt64]] = [:]
    var answers = (strata: 0, sqlite: 0)
    for round in 0..<rounds {
        let category = Int64(rng.next() % 1_000)
        let low = Double(rng.next() % 999_000) / 100
        let equality = Filter.equal("category", .integer(category))
        let range = Filter.between("price", .double(low), .double(low + 10))
        var t = monotonicNanos()
        answers.strata += store.fetch("Item", matching: equality).count
        times["strata eq", default: []].append(monotonicNanos() - t)
        t = monotonicNanos()
        answers.sqlite += try readNow(pool) { db in try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM item WHERE category = ?"), arguments: [category]).count }
        times["sqlite eq", default: []].append(monotonicNanos() - t)
        t = monotonicNanos()
        answers.strata += store.fetch("Item", matching: range).count
        times["strata range", default: []].append(monotonicNanos() - t)
        t = monotonicNanos()
        answers.sqlite += try readNow(pool) { db in try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM item WHERE price BETWEEN ? AND ?"), arguments: [low, low + 10]).count }
        times["sqlite range", default: []].append(monotonicNanos() - t)
        if round % 10 == 0 {
            t = monotonicNanos()
            _ = store.fetch("Item", where: { equality.matches($0) })
            times["scan eq", default: []].append(monotonicNanos() - t)
            t = monotonicNanos()
            _ = store.fetch("Item", where: { range.matches($0) })
            times["scan range", default: []].append(monotonicNanos() - t)
        }
    }
    guard answers.strata == answers.sqlite else { throw BenchError("the two sides answered \(answers.strata) and \(answers.sqlite) rows") }
    // A sort by an indexed attribute with a limit (the 20 cheapest), against SQLite's ORDER BY … LIMIT.
    for _ in 0..<rounds {
        var t = monotonicNanos()
        _ = store.fetch("Item", matching: .all([]), sortedBy: [SortKey("price")], limit: 20)
        times["strata top 20", default: []].append(monotonicNanos() - t)
        t = monotonicNanos()
        _ = try readNow(pool) { db in try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM item ORDER BY price LIMIT 20")) }
        times["sqlite top 20", default: []].append(monotonicNanos() - t)
    }
    try await store.close()

    note("index-bench: memory and opens in fresh processes…")
    var probes: [Int: MemoryProbe] = [:]
    for indexes in [0, 1] {
        var best: MemoryProbe?
        for _ in 0..<3 {
            let probe = try ChildRun.json(MemoryProbe.self, arguments: ["--child-memory", storePath, String(indexes)]).value
            if best == nil || probe.openSeconds + probe.firstQuerySeconds < best!.openSeconds + best!.firstQuerySeconds { best = probe }
        }
        probes[indexes] = best
    }

    func µs(_ key: String) -> String { fixed(Double(median(times[key]!)) / 1000, 1) + " µs" }
    func ratio(_ a: String, _ b: String) -> Double { Double(median(times[a]!)) / Double(median(times[b]!)) }
    let eq = ratio("strata eq", "sqlite eq"), range = ratio("strata range", "sqlite range")
    print("### Indexed queries, \(grouped(count)) objects (medians of \(rounds); \(timestamp(Date())))\n")
    print("| query | Strata, index | SQLite, index | Strata ÷ SQLite | Strata, full scan | goal |")
    print("|---|---|---|---|---|---|")
    print("| category = c (≈\(count / 1_000) rows) | \(µs("strata eq")) | \(µs("sqlite eq")) | \(fixed(eq, 2))× | \(µs("scan eq")) | ≤ 1.5×: \(eq <= 1.5 ? "PASS" : "MISS") |")
    print("| price in [p, p+10] (≈\(count / 1_000) rows) | \(µs("strata range")) | \(µs("sqlite range")) | \(fixed(range, 2))× | \(µs("scan range")) | ≤ 1.5×: \(range <= 1.5 ? "PASS" : "MISS") |")
    print("| 20 lowest prices (sort + limit) | \(µs("strata top 20")) | \(µs("sqlite top 20")) | \(fixed(ratio("strata top 20", "sqlite top 20"), 2))× | — | — |")
    let none = probes[0]!, one = probes[1]!
    let perObject = Double(one.resident - one.baseline) / Double(count)
    let withoutIndex = Double(none.resident - none.baseline) / Double(count)
    print("\n| fresh process, open from snapshot + one query | no index | one index (category) |")
    print("|---|---|---|")
    print("| resident memory per object | \(fixed(withoutIndex, 0)) B | \(fixed(perObject, 0)) B (goal ≤ 400 B: \(perObject <= 400 ? "PASS" : "MISS")) |")
    print("| open | \(fixed(none.openSeconds * 1000, 1)) ms | \(fixed(one.openSeconds * 1000, 1)) ms |")
    print("| first query (builds the index on the right) | \(fixed(none.firstQuerySeconds * 1000, 1)) ms (scan) | \(fixed(one.firstQuerySeconds * 1000, 1)) ms |")
}

let arguments = CommandLine.arguments
if arguments.count == 4, arguments[1] == "--child-memory" {
    try await childMemory(arguments[2], indexes: Int(arguments[3]) ?? 0)
}
await runQuickHarness("strata-index-bench") { place, quick in try await run(place, quick: quick) }
