import Foundation
import Strata
@testable import StrataServer
import StrataLog
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// Change tokens fingerprint the whole history before their position, so that a server restored
/// from a backup and grown again is caught even when the transaction right before a token is the
/// one the client saw there (a device re-pushed its transactions in their first order, after
/// another device's). The fingerprints survive a restart and a compaction unchanged.
@Suite("Tokens fingerprint the zone's whole history")
struct HistoryFingerprintTests {
    let a = ReplicaID(rawValue: 0xA)
    let b = ReplicaID(rawValue: 0xB)
    let c = ReplicaID(rawValue: 0xC)

    func storage(_ path: String) throws -> EmbeddedZoneStorage {
        var log = LogOptions(durability: .buffered)
        log.segmentSize = 4096
        return try EmbeddedZoneStorage(directory: path, options: EmbeddedZoneStorage.Options(log: log))
    }

    /// What a pull after `token` answers: the position it starts at, or the error's code.
    func pullStart(_ token: ChangeToken, _ storage: EmbeddedZoneStorage) async throws -> Result<UInt64, ServerError> {
        let zone = try #require(try await storage.zone("z"))
        do {
            return .success(try await PullStart.position(after: token.description, zone: zone, storage: storage))
        } catch {
            return .failure(error)
        }
    }

    func token(_ storage: EmbeddedZoneStorage, at position: UInt64) async throws -> ChangeToken {
        let zone = try #require(try await storage.zone("z"))
        return try await PullStart.token(zone, at: position, storage: storage)
    }

    @Test("a server restored from a backup that grew to hold, before a device's token, the same transaction after another history answers 410 zoneRewound; the version 3 check of that one transaction alone missed it")
    func restoredServerSameLastTransaction() async throws {
        let dir = TemporaryDirectory()
        var storage = try storage(dir.sub("data"))
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        try await storage.close()
        try FileManager.default.copyItem(atPath: dir.sub("data"), toPath: dir.sub("backup"))

        // Before the loss: c1 at position 0, then a1 at 1; the device holds a token at 2.
        storage = try self.storage(dir.sub("data"))
        let a1 = try pushed(transaction(a, 1...1, title: "a1"))
        _ = try await storage.append(zone: "z", replica: c, transactions: [try pushed(transaction(c, 1...1, title: "c1"))])
        _ = try await storage.append(zone: "z", replica: a, transactions: [a1])
        let seen = try await token(storage, at: 2)
        #expect(seen.fingerprintsHistory && seen.fingerprint != 0)
        #expect(try await pullStart(seen, storage) == .success(2))
        try await storage.close()

        // Restored from the backup; another device pushes b1, then a's device pushes a1 again.
        try FileManager.default.removeItem(atPath: dir.sub("data"))
        try FileManager.default.copyItem(atPath: dir.sub("backup"), toPath: dir.sub("data"))
        storage = try self.storage(dir.sub("data"))
        _ = try await storage.append(zone: "z", replica: b, transactions: [try pushed(transaction(b, 1...1, title: "b1"))])
        _ = try await storage.append(zone: "z", replica: a, transactions: [a1])
        #expect(try await storage.endPosition(zone: "z") == 2)

        // The transaction before position 2 is a1 in both histories.
        var legacy = seen
        legacy.fingerprintsHistory = false
        legacy.fingerprint = try #require(try await storage.lastTransactionFingerprint(zone: "z", at: 2))
        #expect(try await pullStart(legacy, storage) == .success(2), "a version 3 token checks only the transaction before it")
        // The history before it is not the one the device saw.
        guard case .failure(let error) = try await pullStart(seen, storage) else {
            Issue.record("a token of history the server lost was served")
            return
        }
        #expect(error.code == .zoneRewound)
        try await storage.close()
    }

    @Test("the fingerprints of a zone's positions are the same after a restart and after a compaction retired the history before them; a token of the retired part is 410 tokenExpired, not zoneRewound")
    func stableAcrossRestartAndCompaction() async throws {
        let dir = TemporaryDirectory()
        var storage = try storage(dir.sub("data"))
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        for sequence in 1...60 as ClosedRange<UInt64> {
            let replica = sequence % 2 == 0 ? a : b
            let record = transaction(replica, (sequence + 1) / 2...(sequence + 1) / 2, title: "\(UUID()) \(UUID()) \(UUID())")
            _ = try await storage.append(zone: "z", replica: replica, transactions: [try pushed(record)])
        }
        var before: [UInt64: UInt64] = [:]
        for position in 0...60 as ClosedRange<UInt64> { before[position] = try await storage.fingerprint(zone: "z", at: position) }
        #expect(before[0] == .some(nil))
        #expect(Set(before.values.compactMap { $0 }).count == 60, "every position after a transaction has its own fingerprint")
        let old = try await token(storage, at: 5)
        let recent = try await token(storage, at: 55)

        try await storage.close()
        storage = try self.storage(dir.sub("data"))
        for position in 1...60 as ClosedRange<UInt64> {
            #expect(try await storage.fingerprint(zone: "z", at: position) == before[position], "position \(position) after a restart")
        }

        let snapshot = try await storage.compact(zone: "z", retaining: 10)
        let start = try await storage.startPosition(zone: "z")
        #expect(snapshot.position == 50 && start > 5)
        for position in start...60 {
            #expect(try await storage.fingerprint(zone: "z", at: position) == before[position], "position \(position) after compaction")
        }
        #expect(try await storage.fingerprint(zone: "z", at: start - 1) == nil)
        #expect(try await pullStart(recent, storage) == .success(55))
        guard case .failure(let error) = try await pullStart(old, storage) else {
            Issue.record("a token of retired history was served")
            return
        }
        #expect(error.code == .tokenExpired)

        // Reopened after the compaction, the chain is rebuilt from the retired digests.
        try await storage.close()
        storage = try self.storage(dir.sub("data"))
        for position in start...60 {
            #expect(try await storage.fingerprint(zone: "z", at: position) == before[position], "position \(position) after compaction and a restart")
        }
        // And it grows on: the next push gets a new fingerprint, the same after a restart.
        _ = try await storage.append(zone: "z", replica: c, transactions: [try pushed(transaction(c, 1...1))])
        let next = try #require(try await storage.fingerprint(zone: "z", at: 61))
        try await storage.close()
        storage = try self.storage(dir.sub("data"))
        #expect(try await storage.fingerprint(zone: "z", at: 61) == next)
        try await storage.close()
    }
}
