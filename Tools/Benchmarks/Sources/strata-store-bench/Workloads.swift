// The workloads that run in this process: commit throughput and building the stores that the
// fresh-process opens (OpenProbe.swift) measure. Each returns plain numbers; the report decides
// what they mean.
import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog

/// The schema of every store in the run.
let benchSchema = Schema {
    Entity("Item", attributes: [
        Attribute("name", .string, default: ""),
        Attribute("count", .integer),
        Attribute("score", .double),
        Attribute("done", .bool, default: false),
    ])
}

/// Small objects: a short name, an integer, a double and a bool (seeded, the same on every run).
/// Inserts cycle over them; every insert still gets a fresh random ObjectID.
func itemValues(count: Int, seed: UInt64) -> [[String: Value]] {
    var rng = SplitMix64(seed: seed)
    return (0..<count).map { i in
        [
            "name": .string("item-\(i)-\(rng.below(1000))"),
            "count": .integer(Int64(rng.below(100_000))),
            "score": .double(Double(rng.below(1_000_000)) / 1000),
            "done": .bool(rng.below(2) == 1),
        ]
    }
}

/// One single-field change, rotating over the four attributes.
func updateValue(_ n: Int, _ rng: inout SplitMix64) -> [String: Value] {
    switch n % 4 {
    case 0: ["count": .integer(Int64(rng.below(100_000)))]
    case 1: ["score": .double(Double(rng.below(1_000_000)) / 1000)]
    case 2: ["done": .bool(rng.below(2) == 1)]
    default: ["name": .string("renamed-\(rng.below(100_000))")]
    }
}

/// Rows 1-4 open their stores with `.disabled`: they measure the commit path and the open by full
/// replay or from the one snapshot an explicit `compact()` wrote, and the replay store must reach
/// its open with no snapshot at all. Only row 5 (`autoCompactionRound`) opens one with the default,
/// to measure what the default costs and buys.
func openStore(_ path: String, _ durability: Durability,
               autoCompaction: AutoCompaction = .disabled) async throws -> Store {
    var options = StoreOptions(durability: durability)
    options.autoCompaction = autoCompaction
    return try await Store.open(at: path, schema: benchSchema, options: options)
}

// MARK: 1. commit throughput

/// `writers` tasks each commit transactions of `eventsPerTransaction` inserts until `deadline`,
/// timing every commit (from the call until `transaction` returns, i.e. as durable as the
/// store's durability promises).
func commitLoad(_ store: Store, eventsPerTransaction: Int, writers: Int, until deadline: UInt64,
                values: [[String: Value]], seed: Int) async throws -> Sample {
    var sample = try await timedTasks(writers, until: deadline) { writer, iteration in
        let first = seed &+ writer &* 7919 &+ iteration &* eventsPerTransaction
        try await store.transaction { tx in
            for k in 0..<eventsPerTransaction {
                try tx.insert("Item", values[(first &+ k) % values.count])
            }
        }
    }
    sample.events = sample.operations * eventsPerTransaction
    return sample
}

// MARK: 2./3. building the stores to open

/// What building a store took.
struct BuildReport {
    /// Inserts (and, for the replay store, updates), timed from the first commit through `close()`.
    var write = Sample()
    /// Only for the snapshot store.
    var compactSeconds: Double?
    var snapshotBytes: Int?
    var tail = Sample()
    var objects = 0
    var diskBytes = 0
}

