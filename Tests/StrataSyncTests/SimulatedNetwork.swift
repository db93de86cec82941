import Foundation
import Logging
import Strata
import StrataServer
import StrataSync
import StrataTestSupport
import Synchronization

/// The real server storage (EmbeddedZoneStorage on disk) behind a seeded, misbehaving network:
/// requests and answers are dropped, requests are duplicated, pushes are held back and delivered
/// late (out of order), and the server restarts between requests. Calls run one at a time, so a
/// seed replays the same run.
final class SimulatedNetwork: SyncTransport {
    struct State {
        var storage: EmbeddedZoneStorage?
        var rng: SeededGenerator
        var late: [(zone: String, replica: ReplicaID, transactions: [PushedTransaction])] = []
        var faults = true
        var restarts = 0
    }

    let directory: String
    let state: Mutex<State>
    /// Thousands of restarts and compactions: only warnings are worth printing.
    let quiet: Logger = {
        var logger = Logger(label: "strata.sim.server")
        logger.logLevel = .warning
        return logger
    }()
    /// Small segments, so that compaction really retires history.
    let options: EmbeddedZoneStorage.Options = {
        var log = LogOptions(durability: .buffered)
        log.segmentSize = 4096
        return EmbeddedZoneStorage.Options(log: log, makeEpoch: { 42 })
    }()

    init(directory: String, seed: UInt64) throws {
        self.directory = directory
        state = Mutex(State(storage: try EmbeddedZoneStorage(directory: directory, options: options, logger: quiet), rng: SeededGenerator(seed: seed)))
    }

    /// Stops misbehaving (for quiescence).
    func heal() { state.withLock { $0.faults = false } }

    func roll(_ percent: UInt64) -> Bool {
        state.withLock { $0.faults && $0.rng.next() % 100 < percent }
    }

    func storage() throws -> EmbeddedZoneStorage {
        guard let storage = state.withLock({ $0.storage }) else { throw SyncError(.transport, "server down") }
        return storage
    }

    /// Closes and reopens the server's storage: whatever it acknowledged must survive.
    func restart() async throws {
        let old = state.withLock { s -> EmbeddedZoneStorage? in
            defer { s.storage = nil }
            return s.storage
        }
        try await old?.close()
        let reopened = try EmbeddedZoneStorage(directory: directory, options: options, logger: quiet)
        state.withLock {
            $0.storage = reopened
            $0.restarts += 1
        }
    }

    func close() async throws {
        try await state.withLock({ $0.storage })?.close()
    }

    func ensureZone(_ zone: String) async throws {
        if roll(5) { throw SyncError(.transport, "dropped") }
        let storage = try storage()
        if try await storage.zone(named: zone) == nil {
            _ = try await storage.createZone(name: zone, owner: "sim", access: .private, grants: [:])
        }
    }

    func push(zone: String, transactions: [[UInt8]]) async throws -> PushResult {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let decoded = try transactions.map { try TransactionRecord(decoding: $0) }
        guard let replica = decoded.first?.replica else { throw SyncError(.badRequest, "empty push", status: 400) }
        let pushed = decoded.compactMap(PushedTransaction.init)
        if roll(10) {
            // Held back: this copy arrives later, after newer requests.
            state.withLock { $0.late.append((zone, replica, pushed)) }
        }
        let outcome = try await append(zone: zone, replica: replica, pushed)
        if roll(10) { _ = try? await append(zone: zone, replica: replica, pushed) }  // duplicated on the way
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return PushResult(token: ChangeToken(epoch: outcome.epoch, position: outcome.position).description, acknowledged: outcome.acknowledged)
    }

    private func append(zone: String, replica: ReplicaID, _ pushed: [PushedTransaction]) async throws -> AppendOutcome {
        do {
            return try await storage().append(zone: zone, replica: replica, transactions: pushed)
        } catch let error as ZoneStorageError where error.code == .sequenceGap {
            throw SyncError(.sequenceGap, error.message, status: 409, expectedSequence: error.expected)
        }
    }

    func deliverLate() async {
        let late = state.withLock { s -> [(zone: String, replica: ReplicaID, transactions: [PushedTransaction])] in
            defer { s.late.removeAll() }
            return s.late
        }
        for item in late.reversed() { _ = try? await append(zone: item.zone, replica: item.replica, item.transactions) }
    }

    func pull(zone: String, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        if roll(30) { await deliverLate() }
        var position: UInt64 = 0
        if let token, !token.isEmpty {
            do {
                position = try ChangeToken(parsing: token).position
            } catch {
                throw SyncError(.badRequest, "\(error)", status: 400)
            }
        }
        let result: ReadResult
        do {
            result = try await storage().read(zone: zone, after: position, limit: limit)
        } catch let error as ZoneStorageError where error.code == .positionRetired {
            throw SyncError(.tokenExpired, error.message, status: 410)
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return PullResult(transactions: result.transactions.map(\.bytes),
                          nextToken: ChangeToken(epoch: result.epoch, position: result.nextPosition).description,
                          moreComing: result.moreComing)
    }

    func snapshot(zone: String) async throws -> ZoneSnapshotPayload? {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        guard let snapshot = try await storage().snapshot(zone: zone) else { return nil }
        return ZoneSnapshotPayload(payload: snapshot.payload, token: ChangeToken(epoch: snapshot.epoch, position: snapshot.position).description)
    }

    /// Compacts the zone keeping only the newest `retaining` transactions: clients behind that
    /// must bootstrap from the snapshot.
    func compact(retaining: UInt64) async throws {
        let storage = try storage()
        if try await storage.zone(named: "sim") != nil { try await storage.compact(zone: "sim", retaining: retaining) }
    }
}
