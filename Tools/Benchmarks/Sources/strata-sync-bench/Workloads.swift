// The workloads: build a store, push it to a fresh zone, catch a fresh store up from the zone, and
// long-poll wake-ups. They talk to the server child over loopback HTTP with HTTPSyncTransport;
// a counting wrapper around it sees every request the engine makes.
import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog
import StrataProtocol
import StrataSync
import Synchronization

/// The schema of every store in the run (the same as strata-store-bench's).
let benchSchema = Schema {
    Entity("Item", attributes: [
        Attribute("name", .string, default: ""),
        Attribute("count", .integer),
        Attribute("score", .double),
        Attribute("done", .bool, default: false),
    ])
}

/// Small objects: a short name, an integer, a double and a bool (seeded, the same on every run).
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

/// `autoCompaction` is `.disabled` wherever a row measures throughput that earlier runs and the
/// goals compare with (the source store's build and push, the catch-ups); only the long-poll
/// pusher keeps the default.
func openStore(_ path: String, _ durability: Durability, autoCompaction: AutoCompaction) async throws -> Store {
    var options = StoreOptions(durability: durability)
    options.autoCompaction = autoCompaction
    return try await Store.open(at: path, schema: benchSchema, options: options)
}

// MARK: Counting what goes over the wire

/// What a `CountingTransport` saw.
struct WireCounts: Sendable {
    /// Every request the engine made, answered or failed (each retry counts).
    var requests = 0
    var pushes = 0
    var pushedTransactions = 0
    /// Request bodies as framed: varint length + transaction bytes per transaction.
    var pushBodyBytes = 0
    var pushNanos: UInt64 = 0
    var lastPushEnd: UInt64 = 0
    var pulls = 0
    var pulledTransactions = 0
    /// Response bodies as framed.
    var pullBodyBytes = 0
    var pullNanos: UInt64 = 0
    var firstPullStart: UInt64 = 0
    /// Snapshots downloaded and states uploaded (healing), in bytes, and time spent in them.
    var snapshots = 0
    var snapshotBytes = 0
    var snapshotNanos: UInt64 = 0
    var stateUploads = 0
    var stateBytes = 0
    var stateNanos: UInt64 = 0
    /// Failed requests by error code (the engine retries the transient ones).
    var failures: [String: Int] = [:]

    /// Framed push and pull bodies, uploaded states and downloaded snapshots (no HTTP headers).
    var wireBytes: Int { pushBodyBytes + pullBodyBytes + stateBytes + snapshotBytes }

    var failureText: String {
        failures.isEmpty ? "no failed requests"
            : failures.sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }.joined(separator: ", ")
    }
}

/// Wraps a transport and counts requests, framed body bytes and time spent in them.
final class CountingTransport: SyncTransport {
    let inner: any SyncTransport
    private let counts = Mutex(WireCounts())

    /// Added before each pull is forwarded: a round trip of a slower network than loopback
    /// (latency only, not bandwidth), for the read-ahead rows.
    let pullDelay: Duration

    init(_ inner: any SyncTransport, pullDelay: Duration = .zero) {
        self.inner = inner
        self.pullDelay = pullDelay
    }

    var seen: WireCounts { counts.withLock { $0 } }

    static func framedSize(_ transactions: [[UInt8]]) -> Int {
        transactions.reduce(0) { total, bytes in
            var length = bytes.count >> 7
            var prefix = 1
            while length > 0 { prefix += 1; length >>= 7 }
            return total + prefix + bytes.count
        }
    }

    private func failed(_ error: any Error) {
        let code = (error as? SyncError).map { "\($0.code)" } ?? "\(type(of: error))"
        counts.withLock { $0.failures[code, default: 0] += 1 }
    }

