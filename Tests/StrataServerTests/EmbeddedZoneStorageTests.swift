import Foundation
import Synchronization
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing

@Suite("Embedded zone storage")
struct EmbeddedZoneStorageTests {
    let replica = ReplicaID.random()

    @Test("pushed transactions are pulled back in order, a page at a time")
    func pushAndPull() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        let zone = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let records = [transaction(replica, 1...2), transaction(replica, 3...3), transaction(replica, 4...6)]
        let outcome = try await storage.append(zone: "notes", replica: replica, transactions: records.map(pushed))
        #expect(outcome == AppendOutcome(epoch: zone.epoch, position: 3, acknowledged: 6, appended: 3))
        #expect(try await storage.endPosition(zone: "notes") == 3)

        let first = try await storage.read(zone: "notes", after: 0, limit: 2)
        #expect(first.transactions.map(\.position) == [0, 1])
        #expect(first.nextPosition == 2)
        #expect(first.moreComing)
        #expect(try first.transactions.map { try TransactionRecord(decoding: $0.bytes) } == Array(records[0...1]))
        let second = try await storage.read(zone: "notes", after: first.nextPosition, limit: 2)
        #expect(try second.transactions.map { try TransactionRecord(decoding: $0.bytes) } == [records[2]])
        #expect(second.nextPosition == 3)
        #expect(!second.moreComing)
        let empty = try await storage.read(zone: "notes", after: 3, limit: 10)
        #expect(empty.transactions.isEmpty && empty.nextPosition == 3 && !empty.moreComing)
        try await storage.close()
    }

    @Test("a retried push is acknowledged without being appended again")
    func exactlyOnce() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let batch = try [transaction(replica, 1...2), transaction(replica, 3...4)].map(pushed)
        let first = try await storage.append(zone: "notes", replica: replica, transactions: batch)
        let retry = try await storage.append(zone: "notes", replica: replica, transactions: batch)
        #expect(first.appended == 2 && retry.appended == 0)
        #expect(retry.position == first.position && retry.acknowledged == 4)
        #expect(try await storage.endPosition(zone: "notes") == 2)

        // A batch that overlaps what is held appends only what is new.
        let overlapping = try batch + [pushed(transaction(replica, 5...5))]
        let third = try await storage.append(zone: "notes", replica: replica, transactions: overlapping)
        #expect(third.appended == 1 && third.acknowledged == 5 && third.position == 3)
        try await storage.close()
    }

    @Test("concurrent copies of one push are appended once")
    func concurrentRetries() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let batch = try [transaction(replica, 1...3)].map(pushed)
        let replica = replica
        let appended = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try await storage.append(zone: "notes", replica: replica, transactions: batch).appended }
            }
            return try await group.reduce(0, +)
        }
        #expect(appended == 1)
        #expect(try await storage.endPosition(zone: "notes") == 1)
        try await storage.close()
    }

    @Test("a push that skips sequences is refused with the expected one and changes nothing")
    func sequenceGap() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...2))])
        for records in [[transaction(replica, 4...4)], [transaction(replica, 3...3), transaction(replica, 5...5)]] {
            let batch = try records.map(pushed)
            do {
                _ = try await storage.append(zone: "notes", replica: replica, transactions: batch)
                Issue.record("a gap was accepted")
            } catch {
                #expect(error.code == .sequenceGap)
                #expect(error.expected == (batch.count == 2 ? 4 : 3))
            }
        }
        #expect(try await storage.endPosition(zone: "notes") == 1)
        // Another replica starts at 1.
        let other = ReplicaID.random()
        let skipping = try [pushed(transaction(other, 2...2))]
        do {
            _ = try await storage.append(zone: "notes", replica: other, transactions: skipping)
            Issue.record("a gap was accepted")
        } catch {
            #expect(error.code == .sequenceGap && error.expected == 1)
        }
        try await storage.close()
    }

    @Test("a reopened storage has every zone, transaction and acknowledged sequence")
    func restart() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        let notes = try await storage.createZone(name: "notes", owner: "alice", access: .shared, grants: ["bob": .read, "carol": .readWrite])
        let other = try await storage.createZone(name: "other.zone_1", owner: "bob", access: .public, grants: [:])
        let records = [transaction(replica, 1...1), transaction(replica, 2...5)]
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(records[0])])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(records[1])])
        try await storage.close()

        let reopened = try EmbeddedZoneStorage(directory: dir.path)
        #expect(try await reopened.zones() == [notes, other])
        #expect(try await reopened.endPosition(zone: "notes") == 2)
        #expect(try await reopened.acknowledged(zone: "notes", replica: replica) == 5)
        let read = try await reopened.read(zone: "notes", after: 0, limit: 10)
        #expect(try read.transactions.map { try TransactionRecord(decoding: $0.bytes) } == records)
        // The rebuilt sequences keep the exactly-once and gap rules.
        let retry = try await reopened.append(zone: "notes", replica: replica, transactions: records.map(pushed))
        #expect(retry.appended == 0 && retry.position == 2)
        await #expect(throws: ZoneStorageError.self) {
            try await reopened.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 7...7))])
        }
        let next = try await reopened.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 6...6))])
        #expect(next.appended == 1 && next.position == 3)
        try await reopened.close()
    }

    @Test("a deleted and recreated zone has a new epoch and an empty log")
    func deleteAndRecreate() async throws {
        let dir = TemporaryDirectory()
        let epochs = EpochSequence([11, 22])
        let storage = try EmbeddedZoneStorage(directory: dir.path, options: .init(makeEpoch: { epochs.next() }))
        let first = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        try await storage.deleteZone("notes")
        #expect(try await storage.zone("notes") == nil)
        await #expect(throws: ZoneStorageError.self) { try await storage.endPosition(zone: "notes") }
        let second = try await storage.createZone(name: "notes", owner: "alice", access: .public, grants: [:])
        #expect(first.epoch == 11 && second.epoch == 22)
        #expect(try await storage.endPosition(zone: "notes") == 0)
        do {
            _ = try await storage.read(zone: "notes", epoch: first.epoch, after: 0, limit: 10)
            Issue.record("read with the old epoch")
        } catch {
            #expect(error.code == .zoneReset)
        }
        // The old log's directory is gone.
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.sub("zones"))
        #expect(names == ["notes-0000000000000016"])
        try await storage.close()
    }

    @Test("bad arguments are refused with their codes")
    func refusals() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        func code(_ body: () async throws(ZoneStorageError) -> Void) async -> ZoneStorageError.Code? {
            do { try await body(); return nil } catch { return error.code }
        }
        #expect(await code { () async throws(ZoneStorageError) in _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:]) } == .zoneExists)
        #expect(await code { () async throws(ZoneStorageError) in _ = try await storage.createZone(name: "bad/name", owner: "bob", access: .private, grants: [:]) } == .invalidArgument)
        #expect(await code { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "notes", after: 1, limit: 10) } == .positionBeyondEnd)
        #expect(await code { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "nope", after: 0, limit: 10) } == .zoneNotFound)
        #expect(await code { () async throws(ZoneStorageError) in _ = try await storage.append(zone: "notes", replica: replica, transactions: []) } == .invalidArgument)
        #expect(await code { () async throws(ZoneStorageError) in try await storage.deleteZone("nope") } == .zoneNotFound)
        // A second storage on the same directory is refused while the first is open.
        #expect(throws: ZoneStorageError.self) { try EmbeddedZoneStorage(directory: dir.path) }
        try await storage.close()
    }
}

/// Epochs handed out in order (then 1, 2, 3, …).
final class EpochSequence: Sendable {
    private let state: Mutex<[UInt64]>
    init(_ epochs: [UInt64]) { state = Mutex(epochs) }
    func next() -> UInt64 {
        state.withLock { $0.isEmpty ? UInt64.random(in: 1 ... .max) : $0.removeFirst() }
    }
}
