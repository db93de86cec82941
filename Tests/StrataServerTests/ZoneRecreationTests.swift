import Foundation
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// A deleted zone's access rules are kept and come back when the zone is created again: part of
/// the storage contract, so it runs on every backend.
@Suite("Recreating a deleted zone keeps its access rules, on every storage backend")
struct ZoneRecreationTests {
    let board = ZoneID(owner: "alice", name: "board")

    @Test("a delete keeps the zone's access and grants as they are then (a revoked grant stays revoked), across a reopen; a create that names no rules gets them back, and any create forgets them", arguments: StorageBackend.allCases)
    func keptAndRestored(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        var storage = try await site.open()
        _ = try await storage.createZone(board, access: .shared, grants: ["bob": .readWrite, "carol": .read])
        // Carol's grant is revoked before the delete.
        _ = try await storage.updateZone(board, access: .shared, grants: ["bob": .readWrite])
        try await storage.deleteZone(board)
        #expect(try await storage.zone(board) == nil)
        #expect(try await storage.deletedZoneRules(board) == ZoneSettings(access: .shared, grants: ["bob": .readWrite]))
        try await storage.close()
        storage = try await site.open()
        #expect(try await storage.deletedZoneRules(board) == ZoneSettings(access: .shared, grants: ["bob": .readWrite]), "kept across a reopen")

        // Another owner's zone of the same name is another zone: nothing of Alice's applies.
        let bobs = try await storage.createZone(ZoneID(owner: "bob", name: "board"), settings: ZoneSettings(), maxZonesPerOwner: nil)
        #expect(bobs.access == .private && bobs.grants.isEmpty)

        let recreated = try await storage.createZone(board, settings: ZoneSettings(), maxZonesPerOwner: nil)
        #expect(recreated.access == .shared && recreated.grants == ["bob": .readWrite])
        #expect(recreated.canPush("bob") && !recreated.canRead("carol") && !recreated.canRead("mallory"))
        #expect(try await storage.zone(board)?.grants == ["bob": .readWrite])
        #expect(try await storage.deletedZoneRules(board) == nil, "a create forgets what was kept")

        // What a create names wins; the rest comes from what was kept.
        try await storage.deleteZone(board)
        let withoutGrants = try await storage.createZone(board, settings: ZoneSettings(grants: [:]), maxZonesPerOwner: nil)
        #expect(withoutGrants.access == .shared && withoutGrants.grants.isEmpty)
        _ = try await storage.updateZone(board, access: .public, grants: ["bob": .read])
        try await storage.deleteZone(board)
        let explicit = try await storage.createZone(board, access: .private, grants: [:])
        #expect(explicit.access == .private && explicit.grants.isEmpty)
        #expect(try await storage.deletedZoneRules(board) == nil, "a create naming its rules forgets what was kept too")

        // The defaults are kept too (with the life's epoch, for a recreation that continues it).
        try await storage.deleteZone(board)
        #expect(try await storage.deletedZoneRules(board) == ZoneSettings(access: .private, grants: [:]))
        let fresh = try await storage.createZone(board, settings: ZoneSettings(), maxZonesPerOwner: nil)
        #expect(fresh.access == .private && fresh.grants.isEmpty)
        try await storage.close()
    }

    @Test("a storage keeps the rules of the zones each owner deleted last, up to the limit, so that deleting zone after zone cannot grow it without bound; other owners' are untouched", arguments: [StorageBackend.embedded, .postgres])
    func keptRulesAreBounded(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let storage = try await site.open()
        let carols = ZoneID(owner: "carol", name: "kept")
        _ = try await storage.createZone(carols, access: .public, grants: [:])
        try await storage.deleteZone(carols)
        let limit = EmbeddedZoneStorage.keptDeletedZoneRulesPerOwner
        for index in 0..<(limit + 2) {
            let zone = ZoneID(owner: "alice", name: "z\(index)")
            _ = try await storage.createZone(zone, access: .shared, grants: ["bob": .read])
            try await storage.deleteZone(zone)
        }
        #expect(try await storage.deletedZoneRules(ZoneID(owner: "alice", name: "z0")) == nil)
        #expect(try await storage.deletedZoneRules(ZoneID(owner: "alice", name: "z1")) == nil)
        #expect(try await storage.deletedZoneRules(ZoneID(owner: "alice", name: "z2")) == ZoneSettings(access: .shared, grants: ["bob": .read]))
        #expect(try await storage.deletedZoneRules(ZoneID(owner: "alice", name: "z\(limit + 1)")) != nil)
        #expect(try await storage.deletedZoneRules(carols) == ZoneSettings(access: .public, grants: [:]))
        try await storage.close()
    }
}