    private func request() { counts.withLock { $0.requests += 1 } }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        request()
        do { return try await inner.ensureZone(zone, create: create) } catch { failed(error); throw error }
    }

    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        request()
        let start = monotonicNanos()
        do {
            let result = try await inner.push(zone: zone, transactions: transactions)
            let end = monotonicNanos()
            let size = Self.framedSize(transactions)
            counts.withLock {
                $0.pushes += 1
                $0.pushedTransactions += transactions.count
                $0.pushBodyBytes += size
                $0.pushNanos += end - start
                $0.lastPushEnd = end
            }
            return result
        } catch {
            failed(error)
            throw error
        }
    }

    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? {
        request()
        let start = monotonicNanos()
        do {
            let snapshot = try await inner.snapshot(zone: zone)
            let end = monotonicNanos()
            counts.withLock {
                $0.snapshots += 1
                $0.snapshotBytes += snapshot?.payload.count ?? 0
                $0.snapshotNanos += end - start
            }
            return snapshot
        } catch { failed(error); throw error }
    }

    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        request()
        let start = monotonicNanos()
        do {
            let result = try await inner.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
            let end = monotonicNanos()
            counts.withLock {
                $0.stateUploads += 1
                $0.stateBytes += state.count
                $0.stateNanos += end - start
            }
            return result
        } catch { failed(error); throw error }
    }

    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] {
        request()
        do { return try await inner.replicas(zone: zone) } catch { failed(error); throw error }
    }

    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        request()
        let start = monotonicNanos()
        counts.withLock { if $0.firstPullStart == 0 { $0.firstPullStart = start } }
        do {
            if pullDelay > .zero { try await Task.sleep(for: pullDelay) }
            let result = try await inner.pull(zone: zone, after: token, limit: limit, wait: wait)
            let end = monotonicNanos()
            let size = Self.framedSize(result.transactions)
            counts.withLock {
                $0.pulls += 1
                $0.pulledTransactions += result.transactions.count
                $0.pullBodyBytes += size
                $0.pullNanos += end - start
            }
            return result
        } catch {
            failed(error)
            throw error
        }
    }
}

func transport(_ server: ServerProcess) -> HTTPSyncTransport {
    HTTPSyncTransport(server: server.url, bearer: ServerProcess.token)
}

// MARK: Building the store to push

/// `events` inserts, `perTransaction` to a transaction, buffered; timed through a `flush()` of the log.
func buildStore(at path: String, events: Int, perTransaction: Int) async throws -> (store: Store, write: Sample) {
    // No automatic compaction: row 0's build rate stays comparable with earlier runs, and rows 1a-1b
    // push a store whose log holds its whole history, as before.
    let store = try await openStore(path, .buffered, autoCompaction: .disabled)
    let write = try await insertItems(into: store, events: events, perTransaction: perTransaction)
    return (store, write)
}

/// Commits `events` inserts into `store`, `perTransaction` to a transaction; timed through a
/// `flush()` of the log.
func insertItems(into store: Store, events: Int, perTransaction: Int) async throws -> Sample {
    let values = itemValues(count: 4096, seed: 4)
    var write = Sample()
    let start = monotonicNanos()
    var done = 0
    var nextNote = events / 4
    while done < events {
        let n = min(perTransaction, events - done)
        let first = done
        try await store.transaction { tx in
            for k in 0..<n { try tx.insert("Item", values[(first + k) % values.count]) }
        }
        done += n
        write.operations += 1
        if done >= nextNote && done < events {
            note("  \(grouped(done)) of \(grouped(events)) inserts")
            nextNote += events / 4
        }
    }
    try await store.segmentLog.flush()
    write.nanos = monotonicNanos() - start
    write.events = events
    return write
}

// MARK: 1. push

struct PushRun {
    var batchSize: Int
    var report: SyncReport
    /// From calling `sync()` until the last push returned (ensureZone, reading the unpushed
    /// transactions from the store, every push).
    var pushPhase = Sample()
    /// The whole `sync()`, including pulling the zone back (the store skips its own events).
    var sync = Sample()
    var wire = WireCounts()
    var serverCPU = 0.0
    var clientCPU = 0.0
}

/// Pushes every transaction of `store` to the fresh zone `zone` with one `sync()`.
func pushRun(_ store: Store, server: ServerProcess, zone: String, batchSize: Int, events: Int) async throws -> PushRun {
    var options = SyncOptions()
    options.pushBatchSize = batchSize
    let counting = CountingTransport(transport(server))
    let engine = try SyncEngine(store: store, transport: counting, zone: zone, options: options)
    let serverBefore = server.cpuSeconds()
    let clientBefore = processCPUSeconds()
    let start = monotonicNanos()
    let report = try await engine.sync()
    let end = monotonicNanos()
    var run = PushRun(batchSize: batchSize, report: report)
    run.serverCPU = server.cpuSeconds() - serverBefore
    run.clientCPU = processCPUSeconds() - clientBefore
    run.wire = counting.seen
    run.pushPhase = Sample(operations: run.wire.pushes, events: events, nanos: run.wire.lastPushEnd - start)
    run.sync = Sample(operations: 1, events: events, nanos: end - start)
    guard report.pushedTransactions == run.wire.pushedTransactions || !run.wire.failures.isEmpty else {
        throw BenchError("sync() reports \(report.pushedTransactions) pushed transactions, the transport saw \(run.wire.pushedTransactions)")
    }
    return run
}

// MARK: 2. catch-up

