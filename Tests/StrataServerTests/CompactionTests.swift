import Foundation
import Logging
import Strata
import StrataLog
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("Zone compaction and retention")
struct CompactionTests {
    func storage(_ dir: TemporaryDirectory) throws -> EmbeddedZoneStorage {
        var log = LogOptions(durability: .buffered)
        log.segmentSize = 4096
        return try EmbeddedZoneStorage(directory: dir.sub("data"), options: EmbeddedZoneStorage.Options(log: log))
    }

    /// Pushes `count` transactions of one replica, one push each (so the log has many records);
    /// returns them.
    @discardableResult
    func fill(_ storage: EmbeddedZoneStorage, replica: ReplicaID, count: UInt64) async throws -> [TransactionRecord] {
        var records: [TransactionRecord] = []
        for sequence in 1...count {
            let record = transaction(replica, sequence...sequence, title: "\(UUID()) \(UUID()) \(UUID())")
            _ = try await storage.append(zone: "z", replica: replica, transactions: [try pushed(record)])
            records.append(record)
        }
        return records
    }

    @Test("Compaction snapshots the zone, retires old history (410 for old tokens), and exactly-once survives a restart")
    func compactRetireRestart() async throws {
        let dir = TemporaryDirectory()
        let replica = ReplicaID(rawValue: 7)
        var storage = try storage(dir)
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        let records = try await fill(storage, replica: replica, count: 80)
        let snapshot = try await storage.compact(zone: "z", retaining: 10)
        #expect(snapshot.position == 70)
        #expect(try await storage.startPosition(zone: "z") > 0)
        do {
            _ = try await storage.read(zone: "z", after: 0, limit: 10)
            Issue.record("read retired history")
        } catch {
            #expect(error.code == .positionRetired)
        }
        // The snapshot holds the replica's first 70 sequences.
        #expect(try ProjectionBuilder(snapshot: snapshot.payload).contiguousSequences()[replica] == 70)
        try await storage.close()

        // After a restart the retired history is still known: a repeated push is not appended
        // again, and a different transaction under a retired sequence is still told apart (its
        // digest was kept): a fork.
        storage = try self.storage(dir)
        #expect(try await storage.acknowledged(zone: "z", replica: replica) == 80)
        let repeated = try await storage.append(zone: "z", replica: replica, transactions: [try pushed(records[2])])
        #expect(repeated.appended == 0)
        let other = try pushed(transaction(replica, 3...3))
        do {
            _ = try await storage.append(zone: "z", replica: replica, transactions: [other])
            Issue.record("a different transaction under a retired sequence was acknowledged")
        } catch {
            #expect(error.code == .replicaForked)
            #expect(error.sequence == 3)
        }
        #expect(try await storage.endPosition(zone: "z") == 80)
        #expect(try await storage.snapshot(zone: "z")?.position == 70)
        try await storage.close()
    }

    @Test("The periodic compactor keeps each zone to its retention")
    func periodicCompactor() async throws {
        let dir = TemporaryDirectory()
        let storage = try storage(dir)
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        try await fill(storage, replica: ReplicaID(rawValue: 9), count: 60)
        let task = Task {
            await compactPeriodically(storage, retention: Retention(transactions: 5, interval: .milliseconds(20)), assetSweep: nil, logger: .init(label: "test"))
        }
        var start: UInt64 = 0
        for _ in 0..<200 where start == 0 {
            try await Task.sleep(for: .milliseconds(10))
            start = try await storage.startPosition(zone: "z")
        }
        task.cancel()
        await task.value
        #expect(start > 0)
        #expect(try await storage.snapshot(zone: "z")?.position == 55)
        try await storage.close()
    }
}
