import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing

/// Requests that race with a DELETE of the same zone get the answers the protocol documents
/// (Tools/openapi/openapi.yaml), found by its schemathesis run: a `PUT` never answers `404`.
@Suite("zone requests racing a delete")
struct ZoneRaceTests {
    /// The real storage, with one interleaving forced: the zone is deleted (as by a concurrent
    /// `DELETE`) right after `PUT` looked it up and before it updates it.
    final class DeletedBeforeUpdateStorage: ZoneStorage {
        let base: EmbeddedZoneStorage
        let deletions = Mutex(0)

        init(base: EmbeddedZoneStorage) { self.base = base }

        func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            if deletions.withLock({ count in defer { count += 1 }; return count == 0 }) {
                try await base.deleteZone(id)
            }
            return try await base.updateZone(id, access: access, grants: grants)
        }

        func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            try await base.createZone(id, access: access, grants: grants)
        }
        func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? { try await base.zone(id) }
        func zones() async throws(ZoneStorageError) -> [ZoneInfo] { try await base.zones() }
        func snapshot(zone: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? { try await base.snapshot(zone: zone) }
        func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) { try await base.deleteZone(id) }
        func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
            try await base.append(zone: zone, user: user, replica: replica, transactions: transactions)
        }
        func read(zone: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
            try await base.read(zone: zone, epoch: epoch, after: position, limit: limit)
        }
        func endPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 { try await base.endPosition(zone: zone) }
        func startPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 { try await base.startPosition(zone: zone) }
        func replicas(zone: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] { try await base.replicas(zone: zone) }
        func mergeState(zone: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state: sending ProjectionBuilder, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
            try await base.mergeState(zone: zone, user: user, replica: replica, claim: claim, state: state, basis: basis)
        }
        func snapshotPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64? { try await base.snapshotPosition(zone: zone) }
        func fingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
            try await base.fingerprint(zone: zone, at: position)
        }
        func close() async throws(ZoneStorageError) { try await base.close() }
    }

    @Test("a PUT whose zone is deleted before its update creates the zone anew: 201 with the asked settings, not 404")
    func putAfterConcurrentDelete() async throws {
        let directory = TemporaryDirectory(#function)
        let base = try EmbeddedZoneStorage(directory: directory.sub("data"))
        let before = try await base.createZone("notes", access: .private, grants: [:])
        let storage = DeletedBeforeUpdateStorage(base: base)
        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
        do {
            try await app.buildApplication().test(.router) { client in
                let response = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice),
                                                        body: ByteBuffer(string: #"{"access": "public"}"#))
                #expect(response.status == .created, "\(String(buffer: response.body))")
                let zone = try JSONDecoder().decode(ZoneDescription.self, from: response.body.data)
                #expect(zone.access == .public)
                #expect(zone.epoch != before.epoch, "a zone created anew has a new epoch")
            }
            #expect(storage.deletions.withLock { $0 } >= 1, "the delete was interleaved")
            let after = try #require(try await base.zone("notes"))
            #expect(after.access == .public)
            #expect(after.epoch != before.epoch)
            try await base.close()
        } catch {
            try? await base.close()
            throw error
        }
    }
}