struct CatchUpRun {
    var pullLimit: Int
    var report: SyncReport
    var sample = Sample()
    var wire = WireCounts()
    var serverCPU = 0.0
    var clientCPU = 0.0
    var serverWritten = 0
    var serverRSS = 0
    var count = 0
    var digestMatches = false
}

/// A fresh store at `path` pulls the whole zone with one `sync()`.
func catchUpRun(at path: String, server: ServerProcess, zone: String, pullLimit: Int, readAhead: Bool = true, pullDelay: Duration = .zero,
                expectedCount: Int, expectedDigest: String) async throws -> CatchUpRun {
    // No automatic compaction: the row measures the apply path (W3 in the Benchmarks article
    // compares it with a goal and earlier runs). With the default, a fresh store pulling 1 M
    // events would also snapshot its growing projection about ten times in the background
    // (strata-store-bench's row 5 measures what that costs a committer).
    let store = try await openStore(path, .groupCommit, autoCompaction: .disabled)
    var options = SyncOptions()
    options.pullLimit = pullLimit
    options.pullReadAhead = readAhead
    let counting = CountingTransport(transport(server), pullDelay: pullDelay)
    let engine = try SyncEngine(store: store, transport: counting, zone: zone, options: options)
    let serverBefore = server.cpuSeconds()
    let writtenBefore = server.writtenBytes()
    let clientBefore = processCPUSeconds()
    let start = monotonicNanos()
    let report = try await engine.sync()
    let end = monotonicNanos()
    var run = CatchUpRun(pullLimit: pullLimit, report: report)
    run.serverCPU = server.cpuSeconds() - serverBefore
    run.serverWritten = server.writtenBytes() - writtenBefore
    run.clientCPU = processCPUSeconds() - clientBefore
    run.serverRSS = server.residentBytes()
    run.wire = counting.seen
    run.sample = Sample(operations: run.wire.pulls, events: report.appliedEvents, nanos: end - start)
    run.count = store.count("Item")
    run.digestMatches = store.digest() == expectedDigest
    try await store.close()
    guard run.count == expectedCount else {
        throw BenchError("the caught-up store holds \(run.count) objects, expected \(expectedCount)")
    }
    return run
}

// MARK: 2e. remote bisection

struct BisectionRun {
    var events = 0
    var localSeconds = 0.0
    var cold = Sample(operations: 0, events: 0, nanos: 0)
    var warm = Sample(operations: 0, events: 0, nanos: 0)
    var bytes = 0
    var rounds = 0
    var found = false
}

/// The store at `storePath` (whose events the zone holds) compared with `zone` by digests, one of
/// its events' fingerprints changed first: the first comparison (the server reads the zone to
/// build its digests), then a second (they are cached).
func bisectionRun(storePath: String, server: ServerProcess, zone: String) async throws -> BisectionRun {
    var run = BisectionRun()
    let store = try await openStore(storePath, .buffered, autoCompaction: .disabled)
    let started = monotonicNanos()
    let digests = try store.historyDigests()
    run.localSeconds = Double(monotonicNanos() - started) / 1e9
    let replica = store.replicaID
    try await store.close()
    guard let own = digests.replicas[replica] else { throw BenchError("the source store holds no events of its own replica") }
    var pairs = own.fingerprints(in: [0..<UInt64.max]).map { (sequence: $0.sequence, fingerprint: $0.fingerprint) }
    run.events = digests.replicas.values.reduce(0) { $0 + $1.count }
    let target = pairs.count / 2 + 17
    pairs[target].fingerprint.low ^= 1
    var replicas = digests.replicas
    replicas[replica] = SequenceDigests(pairs)
    let device = HistoryDigests(replicas: replicas)
    let expected = [EventID(replica: replica, sequence: pairs[target].sequence)]
    for pass in 0..<2 {
        let remote = transport(server).zoneDigests(ZoneReference(zone))
        let start = monotonicNanos()
        let outcome = try await DigestBisection.run(local: device, remote: remote)
        let sample = Sample(operations: outcome.rounds, events: run.events, nanos: monotonicNanos() - start)
        if pass == 0 {
            run.cold = sample
        } else {
            run.warm = sample
            run.bytes = remote.bytes.sent + remote.bytes.received
            run.rounds = outcome.rounds
            run.found = outcome.differing == expected
        }
    }
    return run
}

// MARK: 2f. remote state bisection

struct StateBisectionRun {
    var objects = 0
    var localSeconds = 0.0
    var cold = Sample(operations: 0, events: 0, nanos: 0)
    var warm = Sample(operations: 0, events: 0, nanos: 0)
    var bytes = 0
    var rounds = 0
    var found = false
}

