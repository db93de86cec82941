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

@Suite("Robustness")
struct RobustnessTests {
    @Test("damaged push bodies are answered with a client error, never a server failure")
    func damagedPushes() async throws {
        let server = try TestServer()
        let replica = ReplicaID.random()
        try await server.test { client in
            try await client.createZone("notes")
            var generator = SeededGenerator(seed: 0x5EED)
            let valid = TransactionFrames.encode([transaction(replica, 1...3).encoded(), transaction(replica, 4...4).encoded()])
            var statuses: [Int: Int] = [:]
            for round in 0..<300 {
                var body = valid
                switch round % 3 {
                case 0:  // flip a few bytes
                    for _ in 0...Int.random(in: 0...3, using: &generator) {
                        body[Int.random(in: 0..<body.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                    }
                case 1:  // cut short
                    body = Array(body.prefix(Int.random(in: 0..<body.count, using: &generator)))
                default:  // noise
                    body = (0..<Int.random(in: 1...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                }
                let response = try await client.execute(uri: "/v1/zones/notes/push", method: .post, headers: auth(Token.alice),
                                                        body: ByteBuffer(bytes: body))
                statuses[Int(response.status.code), default: 0] += 1
                // 409: a flipped bit in a held transaction is a fork; 422: in a timestamp, a clock
                // too far ahead. Every answer is a client error or a success, never a failure.
                #expect([200, 400, 409, 422].contains(response.status.code), "round \(round): \(response.status) \(String(buffer: response.body))")
            }
            #expect(statuses[400, default: 0] > 0)
            // The server still works.
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice)).status == .ok)
        }
    }

    @Test("a token older than the history a storage holds is answered 410 tokenExpired")
    func tokenExpired() async throws {
        let directory = TemporaryDirectory()
        let storage = RetiringStorage(base: try EmbeddedZoneStorage(directory: directory.path), retiredBefore: 2)
        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let app = StrataServerApp(storage: storage, users: users)
        let replica = ReplicaID.random()
        try await app.buildApplication().test(.router) { client in
            let zone = try await client.createZone("notes")
            #expect(try await client.push("notes", (1...3).map { transaction(replica, UInt64($0)...UInt64($0)) }).status == .ok)
            let old = ChangeToken(epoch: zone.epoch, position: 1)
            let expired = try await client.pull("notes", query: "after=\(old)")
            #expect(expired.status == .gone)
            #expect(try errorBody(expired).code == "tokenExpired")
            // From the beginning means from what the storage still holds.
            let fromStart = try await client.pull("notes")
            #expect(try pulledTransactions(fromStart).count == 1)
        }
        try await storage.close()
    }
}

/// A storage that pretends the first positions of every zone were retired (as after a snapshot),
/// and announces the changes `others` yields as another process's, forwarding everything else:
/// the endpoints depend on the protocol only.
struct RetiringStorage: ZoneStorage {
    let base: EmbeddedZoneStorage
    let retiredBefore: UInt64
    var others: AsyncStream<ZoneID>?

    func changesByOthers() -> AsyncStream<ZoneID> { others ?? base.changesByOthers() }
    func acknowledged(zone: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
        try await base.acknowledged(zone: zone, replica: replica)
    }
    func compact(zone: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
        try await base.compact(zone: zone, retaining: retaining)
    }

    func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await base.createZone(id, access: access, grants: grants)
    }
    func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? { try await base.zone(id) }
    func zones() async throws(ZoneStorageError) -> [ZoneInfo] { try await base.zones() }
    func snapshot(zone: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? { try await base.snapshot(zone: zone) }
    func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo {
        try await base.setMinSchemaVersion(id, version)
    }
    func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await base.updateZone(id, access: access, grants: grants)
    }
    func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) { try await base.deleteZone(id) }
    func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
        try await base.append(zone: zone, user: user, replica: replica, transactions: transactions)
    }
    func read(zone: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        guard position >= retiredBefore else { throw ZoneStorageError(.positionRetired, "position \(position) was retired", zone: zone.description) }
        return try await base.read(zone: zone, epoch: epoch, after: position, limit: limit)
    }
    func endPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 { try await base.endPosition(zone: zone) }
    func startPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        max(retiredBefore, try await base.startPosition(zone: zone))
    }
    func replicas(zone: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] { try await base.replicas(zone: zone) }
    func mergeState(zone: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        try await base.mergeState(zone: zone, user: user, replica: replica, claim: claim, state: state, basis: basis)
    }
    func snapshotPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64? { try await base.snapshotPosition(zone: zone) }
    func fingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        try await base.fingerprint(zone: zone, at: position)
    }
    func lastTransactionFingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        try await base.lastTransactionFingerprint(zone: zone, at: position)
    }
    func close() async throws(ZoneStorageError) { try await base.close() }
}