/// Commits `objects` inserts then `updates` single-field updates of random objects among them,
/// `perTransaction` events to a transaction, buffered. Returns the IDs inserted.
private func fill(_ store: Store, objects: Int, perTransaction: Int, values: [[String: Value]],
                  progress: String) async throws -> (ids: [ObjectID], transactions: Int) {
    var ids: [ObjectID] = []
    ids.reserveCapacity(objects)
    var transactions = 0
    var done = 0
    var nextNote = objects / 4
    while done < objects {
        let n = min(perTransaction, objects - done)
        let first = done
        let batch = try await store.transaction { tx -> [ObjectID] in
            var made: [ObjectID] = []
            made.reserveCapacity(n)
            for k in 0..<n { made.append(try tx.insert("Item", values[(first + k) % values.count])) }
            return made
        }
        ids += batch
        done += n
        transactions += 1
        if done >= nextNote && done < objects {
            note("  \(progress): \(grouped(done)) of \(grouped(objects)) inserts")
            nextNote += objects / 4
        }
    }
    return (ids, transactions)
}

private func updateRandom(_ store: Store, ids: [ObjectID], updates: Int, perTransaction: Int, seed: UInt64,
                          progress: String) async throws -> Int {
    var rng = SplitMix64(seed: seed)
    var done = 0
    var transactions = 0
    var nextNote = updates / 4
    while done < updates {
        let n = min(perTransaction, updates - done)
        // Choose outside the transaction: the closure is not allowed to capture `inout` state.
        var changes: [(ObjectID, [String: Value])] = []
        changes.reserveCapacity(n)
        for k in 0..<n { changes.append((ids[rng.below(ids.count)], updateValue(done + k, &rng))) }
        let batch = changes
        try await store.transaction { tx in
            for (id, values) in batch { try tx.update(id, values) }
        }
        done += n
        transactions += 1
        if updates >= 100_000 && done >= nextNote && done < updates {
            note("  \(progress): \(grouped(done)) of \(grouped(updates)) updates")
            nextNote += updates / 4
        }
    }
    return transactions
}

/// Workload 2's store: `objects` inserts, then `updates` single-field updates spread over them.
func buildReplayStore(at path: String, objects: Int, updates: Int, perTransaction: Int) async throws -> BuildReport {
    let values = itemValues(count: 4096, seed: 2)
    let store = try await openStore(path, .buffered)
    var report = BuildReport()
    let start = monotonicNanos()
    let (ids, insertTransactions) = try await fill(store, objects: objects, perTransaction: perTransaction,
                                                   values: values, progress: "replay store")
    let updateTransactions = try await updateRandom(store, ids: ids, updates: updates, perTransaction: perTransaction,
                                                    seed: 22, progress: "replay store")
    try await store.close()
    report.write.nanos = monotonicNanos() - start
    report.write.operations = insertTransactions + updateTransactions
    report.write.events = objects + updates
    report.objects = objects
    report.diskBytes = Machine.directorySize(path)
    return report
}

/// Workload 3's store: `objects` inserts, `compact()`, then a tail of `tailUpdates` updates.
func buildSnapshotStore(at path: String, objects: Int, tailUpdates: Int, perTransaction: Int) async throws -> BuildReport {
    let values = itemValues(count: 4096, seed: 3)
    let store = try await openStore(path, .buffered)
    var report = BuildReport()
    let start = monotonicNanos()
    let (ids, insertTransactions) = try await fill(store, objects: objects, perTransaction: perTransaction,
                                                   values: values, progress: "snapshot store")
    try await store.segmentLog.flush()  // what close() would do, so that both builds are timed alike
    report.write.nanos = monotonicNanos() - start
    report.write.operations = insertTransactions
    report.write.events = objects

    note("  snapshot store: compact()…")
    let compactStart = monotonicNanos()
    let info = try await store.compact()
    report.compactSeconds = seconds(monotonicNanos() - compactStart)
    report.snapshotBytes = (try? FileManager.default.attributesOfItem(atPath: info.path)[.size] as? NSNumber)?.intValue

    let tailStart = monotonicNanos()
    report.tail.operations = try await updateRandom(store, ids: ids, updates: tailUpdates, perTransaction: perTransaction,
                                                    seed: 33, progress: "snapshot store tail")
    try await store.close()
    report.tail.nanos = monotonicNanos() - tailStart
    report.tail.events = tailUpdates
    report.objects = objects
    report.diskBytes = Machine.directorySize(path)
    return report
}