/// The store at `storePath` (whose events the zone holds) compared with `zone`'s state by object,
/// one object's fingerprint changed first: the first comparison (the server replays the zone and
/// fingerprints every object), then a second (its state is kept).
func stateBisectionRun(storePath: String, server: ServerProcess, zone: String) async throws -> StateBisectionRun {
    var run = StateBisectionRun()
    let store = try await openStore(storePath, .buffered, autoCompaction: .disabled)
    let started = monotonicNanos()
    let state = store.stateDigests()
    run.localSeconds = Double(monotonicNanos() - started) / 1e9
    try await store.close()
    var objects = state.fingerprints(in: ObjectID(rawValue: 0)...ObjectID(rawValue: .max))
    guard !objects.isEmpty else { throw BenchError("the source store holds no objects") }
    run.objects = objects.count
    let target = objects.count / 3 + 11
    objects[target].fingerprint.low ^= 1
    let device = StateDigests(objects)
    let epoch = try await transport(server).describeZone(ZoneReference(zone)).epoch
    for pass in 0..<2 {
        let remote = transport(server).zoneStateDigests(ZoneReference(zone), epoch: epoch)
        let start = monotonicNanos()
        let outcome = try await remote.compare(device)
        let sample = Sample(operations: outcome.rounds, events: run.objects, nanos: monotonicNanos() - start)
        if pass == 0 {
            run.cold = sample
        } else {
            run.warm = sample
            run.bytes = remote.bytes.sent + remote.bytes.received
            run.rounds = outcome.rounds
            run.found = outcome.differing == [objects[target].id] && outcome.onlyHere.isEmpty && outcome.onlyThere.isEmpty
        }
    }
    return run
}

// MARK: 3. long-poll wake-up

struct WakeUpRun {
    /// Pull returned − push returned, signed (negative: the pull came back first), in nanoseconds.
    var afterPushReturned: [Int64] = []
    /// Pull returned − push sent.
    var afterPushSent: [Int64] = []
    /// How long each push took (sent → answered).
    var pushLatencies: [UInt64] = []
    var pulls = 0
    var emptyPulls = 0
    var wire = WireCounts()
}

/// One task long-polls `zone` (wait 10 s) while this one commits and pushes a one-insert
/// transaction every `interval`; each push is matched with the pull that brought it back.
func wakeUpRun(storePath: String, server: ServerProcess, zone: String, warmup: Int, samples: Int,
               interval: Duration) async throws -> WakeUpRun {
    // The default experience: an app's store committing and pushing one insert at a time. Its
    // ~220 events stay far below the automatic compaction's threshold, so it never compacts.
    let store = try await openStore(storePath, .groupCommit, autoCompaction: .default)
    let pusher = CountingTransport(transport(server))
    let puller = transport(server)
    _ = try await pusher.ensureZone(ZoneReference(zone), create: true)
    let startToken = try await puller.pull(zone: ZoneReference(zone), after: nil, limit: 1, wait: nil).nextToken
    let total = warmup + samples

    // The puller: keep a long poll open, note when each sequence came back, until cancelled.
    struct Seen { var arrivals: [UInt64: UInt64] = [:]; var pulls = 0; var empty = 0; var stop = false }
    let seen = Locked(Seen())
    let pullTask = Task {
        var token = startToken
        while !Task.isCancelled && !seen.withLock({ $0.stop }) {
            let page = try await puller.pull(zone: ZoneReference(zone), after: token, limit: 1000, wait: .seconds(10))
            let now = monotonicNanos()
            let sequences = try page.transactions.compactMap { try TransactionRecord(decoding: $0).sequences?.upperBound }
            seen.withLock {
                $0.pulls += 1
                if sequences.isEmpty { $0.empty += 1 }
                for sequence in sequences { $0.arrivals[sequence] = now }
            }
            token = page.nextToken
        }
    }
    // Let the first long poll reach the server and park.
    try await Task.sleep(for: .milliseconds(300))

    var pushed: [(sequence: UInt64, sent: UInt64, returned: UInt64)] = []
    var nextPosition: UInt64 = 0
    let values = itemValues(count: 256, seed: 5)
    /// Commits one insert and pushes what the store has not pushed yet (the first time, also its
    /// schema transaction); returns the last sequence pushed and when the push was sent and answered.
    func commitAndPush(_ i: Int) async throws -> (sequence: UInt64, sent: UInt64, returned: UInt64) {
        try await store.transaction { tx in _ = try tx.insert("Item", values[i % values.count]) }
        let stored = try store.transactions(from: nextPosition, forSync: true).filter { $0.transaction.replica == store.replicaID }
        guard let last = stored.last, let sequence = last.transaction.sequences?.upperBound else {
            throw BenchError("the pusher's transaction \(i) is not in its log")
        }
        nextPosition = last.position + 1
        let sent = monotonicNanos()
        _ = try await pusher.push(zone: ZoneReference(zone), transactions: stored.map { $0.transaction.encoded() })
        return (sequence, sent, monotonicNanos())
    }
    let clock = ContinuousClock()
    var tick = clock.now
    do {
        for i in 0..<total {
            pushed.append(try await commitAndPush(i))
            tick = tick.advanced(by: interval)
            if tick > clock.now { try await Task.sleep(until: tick, clock: clock) }
        }
    } catch {
        pullTask.cancel()
        try? await store.close()
        throw error
    }
    // Everything pushed should be back at once; don't hang on a lost wake-up.
    let expected = Set(pushed.map(\.sequence))
    let deadline = monotonicNanos() + 15_000_000_000
    while monotonicNanos() < deadline && !expected.isSubset(of: seen.withLock({ Set($0.arrivals.keys) })) {
        try await Task.sleep(for: .milliseconds(5))
    }
    // Release the open long poll with one more push rather than leaving it to wait out its 10 s
    // on the server (which would hold up the server's graceful shutdown).
    seen.withLock { $0.stop = true }
    _ = try await commitAndPush(total)
    let stopper = Task {
        try await Task.sleep(for: .seconds(12))
        pullTask.cancel()
    }
    let failure = await pullTask.result
    stopper.cancel()
    try await store.close()
    let final = seen.withLock { $0 }
    if case .failure(let error) = failure {
        throw BenchError("the long poll failed: \(error)")
    }
    var run = WakeUpRun()
    run.pulls = final.pulls
    run.emptyPulls = final.empty
    run.wire = pusher.seen
    for (index, push) in pushed.enumerated() where index >= warmup {
        guard let arrivedAt = final.arrivals[push.sequence] else {
            throw BenchError("push \(index) (sequence \(push.sequence)) never came back to the long poll")
        }
        run.afterPushReturned.append(Int64(bitPattern: arrivedAt &- push.returned))
        run.afterPushSent.append(Int64(bitPattern: arrivedAt &- push.sent))
        run.pushLatencies.append(push.returned - push.sent)
    }
    return run
}

