import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// What the server no longer takes on a client's word: whose replica it pushes, whether a retried
/// (replica, sequence) is really the same transaction, what time it is, and whose zone a name means.
@Suite("Server trust: replicas, forks, clocks and zone owners")
struct TrustTests {
    let replica = ReplicaID.random()

    // MARK: Storage

    @Test("a replica belongs to the user who first pushed it: another user's push of it is refused and changes nothing")
    func replicaOwnership() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        let zone = ZoneID(owner: "alice", name: "notes")
        _ = try await storage.createZone(zone, access: .shared, grants: ["bob": .readWrite])
        _ = try await storage.append(zone: zone, user: "alice", replica: replica, transactions: [pushed(transaction(replica, 1...2))])
        // Bob pushes alice's replica, ahead of her sequences: refused.
        let spoofed = try pushed(transaction(replica, 3...9))
        do {
            _ = try await storage.append(zone: zone, user: "bob", replica: replica, transactions: [spoofed])
            Issue.record("another user's replica was accepted")
        } catch {
            #expect(error.code == .replicaNotYours)
        }
        #expect(try await storage.endPosition(zone: zone) == 1)
        #expect(try await storage.acknowledged(zone: zone, replica: replica) == 2)
        // Alice's own next commits are still taken.
        let next = try await storage.append(zone: zone, user: "alice", replica: replica, transactions: [pushed(transaction(replica, 3...3))])
        #expect(next.appended == 1 && next.acknowledged == 3)
        // Bob's own replica is his.
        let bobs = ReplicaID.random()
        _ = try await storage.append(zone: zone, user: "bob", replica: bobs, transactions: [pushed(transaction(bobs, 1...1))])
        #expect(try await storage.replicas(zone: zone).map { "\($0.user ?? "-"):\($0.acknowledged)" }.sorted() == ["alice:3", "bob:1"])
        try await storage.close()

