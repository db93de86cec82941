import Foundation
import Strata
import StrataPostgres
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// What every ``ZoneStorage`` must do, run unchanged on each backend: the embedded storage and
/// PostgreSQL (a real server: the tests' cluster). The HTTP endpoints, the compactor and the
/// sync engine rely on exactly this.
@Suite("Zone storage conformance, on every backend")
struct ZoneStorageConformanceTests {
    let replica = ReplicaID.random()

    @Test("pushed transactions are pulled back in order, a page at a time", arguments: StorageBackend.allCases)
    func pushAndPull(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        let zone = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let records = [transaction(replica, 1...2), transaction(replica, 3...3), transaction(replica, 4...6)]
        let outcome = try await storage.append(zone: "notes", replica: replica, transactions: records.map(pushed))
        #expect(outcome.epoch == zone.epoch && outcome.position == 3 && outcome.acknowledged == 6 && outcome.appended == 3)
        // The fingerprint an append reports (for the push's answer token) is the storage's own.
        let atThree = try await storage.fingerprint(zone: "notes", at: 3)
        #expect(outcome.fingerprint != nil && outcome.fingerprint == atThree)
        #expect(try await storage.endPosition(zone: "notes") == 3)

        let first = try await storage.read(zone: "notes", after: 0, limit: 2)
        #expect(first.transactions.map(\.position) == [0, 1])
        #expect(first.nextPosition == 2 && first.moreComing && first.epoch == zone.epoch)
        #expect(try first.transactions.map { try TransactionRecord(decoding: $0.bytes) } == Array(records[0...1]))
        let second = try await storage.read(zone: "notes", after: first.nextPosition, limit: 2)
        #expect(try second.transactions.map { try TransactionRecord(decoding: $0.bytes) } == [records[2]])
        #expect(second.nextPosition == 3 && !second.moreComing)
        let empty = try await storage.read(zone: "notes", after: 3, limit: 10)
        #expect(empty.transactions.isEmpty && empty.nextPosition == 3 && !empty.moreComing)
        #expect(try await storage.replicas(zone: "notes") == [ReplicaInfo(replica: replica, user: "alice", acknowledged: 6)])
        try await storage.close()
    }

    @Test("a retried push is acknowledged without being appended again; an overlapping one appends only what is new", arguments: StorageBackend.allCases)
    func exactlyOnce(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let batch = try [transaction(replica, 1...2), transaction(replica, 3...4)].map(pushed)
        let first = try await storage.append(zone: "notes", replica: replica, transactions: batch)
        let retry = try await storage.append(zone: "notes", replica: replica, transactions: batch)
        #expect(first.appended == 2 && retry.appended == 0)
        let atTwo = try await storage.fingerprint(zone: "notes", at: 2)
        #expect(retry.fingerprint != nil && retry.fingerprint == atTwo)
        #expect(retry.position == first.position && retry.acknowledged == 4)
        #expect(try await storage.endPosition(zone: "notes") == 2)
        let overlapping = try batch + [pushed(transaction(replica, 5...5))]
        let third = try await storage.append(zone: "notes", replica: replica, transactions: overlapping)
        #expect(third.appended == 1 && third.acknowledged == 5 && third.position == 3)
        try await storage.close()
    }