/// A value behind a lock that escaping closures can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Nearest-rank percentile of signed nanoseconds, as a latency ("−0.12 ms" when negative).
func signedPercentile(_ values: [Int64], _ p: Double) -> Int64 {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count - 1, max(0, rank - 1))]
}

func signedLatency(_ nanos: Int64) -> String {
    nanos < 0 ? "−" + latency(UInt64(-nanos)) : latency(UInt64(nanos))
}

// MARK: 2c. the client's apply alone

/// What a catch-up costs the client without the network or the server: the source store's
/// transactions, read from its log as bytes beforehand, applied to a fresh store by
/// `applyRemote(encoded:)` in pages of `pageSize` — what the sync engine calls with each pulled
/// page. The best of `runs` fresh stores (this machine's noise is one-sided).
struct ApplyAloneRun {
    var best = Sample(operations: 0, events: 0, nanos: .max)
    var all: [Sample] = []
}

func applyAloneRun(source: String, at path: String, pageSize: Int, runs: Int, keep: Bool,
                   expectedCount: Int, expectedDigest: String) async throws -> ApplyAloneRun {
    let log = try SegmentLog.open(at: Store.logDirectory(ofStoreAt: source))
    let payloads = try log.entries(from: log.startPosition).map(\.payload)
    try await log.close()
    var run = ApplyAloneRun()
    for attempt in 0..<runs {
        try? FileManager.default.removeItem(atPath: path)
        let store = try await openStore(path, .groupCommit, autoCompaction: .disabled)
        var applied = 0
        let start = monotonicNanos()
        var index = 0
        while index < payloads.count {
            let page = Array(payloads[index..<min(index + pageSize, payloads.count)])
            applied += try await store.applyRemote(encoded: page)
            index += pageSize
        }
        let end = monotonicNanos()
        let count = store.count("Item")
        let digest = store.digest()
        try await store.close()
        if !keep || attempt + 1 < runs { try? FileManager.default.removeItem(atPath: path) }
        guard count == expectedCount, digest == expectedDigest else {
            throw BenchError("apply alone, run \(attempt + 1): \(count) objects (expected \(expectedCount)), digest \(digest == expectedDigest ? "matches" : "differs")")
        }
        let sample = Sample(operations: payloads.count, events: applied, nanos: end - start)
        run.all.append(sample)
        if sample.nanos < run.best.nanos { run.best = sample }
    }
    return run
}
