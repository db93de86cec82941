// W2's three stores, all holding the same final state: `objects` Entry objects whose bodies went
// through `objects` inserts, `updates` body updates of random objects and then a tail of
// `tail` more, every body from the corpus.
//
//  - replay:   a Strata store with the whole history and no snapshot (opened by full replay);
//  - snapshot: a copy of it taken before the tail, compact()ed, then given the same tail;
//  - sqlite:   the materialised state, one row per object (`entry(id BLOB PRIMARY KEY, body TEXT)`).
//
// Every Strata store here is opened with automatic compaction off: the replay store must reach
// the open with no snapshot at all (its history crosses the default 100,000-event threshold ten
// times over), the snapshot store must hold exactly the one snapshot its explicit `compact()`
// writes, and the build's throughput stays comparable with runs before automatic compaction.
import BenchSupport
import Foundation
import GRDB
import Strata
import StrataCore
import StrataLog

struct ColdOpenPlan {
    var objects: Int
    var updates: Int
    var tail: Int
    let perTransaction = 256
}

struct ColdOpenBuild {
    var historySample = Sample()
    var compactSeconds = 0.0
    var snapshotBytes = 0
    var sqliteSeconds = 0.0
    var replayBytes = 0
    var snapshotStoreBytes = 0
    var sqliteBytes = 0
    /// What the query must answer on every side.
    var expectedObjects = 0
    var expectedErrors = 0
}

enum ColdOpenStores {
    static func replayPath(_ directory: String) -> String { directory + "/w2-replay" }
    static func snapshotPath(_ directory: String) -> String { directory + "/w2-snapshot" }
    static func sqlitePath(_ directory: String) -> String { directory + "/w2-sqlite/objects.sqlite" }

    /// Buffered, and no automatic compaction (see the top of the file).
    static func open(_ path: String) async throws -> Store {
        var options = StoreOptions(durability: .buffered)
        options.autoCompaction = .disabled
        return try await Store.open(at: path, schema: entrySchema, options: options)
    }

    static func build(_ plan: ColdOpenPlan, corpus: Corpus, directory: String) async throws -> ColdOpenBuild {
        var build = ColdOpenBuild()
        var rng = SplitMix64(seed: 0x57_32)
        // Which body each object ends with (corpus indices), to build SQLite's table and the answers.
        var finalBody = [Int](repeating: 0, count: plan.objects)
        var nextBody = 0
        // The history: inserts, then updates of random objects.
        let replay = replayPath(directory)
        var store = try await open(replay)
        var ids: [ObjectID] = []
        ids.reserveCapacity(plan.objects)
        let start = monotonicNanos()
        var done = 0
        while done < plan.objects {
            let n = min(plan.perTransaction, plan.objects - done)
            let first = nextBody
            let made = try await store.transaction { tx -> [ObjectID] in
                var made: [ObjectID] = []
                made.reserveCapacity(n)
                for k in 0..<n { made.append(try tx.insert("Entry", corpus.values[(first + k) % corpus.count])) }
                return made
            }
            for k in 0..<n { finalBody[done + k] = (first + k) % corpus.count }
            ids += made
            nextBody += n
            done += n
            build.historySample.operations += 1
        }
        note("  W2: \(grouped(plan.objects)) inserts done, \(grouped(plan.updates)) updates…")
        try await update(store, ids: ids, count: plan.updates, corpus: corpus, rng: &rng, nextBody: &nextBody,
                         finalBody: &finalBody, sample: &build.historySample, perTransaction: plan.perTransaction)
        try await store.close()
        build.historySample.nanos = monotonicNanos() - start
        build.historySample.events = plan.objects + plan.updates

        // The snapshot store starts as a copy of that history.
        let snapshot = snapshotPath(directory)
        try FileManager.default.copyItem(atPath: replay, toPath: snapshot)

        // The same tail on both (the same random choices: a copy of the generator).
        let tailRNG = rng
        let tailBody = nextBody
        note("  W2: tail of \(grouped(plan.tail)) updates on the replay store…")
        store = try await open(replay)
        var scratch = Sample()
        var r1 = tailRNG, b1 = tailBody
        try await update(store, ids: ids, count: plan.tail, corpus: corpus, rng: &r1, nextBody: &b1,
                         finalBody: &finalBody, sample: &scratch, perTransaction: plan.perTransaction)
        try await store.close()
        build.replayBytes = Machine.directorySize(replay)

        note("  W2: compact() of a copy, then the same tail…")
        store = try await open(snapshot)
        let compactStart = monotonicNanos()
        let info = try await store.compact()
        build.compactSeconds = seconds(monotonicNanos() - compactStart)
        build.snapshotBytes = (try? FileManager.default.attributesOfItem(atPath: info.path)[.size] as? NSNumber)?.intValue ?? 0
        var ignored = finalBody  // already has the tail applied
        var r2 = tailRNG, b2 = tailBody
        try await update(store, ids: ids, count: plan.tail, corpus: corpus, rng: &r2, nextBody: &b2,
                         finalBody: &ignored, sample: &scratch, perTransaction: plan.perTransaction)
        try await store.close()
        precondition(ignored == finalBody)
        build.snapshotStoreBytes = Machine.directorySize(snapshot)

        // SQLite: the materialised state, written in one transaction.
        note("  W2: SQLite table of \(grouped(plan.objects)) objects…")
        let sqliteStart = monotonicNanos()
        let path = sqlitePath(directory)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let (pool, _) = try SQLiteSetup.open(path)
        try await pool.write { [finalBody, ids] db in
            try db.execute(sql: "CREATE TABLE entry(id BLOB PRIMARY KEY NOT NULL, body TEXT NOT NULL)")
            let statement = try db.makeStatement(sql: "INSERT INTO entry(id, body) VALUES (?, ?)")
            for (index, id) in ids.enumerated() {
                try statement.execute(arguments: [Data(id.bytes), corpus.bodies[finalBody[index]]])
            }
        }
        try SQLiteSetup.checkpoint(pool)
        try pool.close()
        build.sqliteSeconds = seconds(monotonicNanos() - sqliteStart)
        build.sqliteBytes = Machine.directorySize((path as NSString).deletingLastPathComponent)

        build.expectedObjects = plan.objects
        build.expectedErrors = finalBody.reduce(0) { $0 + (isError(corpus.bodies[$1]) ? 1 : 0) }
        return build
    }

    /// `count` body updates of random objects, `perTransaction` to a transaction.
    private static func update(_ store: Store, ids: [ObjectID], count: Int, corpus: Corpus, rng: inout SplitMix64,
                               nextBody: inout Int, finalBody: inout [Int], sample: inout Sample,
                               perTransaction: Int) async throws {
        var done = 0
        while done < count {
            let n = min(perTransaction, count - done)
            var changes: [(ObjectID, [String: Value])] = []
            changes.reserveCapacity(n)
            for _ in 0..<n {
                let object = rng.below(ids.count)
                let body = nextBody % corpus.count
                nextBody += 1
                finalBody[object] = body
                changes.append((ids[object], corpus.values[body]))
            }
            let batch = changes
            try await store.transaction { tx in
                for (id, values) in batch { try tx.update(id, values) }
            }
            done += n
            sample.operations += 1
        }
    }
}