    @Test("concurrent copies of one push are appended once", arguments: StorageBackend.allCases)
    func concurrentRetries(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
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

    @Test("a push that skips sequences is refused with the expected one and changes nothing", arguments: StorageBackend.allCases)
    func sequenceGap(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...2))])
        for records in [[transaction(replica, 4...4)], [transaction(replica, 3...3), transaction(replica, 5...5)]] {
            let batch = try records.map(pushed)
            let error = await refusal { () async throws(ZoneStorageError) in _ = try await storage.append(zone: "notes", replica: replica, transactions: batch) }
            #expect(error?.code == .sequenceGap && error?.expected == (batch.count == 2 ? 4 : 3))
        }
        #expect(try await storage.endPosition(zone: "notes") == 1)
        let other = ReplicaID.random()
        let skipping = try [pushed(transaction(other, 2...2))]
        let error = await refusal { () async throws(ZoneStorageError) in _ = try await storage.append(zone: "notes", replica: other, transactions: skipping) }
        #expect(error?.code == .sequenceGap && error?.expected == 1)
        try await storage.close()
    }

    @Test("a replica belongs to its first pusher, and another transaction under held sequences is a fork; neither changes anything", arguments: StorageBackend.allCases)
    func ownershipAndForks(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...2))])
        let replica = replica
        let third = try pushed(transaction(replica, 3...3)), copy = try pushed(transaction(replica, 1...2, title: "other"))
        let stolen = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: "notes", user: "bob", replica: replica, transactions: [third])
        }
        #expect(stolen?.code == .replicaNotYours)
        let forked = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: "notes", replica: replica, transactions: [copy])
        }
        #expect(forked?.code == .replicaForked && forked?.sequence == 1)
        #expect(try await storage.endPosition(zone: "notes") == 1)
        #expect(try await storage.acknowledged(zone: "notes", replica: replica) == 2)
        try await storage.close()
    }

    @Test("a reopened storage has every zone, transaction and acknowledged sequence, and keeps the push rules", arguments: StorageBackend.allCases)
    func reopen(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        let notes = try await storage.createZone(name: "notes", owner: "alice", access: .shared, grants: ["bob": .read, "carol": .readWrite])
        let other = try await storage.createZone(name: "other.zone_1", owner: "bob", access: .public, grants: [:])
        let records = [transaction(replica, 1...1), transaction(replica, 2...5)]
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(records[0])])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(records[1])])
        try await storage.close()

        let reopened = try await site.open()
        #expect(try await reopened.zones() == [notes, other])
        #expect(try await reopened.endPosition(zone: "notes") == 2)
        #expect(try await reopened.acknowledged(zone: "notes", replica: replica) == 5)
        let read = try await reopened.read(zone: "notes", after: 0, limit: 10)
        #expect(try read.transactions.map { try TransactionRecord(decoding: $0.bytes) } == records)
        let retry = try await reopened.append(zone: "notes", replica: replica, transactions: records.map(pushed))
        #expect(retry.appended == 0 && retry.position == 2)
        let replica = replica
        let seventh = try pushed(transaction(replica, 7...7))
        let gap = await refusal { () async throws(ZoneStorageError) in
            _ = try await reopened.append(zone: "notes", replica: replica, transactions: [seventh])
        }
        #expect(gap?.code == .sequenceGap)
        let next = try await reopened.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 6...6))])
        #expect(next.appended == 1 && next.position == 3)
        try await reopened.close()
    }

    @Test("zones: updated, deleted and recreated with a new epoch and an empty log; the old epoch reads as a reset", arguments: StorageBackend.allCases)
    func zoneLifecycle(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let epochs = EpochSequence([11, 22])
        let storage = try await site.open(makeEpoch: { epochs.next() })
        let first = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let updated = try await storage.updateZone("notes", access: .shared, grants: ["bob": .read])
        #expect(updated.access == .shared && updated.grants == ["bob": .read] && updated.epoch == first.epoch)
        #expect(try await storage.zone("notes") == updated)
        // Same name, another owner: another zone.
        _ = try await storage.createZone(name: "notes", owner: "bob", access: .private, grants: [:])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        try await storage.deleteZone("notes")
        #expect(try await storage.zone("notes") == nil)
        #expect(try await storage.zone("bob/notes") != nil)
        let gone = await refusal { () async throws(ZoneStorageError) in _ = try await storage.endPosition(zone: "notes") }
        #expect(gone?.code == .zoneNotFound)
        let second = try await storage.createZone(name: "notes", owner: "alice", access: .public, grants: [:])
        #expect(first.epoch == 11 && second.epoch != first.epoch)
        #expect(try await storage.endPosition(zone: "notes") == 0)
        #expect(try await storage.replicas(zone: "notes").isEmpty)
        let reset = await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "notes", epoch: first.epoch, after: 0, limit: 10) }
        #expect(reset?.code == .zoneReset)
        // The replica is new to the recreated zone: its history starts again at 1.
        let again = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        #expect(again.appended == 1 && again.position == 1)
        try await storage.close()
    }

    @Test("bad arguments are refused with their codes", arguments: StorageBackend.allCases)
    func refusals(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        let replica = replica
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:]) }?.code == .zoneExists)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.createZone(name: "bad/name", owner: "bob", access: .private, grants: [:]) }?.code == .invalidArgument)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "notes", after: 1, limit: 10) }?.code == .positionBeyondEnd)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "notes", after: 0, limit: 0) }?.code == .invalidArgument)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "nope", after: 0, limit: 10) }?.code == .zoneNotFound)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.append(zone: "notes", replica: replica, transactions: []) }?.code == .invalidArgument)
        #expect(await refusal { () async throws(ZoneStorageError) in try await storage.deleteZone("nope") }?.code == .zoneNotFound)
        #expect(await refusal { () async throws(ZoneStorageError) in _ = try await storage.updateZone("nope", access: .public, grants: [:]) }?.code == .zoneNotFound)
        try await storage.close()
    }

    @Test("compaction snapshots the zone and retires older history; retries of retired transactions are still checked for forks, also after a reopen", arguments: StorageBackend.allCases)
    func compaction(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        var records: [TransactionRecord] = []
        for sequence in UInt64(1)...80 {
            let record = transaction(replica, sequence...sequence, title: String(repeating: "x", count: 200))
            _ = try await storage.append(zone: "z", replica: replica, transactions: [try pushed(record)])
            records.append(record)
        }
        let snapshot = try await storage.compact(zone: "z", retaining: 10)
        #expect(snapshot.position == 70)
        #expect(try ProjectionBuilder(snapshot: snapshot.payload).contiguousSequences()[replica] == 70)
        let start = try await storage.startPosition(zone: "z")
        #expect(start > 0 && start <= 70)
        let retired = await refusal { () async throws(ZoneStorageError) in _ = try await storage.read(zone: "z", after: 0, limit: 10) }
        #expect(retired?.code == .positionRetired)
        let tail = try await storage.read(zone: "z", after: 70, limit: 100)
        #expect(try tail.transactions.map { try TransactionRecord(decoding: $0.bytes) } == Array(records[70...]))
        try await storage.close()

        storage = try await site.open()
        #expect(try await storage.acknowledged(zone: "z", replica: replica) == 80)
        #expect(try await storage.snapshot(zone: "z")?.position == 70)
        #expect(try await storage.snapshotPosition(zone: "z") == 70)
        #expect(try await storage.append(zone: "z", replica: replica, transactions: [try pushed(records[2])]).appended == 0)
        let replica = replica
        let other = try pushed(transaction(replica, 3...3))
        let forked = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: "z", replica: replica, transactions: [other])
        }
        #expect(forked?.code == .replicaForked && forked?.sequence == 3)
        // Compacting again with nothing new keeps the snapshot where it is.
        #expect(try await storage.compact(zone: "z", retaining: 10).position == 70)
        #expect(try await storage.endPosition(zone: "z") == 80)
        try await storage.close()
    }

    @Test("a merged state joins the zone's state at its end, gets a new generation, and believes the uploader's claim for its own replica only", arguments: StorageBackend.allCases)
    func mergedState(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        // Bob may push (his refusal below is for the replica, not for the zone).
        _ = try await storage.createZone(name: "z", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        let other = ReplicaID.random()
        _ = try await storage.append(zone: "z", replica: other, transactions: [pushed(transaction(other, 1...3))])
        // The uploader's state: its own replica through 4 (acknowledged by a server that lost it).
        let upload = ProjectionBuilder()
        _ = try upload.apply(encoded: transaction(replica, 1...4, title: "lost").encoded())
        let outcome = try await storage.mergeState(zone: "z", user: "alice", replica: replica, claim: 4, state: StateUpload(payload: upload.snapshotPayload()), basis: nil)
        #expect(outcome.position == 1 && outcome.generation != 0 && outcome.acknowledged == 4 && !outcome.upToDate)
        let zone = try #require(try await storage.zone("z"))
        #expect(zone.generation == outcome.generation && zone.merges == [outcome.generation])
        let snapshot = try #require(try await storage.snapshot(zone: "z"))
        #expect(snapshot.position == 1)
        let merged = try ProjectionBuilder(snapshot: snapshot.payload)
        #expect(merged.contiguousSequences()[other] == 3)
        // The uploader pushes on from its claim; what it claimed is held (a different
        // transaction under those sequences is another copy's: a fork).
        #expect(try await storage.acknowledged(zone: "z", replica: replica) == 4)
        let next = try await storage.append(zone: "z", replica: replica, transactions: [pushed(transaction(replica, 5...5))])
        #expect(next.appended == 1 && next.position == 2)
        let replica = replica
        let fourth = try pushed(transaction(replica, 4...4))
        let fork = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: "z", replica: replica, transactions: [fourth])
        }
        #expect(fork?.code == .replicaForked)
        // Another user cannot claim the replica by uploading a state.
        let empty = try StateUpload(payload: ProjectionBuilder().snapshotPayload())
        let bobs = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.mergeState(zone: "z", user: "bob", replica: replica, claim: 1, state: empty, basis: nil)
        }
        #expect(bobs?.code == .replicaNotYours)
        try await storage.close()
    }

    @Test("the storage itself refuses a push or a state upload by a user who may not push, as the zone is at that moment (a grant revoked after a lookup holds), and changes nothing; the grant given back, pushes go on", arguments: StorageBackend.allCases)
    func pushAccessAtAppend(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        let zone = ZoneID(owner: "alice", name: "board")
        _ = try await storage.createZone(zone, access: .shared, grants: ["bob": .readWrite, "carol": .read])
        let bobs = ReplicaID.random(), carols = ReplicaID.random()
        // Twice, so that PostgreSQL's second push starts from the basis the first left.
        _ = try await storage.append(zone: zone, user: "bob", replica: bobs, transactions: [pushed(transaction(bobs, 1...1))])
        _ = try await storage.append(zone: zone, user: "bob", replica: bobs, transactions: [pushed(transaction(bobs, 2...2))])
        // A reader, a stranger: refused by the storage, whatever the server checked before.
        for (user, replica) in [("carol", carols), ("mallory", ReplicaID.random())] {
            let batch = try pushed(transaction(replica, 1...1))
            let refused = await refusal { () async throws(ZoneStorageError) in
                _ = try await storage.append(zone: zone, user: user, replica: replica, transactions: [batch])
            }
            #expect(refused?.code == .forbidden, "\(user): \(String(describing: refused))")
        }
        // Bob's grant revoked between his pushes.
        _ = try await storage.updateZone(zone, access: .shared, grants: ["bob": .read])
        let third = try pushed(transaction(bobs, 3...3))
        let revoked = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: zone, user: "bob", replica: bobs, transactions: [third])
        }
        #expect(revoked?.code == .forbidden)
        let upload = ProjectionBuilder()
        _ = try upload.apply(encoded: transaction(bobs, 1...3, title: "state").encoded())
        let uploaded = try StateUpload(payload: upload.snapshotPayload())
        do {
            _ = try await storage.mergeState(zone: zone, user: "bob", replica: bobs, claim: 2, state: uploaded, basis: nil)
            Issue.record("a state upload by a reader was merged")
        } catch {
            #expect(error.code == .forbidden, "\(error)")
        }
        #expect(try await storage.endPosition(zone: zone) == 2)
        #expect(try await storage.acknowledged(zone: zone, replica: bobs) == 2)
        #expect(try await storage.snapshot(zone: zone) == nil)
        // The owner is never refused; the grant given back, Bob's push lands after his others.
        _ = try await storage.updateZone(zone, access: .private, grants: [:])
        let owners = ReplicaID.random()
        _ = try await storage.append(zone: zone, user: "alice", replica: owners, transactions: [pushed(transaction(owners, 1...1))])
        _ = try await storage.updateZone(zone, access: .shared, grants: ["bob": .readWrite])
        let resumed = try await storage.append(zone: zone, user: "bob", replica: bobs, transactions: [third])
        #expect(resumed.appended == 1 && resumed.position == 4 && resumed.acknowledged == 3)
        try await storage.close()
    }

    @Test("tokens' fingerprints: the history chain and the last transaction's digest at every position, the same on every backend, across a reopen and a compaction", arguments: StorageBackend.allCases)
    func fingerprints(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(name: "z", owner: "alice", access: .private, grants: [:])
        var digests: [TransactionDigest] = []
        let fixed = ReplicaID(rawValue: 0xF00D)
        for sequence in UInt64(1)...30 {
            let transaction = try pushed(transaction(fixed, sequence...sequence, title: "t\(sequence)"))
            _ = try await storage.append(zone: "z", replica: fixed, transactions: [transaction])
            digests.append(transaction.digest)
        }
        var chain: [UInt64] = [0]
        for digest in digests { chain.append(HistoryChain.link(chain[chain.count - 1], digest)) }
        #expect(try await storage.fingerprint(zone: "z", at: 0) == nil)
        for position in UInt64(1)...30 {
            #expect(try await storage.fingerprint(zone: "z", at: position) == chain[Int(position)], "position \(position)")
            #expect(try await storage.lastTransactionFingerprint(zone: "z", at: position) == digests[Int(position) - 1].high)
        }
        #expect(try await storage.fingerprint(zone: "z", at: 31) == nil)
        try await storage.close()
        storage = try await site.open()
        _ = try await storage.compact(zone: "z", retaining: 5)
        let start = try await storage.startPosition(zone: "z")
        for position in max(start, 1)...30 {
            #expect(try await storage.fingerprint(zone: "z", at: position) == chain[Int(position)], "position \(position) after compaction")
        }
        try await storage.close()
    }

    @Test("quotas hold under concurrency: of 8 creates at once under a zones quota of 3, exactly 3 succeed; a push past the stored-bytes quota is refused whole; a delete gives the bytes back", arguments: StorageBackend.allCases)
    func quotas(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        let created = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    do {
                        _ = try await storage.createZone(ZoneID(owner: "alice", name: "z\(index)"), access: .private, grants: [:], maxZonesPerOwner: 3)
                        return true
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(created == 3)
        #expect(try await storage.zones().count == 3)
        let zone = try #require(try await storage.zones().first).id
        let used = try await storage.storedBytes(owner: "alice")
        let record = try pushed(transaction(replica, 1...1, title: String(repeating: "y", count: 1_000)))
        let replica = replica
        let refused = await refusal { () async throws(ZoneStorageError) in
            _ = try await storage.append(zone: zone, user: "alice", replica: replica, transactions: [record], storedBytesLimit: used + 100)
        }
        #expect(refused?.code == .quotaExceeded)
        #expect(try await storage.endPosition(zone: zone) == 0)
        #expect(try await storage.storedBytes(owner: "alice") == used)
        _ = try await storage.append(zone: zone, user: "alice", replica: replica, transactions: [record], storedBytesLimit: used + 1_000_000)
        let after = try await storage.storedBytes(owner: "alice")
        #expect(after > used)
        try await storage.deleteZone(zone)
        #expect(try await storage.storedBytes(owner: "alice") < after)
        try await storage.close()
    }
}

/// The error `body` threw, or `nil` when it succeeded.
func refusal(_ body: () async throws(ZoneStorageError) -> Void) async -> ZoneStorageError? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}
