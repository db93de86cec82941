import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing
import StrataProtocol
import StrataCore

/// Requests that race with a DELETE of the same zone get the answers the protocol documents
/// (Tools/openapi/openapi.yaml), found by its schemathesis run: a `PUT` never answers `404`.
@Suite("zone requests racing a delete")
struct ZoneRaceTests {
    /// Where a concurrent `DELETE` lands in a `PUT`.
    enum Interleaving: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// After the PUT looked the zone up, before it updates it.
        case beforeUpdate
        /// After the PUT updated the zone, before it describes it in the answer.
        case afterUpdate
        /// After the PUT created the zone, before it describes it in the answer.
        case afterCreate

        var testDescription: String { rawValue }
    }

    /// The real storage, with one interleaving forced: the zone is deleted once, as by a
    /// concurrent `DELETE`, at the given point of a `PUT`.
    final class RacingDeleteStorage: ZoneStorage {
        let base: EmbeddedZoneStorage
        let interleaving: Interleaving
        let deletions = Mutex(0)

        init(base: EmbeddedZoneStorage, interleaving: Interleaving) {
            self.base = base
            self.interleaving = interleaving
        }

        private func deleteOnce(_ id: ZoneID, at point: Interleaving) async throws(ZoneStorageError) {
            guard point == interleaving, deletions.withLock({ count in defer { count += 1 }; return count == 0 }) else { return }
            try await base.deleteZone(id)
        }

        func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo {
            try await base.setMinSchemaVersion(id, version)
        }
        func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            try await deleteOnce(id, at: .beforeUpdate)
            let updated = try await base.updateZone(id, access: access, grants: grants)
            try await deleteOnce(id, at: .afterUpdate)
            return updated
        }

        func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            let created = try await base.createZone(id, access: access, grants: grants)
            try await deleteOnce(id, at: .afterCreate)
            return created
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
        func mergeState(zone: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
            try await base.mergeState(zone: zone, user: user, replica: replica, claim: claim, state: state, basis: basis)
        }
        func snapshotPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64? { try await base.snapshotPosition(zone: zone) }
        func fingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
            try await base.fingerprint(zone: zone, at: position)
        }
        func acknowledged(zone: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
            try await base.acknowledged(zone: zone, replica: replica)
        }
        func compact(zone: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
            try await base.compact(zone: zone, retaining: retaining)
        }
        func lastTransactionFingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
            try await base.lastTransactionFingerprint(zone: zone, at: position)
        }
        func close() async throws(ZoneStorageError) { try await base.close() }
    }

    @Test("a PUT racing a DELETE of its zone creates the zone anew: 201 with the asked settings, never 404",
          arguments: Interleaving.allCases)
    func putRacingDelete(_ interleaving: Interleaving) async throws {
        let directory = TemporaryDirectory("\(#function)-\(interleaving)")
        let base = try EmbeddedZoneStorage(directory: directory.sub("data"))
        // The zone exists before the PUT, except when the PUT is to create it.
        let before = interleaving == .afterCreate ? nil : try await base.createZone("notes", access: .private, grants: [:])
        let storage = RacingDeleteStorage(base: base, interleaving: interleaving)
        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
        do {
            let epoch = try await app.buildApplication().test(.router) { client in
                let response = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice),
                                                        body: ByteBuffer(string: #"{"access": "public"}"#))
                #expect(response.status == .created, "\(String(buffer: response.body))")
                let zone = try JSONDecoder().decode(ZoneDescription.self, from: response.body.data)
                #expect(zone.access == .public)
                return zone.epoch
            }
            #expect(storage.deletions.withLock { $0 } >= 1, "the delete was interleaved")
            let after = try #require(try await base.zone("notes"), "the zone exists after the PUT")
            #expect(after.access == .public)
            #expect(after.epoch == epoch, "the answer describes the zone that exists")
            if let before { #expect(after.epoch != before.epoch, "a zone created anew has a new epoch") }
            try await base.close()
        } catch {
            try? await base.close()
            throw error
        }
    }
}