/// The baseline for workload 4: a store with the schema and nothing else.
func buildEmptyStore(at path: String) async throws {
    let store = try await openStore(path, .buffered)
    try await store.close()
}

// MARK: 5. automatic compaction: what it costs a committer and what it buys the next open

/// One store's share of row 5: single-insert commits from one writer, with one policy.
struct AutoCompactionSide {
    var policy: AutoCompaction
    /// The stores this side committed into, in order (one per round).
    var paths: [String] = []
    /// Every commit, timed from the call until `transaction` returned; `nanos` runs from the first
    /// commit's call to the last one's return.
    var sample = Sample()
    /// Automatic compactions that finished while the commits ran (the history past the newest
    /// snapshot went down between two commits), and those that finished after the last commit.
    var compactionsDuringCommits = 0
    var compactionsAfterCommits = 0
    /// `waitForAutoCompaction()` after the last commit: what was still running.
    var drainNanos: UInt64 = 0
    /// `historySinceSnapshot.events` once nothing runs: what the next open replays.
    var eventsPastSnapshot: [Int] = []
    /// The first round's store on disk after `close()`.
    var diskBytes = 0

    var compactions: Int { compactionsDuringCommits + compactionsAfterCommits }
}

/// `commits` single-insert commits into a fresh store at `path` with `side.policy`, one writer,
/// buffered; then waits for a compaction still running (timed apart) and closes the store, so
/// that the next side never shares the CPU with this one's compaction.
func autoCompactionRound(_ side: inout AutoCompactionSide, path: String, commits: Int,
                         values: [[String: Value]]) async throws {
    let store = try await openStore(path, .buffered, autoCompaction: side.policy)
    var latencies: [UInt64] = []
    latencies.reserveCapacity(commits)
    var pastSnapshot = store.historySinceSnapshot.events
    var compactions = 0
    var nextNote = commits / 4
    let start = monotonicNanos()
    for i in 0..<commits {
        let t0 = monotonicNanos()
        // Whether a compaction finished since the last commit. This reads under the store's lock,
        // which a compaction holds while it encodes the projection, so it runs inside the timed
        // region: a wait for that lock is charged to this commit, which would otherwise have met
        // it (timed after the commit instead, the wait fell outside every latency).
        let now = store.historySinceSnapshot.events
        if now < pastSnapshot { compactions += 1 }
        pastSnapshot = now
        try await store.transaction { tx in _ = try tx.insert("Item", values[i % values.count]) }
        latencies.append(monotonicNanos() - t0)
        if i + 1 >= nextNote && i + 1 < commits {
            note("    \(grouped(i + 1)) of \(grouped(commits)) commits, \(compactions) automatic compaction(s) so far")
            nextNote += commits / 4
        }
    }
    let end = monotonicNanos()
    // Where the long commits fell (progress output only): next to the compactions, or not.
    let stalls = latencies.enumerated().filter { $0.element >= 10_000_000 }
    if !stalls.isEmpty {
        note("    commits of ≥ 10 ms: " + stalls.prefix(12).map { "#\(grouped($0.offset + 1)) \(latency($0.element))" }.joined(separator: ", ")
             + (stalls.count > 12 ? ", …" : ""))
    }
    await store.waitForAutoCompaction()
    side.drainNanos += monotonicNanos() - end
    let after = store.historySinceSnapshot.events
    if after < pastSnapshot { side.compactionsAfterCommits += 1 }
    side.eventsPastSnapshot.append(after)
    side.compactionsDuringCommits += compactions
    try await store.close()
    if side.paths.isEmpty { side.diskBytes = Machine.directorySize(path) }
    side.paths.append(path)
    side.sample.add(Sample(operations: commits, events: commits, nanos: end - start, latencies: latencies))
}
