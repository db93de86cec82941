import BenchSupport
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Strata
import StrataCore
import StrataPostgres
import StrataProtocol
import StrataServer
import StrataSync
import Synchronization

/// One `strata serve` instance: the server over a storage, on a free port of 127.0.0.1, with its
/// follower of the other instances' changes.
final class Instance: Sendable {
    let url: URL
    private let serving: Task<Void, any Error>
    private let following: Task<Void, Never>
    static let token = "bench-token"

    private init(url: URL, serving: Task<Void, any Error>, following: Task<Void, Never>) {
        self.url = url
        self.serving = serving
        self.following = following
    }

    static func start(storage: any ZoneStorage, logger: Logger) async throws -> Instance {
        // `bench`, and one user per pushing device (devices of different users, as in a real
        // deployment: pushes of one owner's zones queue on the owner's quota counter).
        var tokens = ["bench": token]
        for device in 0..<64 { tokens["device\(device)"] = "token-\(device)" }
        let users = try UserDirectory(tokens: tokens)
        var limits = ServerConfiguration.Limits()
        // The benchmark is one user pushing as fast as it can: no rate limit.
        limits.rateLimit.requestsPerSecond = 1_000_000
        limits.rateLimit.burst = 1_000_000
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(host: "127.0.0.1", port: 0, limits: limits),
                                  logger: logger)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let serving = Task { try await app.run(onRunning: { continuation.yield($0) }) }
        let following = Task { await app.followChangesByOthers() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), let url = URL(string: "http://127.0.0.1:\(port)") else {
            serving.cancel()
            throw BenchError("an instance did not start")
        }
        return Instance(url: url, serving: serving, following: following)
    }

    func transport() -> HTTPSyncTransport { HTTPSyncTransport(server: url, bearer: Self.token) }

    /// A transport as the pushing device `device`'s user.
    func transport(device: Int) -> HTTPSyncTransport { HTTPSyncTransport(server: url, bearer: "token-\(device)") }

    func stop() {
        serving.cancel()
        following.cancel()
    }
}

/// The transactions the devices push: `devices × pushes × batch` encoded transactions of
/// `eventsPerTransaction` inserts (~100-byte titles), each device its own replica.
struct PushCorpus {
    let replicas: [ReplicaID]
    /// Per device, per push, the batch's encoded transactions.
    let batches: [[[[UInt8]]]]
    var transactions: Int { batches.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } } }

    init(_ settings: Settings) {
        var rng = SplitMix64(seed: 14)
        replicas = (0..<settings.devices).map { _ in ReplicaID(rawValue: UInt128(rng.next()) << 64 | UInt128(rng.next())) }
        batches = replicas.map { replica in
            var sequence: UInt64 = 0
            return (0..<settings.pushes).map { _ in
                (0..<settings.batch).map { _ in
                    let events = (0..<settings.eventsPerTransaction).map { _ -> Event in
                        sequence += 1
                        return Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                                     change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string("note \(sequence) " + String(repeating: "x", count: 90))]))
                    }
                    return TransactionRecord(replica: replica, events: events).encoded()
                }
            }
        }
    }
}