        // Owners survive a restart.
        let reopened = try EmbeddedZoneStorage(directory: dir.path)
        await #expect(throws: ZoneStorageError.self) {
            try await reopened.append(zone: zone, user: "bob", replica: replica, transactions: [pushed(transaction(replica, 4...4))])
        }
        #expect(Set(try await reopened.replicas(zone: zone).compactMap(\.user)) == ["alice", "bob"])
        try await reopened.close()
    }

    @Test("a retried sequence with other bytes is a fork: refused with the first differing sequence, nothing appended, also after a restart")
    func forkDetection() async throws {
        let dir = TemporaryDirectory()
        var storage = try EmbeddedZoneStorage(directory: dir.path)
        let zone = ZoneID(owner: "alice", name: "notes")
        _ = try await storage.createZone(zone, access: .private, grants: [:])
        let original = [transaction(replica, 1...2), transaction(replica, 3...3)]
        _ = try await storage.append(zone: zone, replica: replica, transactions: try original.map(pushed))
        // A copy of the store made after sequence 2 wrote its own sequence 3 and 4.
        let copy = [original[0], transaction(replica, 3...4, title: "copy")]
        for attempt in 0..<2 {
            do {
                _ = try await storage.append(zone: zone, replica: replica, transactions: try copy.map(pushed))
                Issue.record("a forked transaction was acknowledged (attempt \(attempt))")
            } catch let error as ZoneStorageError {
                #expect(error.code == .replicaForked)
                #expect(error.sequence == 3)
            }
            #expect(try await storage.endPosition(zone: zone) == 2)
            // Other boundaries over held sequences are a fork too.
            do {
                _ = try await storage.append(zone: zone, replica: replica, transactions: [try pushed(transaction(replica, 1...1))])
                Issue.record("a transaction with other boundaries was acknowledged")
            } catch let error as ZoneStorageError {
                #expect(error.code == .replicaForked && error.sequence == 1)
            }
            // The same bytes are a retry.
            #expect(try await storage.append(zone: zone, replica: replica, transactions: try original.map(pushed)).appended == 0)
            try await storage.close()
            if attempt == 0 { storage = try EmbeddedZoneStorage(directory: dir.path) }
        }
    }

    @Test("zones of different owners may share a name; a format 1 catalog is read and its zones keep working")
    func namespacesAndMigration() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        let alices = try await storage.createZone(ZoneID(owner: "alice", name: "notes"), access: .private, grants: [:])
        let bobs = try await storage.createZone(ZoneID(owner: "bob", name: "notes"), access: .private, grants: [:])
        #expect(alices.epoch != bobs.epoch)
        _ = try await storage.append(zone: alices.id, replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        #expect(try await storage.endPosition(zone: bobs.id) == 0)
        try await storage.close()

        // A data directory written before zones had owners in their identity: format 1.
        let catalog = dir.sub("zones.json")
        var text = try String(contentsOfFile: catalog, encoding: .utf8)
        #expect(text.contains("\"formatVersion\" : 2"))
        text = text.replacingOccurrences(of: "\"formatVersion\" : 2", with: "\"formatVersion\" : 1")
        try text.write(toFile: catalog, atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: dir.sub("zones/notes-\(hex(alices.epoch))/replicas.json"))
        let reopened = try EmbeddedZoneStorage(directory: dir.path)
        #expect(try await reopened.zones().map(\.id) == [alices.id, bobs.id])
        // History from before owners were recorded: the replica is claimed by its next pusher,
        // and its held transaction is still checked by digest.
        #expect(try await reopened.replicas(zone: alices.id).map(\.user) == [nil])
        #expect(try await reopened.append(zone: alices.id, replica: replica, transactions: [pushed(transaction(replica, 2...2))]).appended == 1)
        #expect(try await reopened.replicas(zone: alices.id).map(\.user) == ["alice"])
        try await reopened.close()
    }

    private func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    // MARK: HTTP

    @Test("over HTTP: another user's replica is 403 replicaNotYours, a fork 409 replicaForked with the sequence, and the zone is unchanged")
    func httpRefusals() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("notes", #"{"access": "shared", "grants": {"bob": "readWrite"}}"#)
            let first = transaction(replica, 1...2)
            #expect(try await client.push("notes", [first]).status == .ok)
            let before = try await client.endToken("notes")

            let spoofed = try await client.push("alice/notes", [transaction(replica, 3...5)], as: Token.bob)
            #expect(spoofed.status == .forbidden)
            #expect(try errorBody(spoofed).code == "replicaNotYours")

            let forked = try await client.push("notes", [transaction(replica, 1...2, title: "other")])
            #expect(forked.status == .conflict)
            let body = try errorBody(forked)
            #expect(body.code == "replicaForked")
            #expect(body.json["sequence"] as? Int == 1)
            #expect(try await client.endToken("notes") == before)

            // Who pushed what: to the owner every replica, to a grantee only their own.
            let replicas = try await client.execute(uri: "/v1/zones/notes/replicas", method: .get, headers: auth(Token.alice))
            #expect(replicas.status == .ok)
            let list = try JSONDecoder().decode(ReplicaList.self, from: replicas.body.data)
            #expect(list.replicas == [ReplicaInfo(replica: replica, user: "alice", acknowledged: 2)])
            let bobs = try await client.execute(uri: "/v1/zones/notes/replicas?owner=alice", method: .get, headers: auth(Token.bob))
            #expect(bobs.status == .ok)
            #expect(try JSONDecoder().decode(ReplicaList.self, from: bobs.body.data).replicas.isEmpty)
            #expect(try await client.execute(uri: "/v1/zones/notes/replicas?owner=alice", method: .get, headers: auth(Token.carol)).status == .notFound)
        }
    }

    @Test("over HTTP: an event stamped beyond the allowed clock offset is 422 clockSkew with the server's time, and changes nothing")
    func clockSkew() async throws {
        let serverTime: UInt64 = 1_800_000_000_000
        let server = try TestServer(clock: ServerClock(wallMilliseconds: { serverTime }))
        try await server.test { client in
            try await client.createZone("notes")
            func stamped(_ milliseconds: UInt64, _ sequence: UInt64) -> TransactionRecord {
                TransactionRecord(replica: replica, events: [Event(id: EventID(replica: replica, sequence: sequence),
                                                                   hlc: HLC(milliseconds: milliseconds, counter: 0),
                                                                   change: .insert(entity: "Note", object: ObjectID(), fields: [:]))])
            }
            let before = try await client.endToken("notes")
            for future: UInt64 in [serverTime + 600_001, (1 << 48) - 1] {
                let refused = try await client.push("notes", [stamped(future, 1)])
                #expect(refused.status == .unprocessableContent)
                let body = try errorBody(refused)
                #expect(body.code == "clockSkew")
                #expect(body.json["serverTime"] as? Int == Int(serverTime))
                #expect(body.json["maxOffset"] as? Int == 600_000)
                #expect(try await client.endToken("notes") == before)
            }
            // Within the offset: accepted.
            #expect(try await client.push("notes", [stamped(serverTime + 600_000, 1)]).status == .ok)
        }
    }
}