/// PostgreSQL's own rate for the corpus's rows: each writer inserts its device's batches into a
/// table with the columns of the zone log (`strata_transactions`' shape and primary key), one
/// multi-row INSERT (unnest of arrays) per transaction, committed; rows/s over the whole run.
func insertBaseline(url: PostgresConnectionURL, corpus: PushCorpus, logger: Logger) async throws -> (rows: Double, seconds: Double) {
    // Creates or migrates the schema, nothing more.
    try await PostgresZoneStorage(url: url, logger: logger).withRunning { storage in try await storage.waitUntilOpen() }
    let client = PostgresClient(configuration: clientConfiguration(url), backgroundLogger: logger)
    let running = Task { await client.run() }
    defer { running.cancel() }
    try await client.query("DROP TABLE IF EXISTS bench_rows", logger: logger)
    try await client.query("""
        CREATE TABLE bench_rows (zone_id bigint NOT NULL, position bigint NOT NULL, replica_high bigint NOT NULL, replica_low bigint NOT NULL,
            first_sequence bigint NOT NULL, last_sequence bigint NOT NULL, digest_high bigint NOT NULL, digest_low bigint NOT NULL,
            chain bigint NOT NULL, bytes bytea, PRIMARY KEY (zone_id, position))
        """, logger: logger)
    try await client.query("CREATE INDEX ON bench_rows (zone_id, replica_high, replica_low, first_sequence)", logger: logger)
    // The writers' connections are open before the clock starts, as the storage's are.
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in corpus.batches.indices { group.addTask { try await client.query("SELECT pg_sleep(0.05)", logger: logger) } }
        try await group.waitForAll()
    }
    let started = monotonicNanos()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (device, pushes) in corpus.batches.enumerated() {
            group.addTask {
                var position: Int64 = 0
                for batch in pushes {
                    let positions = batch.indices.map { position + Int64($0) }
                    let numbers = batch.indices.map { Int64($0) }
                    let payloads = batch.map { ByteBuffer(bytes: $0) }
                    position += Int64(batch.count)
                    try await client.withConnection { connection in
                        try await connection.query("BEGIN", logger: logger)
                        try await connection.query("""
                            INSERT INTO bench_rows SELECT \(Int64(device)), p, 1, 2, n, n, n, n, n, b
                            FROM unnest(\(positions)::bigint[], \(numbers)::bigint[], \(payloads)::bytea[]) AS t(p, n, b)
                            """, logger: logger)
                        try await connection.query("COMMIT", logger: logger)
                    }
                }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = seconds(monotonicNanos() - started)
    try await client.query("DROP TABLE bench_rows", logger: logger)
    return (Double(corpus.transactions) / elapsed, elapsed)
}

/// `CHECKPOINT`: writes out every dirty page, so the next phase starts clean.
func checkpoint(url: PostgresConnectionURL, logger: Logger) async throws {
    let client = PostgresClient(configuration: clientConfiguration(url), backgroundLogger: logger)
    let running = Task { await client.run() }
    defer { running.cancel() }
    try await client.query("CHECKPOINT", logger: logger)
}

func clientConfiguration(_ url: PostgresConnectionURL) -> PostgresClient.Configuration {
    var configuration = PostgresClient.Configuration(host: url.host ?? "127.0.0.1", port: url.port, username: url.user, password: url.password,
                                                     database: url.database, tls: .disable)
    configuration.options.maximumConnections = 20
    return configuration
}

/// The devices push their batches concurrently, device `d` (user `device<d>`) through instance
/// `d % count`, each into a zone of its own (`tag` keeps the runs' zones apart): transactions/s and per-push
/// latency.
func pushRun(corpus: PushCorpus, instances: [Instance], tag: Int) async throws -> (rows: Double, p50: UInt64, p99: UInt64) {
    let transports = corpus.batches.indices.map { instances[$0 % instances.count].transport(device: $0) }
    for device in corpus.batches.indices {
        _ = try await transports[device].ensureZone(ZoneReference("push-\(tag)-\(device)"), create: true)
    }
    let latencies = Collected()
    let cpuBefore = processCPUSeconds()
    let started = monotonicNanos()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (device, pushes) in corpus.batches.enumerated() {
            let transport = transports[device]
            group.addTask {
                for batch in pushes {
                    let sent = monotonicNanos()
                    _ = try await transport.push(zone: ZoneReference("push-\(tag)-\(device)"), transactions: batch)
                    let took = monotonicNanos() - sent
                    latencies.append(took)
                }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = seconds(monotonicNanos() - started)
    note("  this process (devices' HTTP clients and the instances) used \(fixed((processCPUSeconds() - cpuBefore) / elapsed, 2)) cores of the run's \(fixed(elapsed, 2)) s")
    let sorted = latencies.values.sorted()
    return (Double(corpus.transactions) / elapsed, percentile(sorted, 50), percentile(sorted, 99))
}

/// The devices' batches appended straight to the storage (no HTTP, no server), each device into
/// a zone of its own owned by its user: what the PostgreSQL side of a push costs.
func directAppendRun(corpus: PushCorpus, storage: any ZoneStorage, tag: Int) async throws -> (rows: Double, p50: UInt64, p99: UInt64) {
    for device in corpus.batches.indices {
        _ = try await storage.createZone(ZoneID(owner: "device\(device)", name: "direct-\(tag)-\(device)"), access: .private, grants: [:])
    }
    let pushed = try corpus.batches.map { pushes in
        try pushes.map { batch in
            try batch.map { bytes in
                let header = try TransactionHeader(decoding: bytes)
                return PushedTransaction(bytes: bytes, firstSequence: header.firstSequence, lastSequence: header.firstSequence + header.eventCount - 1)
            }
        }
    }
    let latencies = Collected()
    let started = monotonicNanos()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (device, pushes) in pushed.enumerated() {
            group.addTask {
                for batch in pushes {
                    let sent = monotonicNanos()
                    _ = try await storage.append(zone: ZoneID(owner: "device\(device)", name: "direct-\(tag)-\(device)"), user: "device\(device)",
                                                 replica: corpus.replicas[device], transactions: batch, storedBytesLimit: 10 << 30)
                    latencies.append(monotonicNanos() - sent)
                }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = seconds(monotonicNanos() - started)
    let sorted = latencies.values.sorted()
    return (Double(corpus.transactions) / elapsed, percentile(sorted, 50), percentile(sorted, 99))
}

/// A zone of `catchUpEvents` events in transactions of 100 inserts, for the catch-up rows.
struct CatchUpCorpus {
    let settings: Settings
    init(_ settings: Settings) { self.settings = settings }

    static let zone = ZoneID(owner: "bench", name: "catch-up")

    func fill(_ storage: any ZoneStorage) async throws {
        _ = try await storage.createZone(Self.zone, access: .private, grants: [:])
        let replica = ReplicaID(rawValue: 0xCA7C_0000)
        var sequence: UInt64 = 0
        let transactions = settings.catchUpEvents / settings.catchUpPerTransaction
        var batch: [PushedTransaction] = []
        for _ in 0..<transactions {
            let events = (0..<settings.catchUpPerTransaction).map { _ -> Event in
                sequence += 1
                return Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                             change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string("note \(sequence) " + String(repeating: "y", count: 60))]))
            }
            let first = sequence - UInt64(events.count) + 1
            batch.append(PushedTransaction(bytes: TransactionRecord(replica: replica, events: events).encoded(), firstSequence: first, lastSequence: sequence))
            if batch.count == 100 {
                _ = try await storage.append(zone: Self.zone, user: "bench", replica: replica, transactions: batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { _ = try await storage.append(zone: Self.zone, user: "bench", replica: replica, transactions: batch) }
    }
}

/// Pulls the whole catch-up zone through `instance` over HTTP (pages of 1,000 transactions; each
/// transaction's header read for its event count): events/s.
func catchUpRun(instance: Instance, expected: Int) async throws -> Double {
    let transport = instance.transport()
    var token: String?
    var events = 0
    let started = monotonicNanos()
    while true {
        let page = try await transport.pull(zone: ZoneReference(CatchUpCorpus.zone.name), after: token, limit: 1000, wait: nil)
        for bytes in page.transactions { events += Int(try TransactionHeader(decoding: bytes).eventCount) }
        token = page.nextToken
        if !page.moreComing { break }
    }
    let elapsed = seconds(monotonicNanos() - started)
    guard events == expected else { throw BenchError("catch-up pulled \(events) events, expected \(expected)") }
    return Double(events) / elapsed
}

/// A poll waits on `poller` past the zone's end; one transaction is pushed through `pusher`;
/// the time from the push being sent to the poll's answer arriving, per sample.
func wakeUpRun(pusher: Instance, poller: Instance, zone: String, settings: Settings) async throws -> (p50: UInt64, p99: UInt64) {
    let push = pusher.transport(), pull = poller.transport()
    let reference = ZoneReference(zone)
    _ = try await push.ensureZone(reference, create: true)
    let replica = ReplicaID(rawValue: 0x3A4E)
    var token = try await pull.pull(zone: reference, after: nil, limit: 1, wait: nil).nextToken
    var samples: [UInt64] = []
    for sample in 0..<(settings.wakeUpWarmup + settings.wakeUpSamples) {
        let sequence = UInt64(sample + 1)
        let record = TransactionRecord(replica: replica, events: [Event(
            id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
            change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string("wake \(sequence)")]))])
        let after = token
        let polling = Task { try await pull.pull(zone: reference, after: after, limit: 100, wait: .seconds(20)) }
        // Let the poll reach the server and park before the push (a poll that arrives after the
        // push answers at once, which would flatter the numbers).
        try await Task.sleep(for: .milliseconds(30))
        let sent = monotonicNanos()
        _ = try await push.push(zone: reference, transactions: [record.encoded()])
        let page = try await polling.value
        let arrived = monotonicNanos()
        guard !page.transactions.isEmpty else { throw BenchError("a long poll came back empty (it was not woken within 20 s)") }
        token = page.nextToken
        if sample >= settings.wakeUpWarmup { samples.append(arrived - sent) }
    }
    let sorted = samples.sorted()
    return (percentile(sorted, 50), percentile(sorted, 99))
}

/// Latencies appended by concurrent tasks.
final class Collected: Sendable {
    private let state = Mutex<[UInt64]>([])
    func append(_ value: UInt64) { state.withLock { $0.append(value) } }
    var values: [UInt64] { state.withLock { $0 } }
}

/// CPU time (user and system) this process has used.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// A storage running (its connection pool and schema, `run()`) until it is closed, and open.
func startedStorage(url: PostgresConnectionURL, options: PostgresZoneStorage.Options = .init(), logger: Logger) async throws -> PostgresZoneStorage {
    let storage = PostgresZoneStorage(url: url, options: options, logger: logger)
    // Ends when the benchmark closes the storage (close() ends run()).
    let running = Task { try await storage.run() }
    do {
        try await storage.waitUntilOpen()
    } catch {
        try? await storage.close()
        _ = await running.result
        throw error
    }
    return storage
}
