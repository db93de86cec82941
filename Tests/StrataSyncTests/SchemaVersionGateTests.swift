import Foundation
import Strata
import StrataCore
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

@Suite("A zone's oldest supported schema version, through a real server")
struct SchemaVersionGateTests {
    static let v1 = Schema { Entity("Person", attributes: [Attribute("name", .string)]) }
    static let v2 = Schema(version: 2, migrations: [.renameAttribute("Person", "name", to: "fullName", in: 2)]) {
        Entity("Person", attributes: [Attribute("fullName", .string)])
    }

    @Test("The owner raises the zone's minimum to 2: a version-1 device is refused with schemaTooOld (after the access checks), keeps its edits, and pushes them once updated; the setting survives a restart", arguments: ServerBackend.allCases)
    func oldVersionRefusedUntilUpdated(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        let zone = ZoneReference("people")
        let old = try await Store.open(at: dir.sub("old"), schema: Self.v1)
        let new = try await Store.open(at: dir.sub("new"), schema: Self.v2)
        let first = try await old.transaction { tx in try tx.insert("Person", ["name": "Ada"]) }
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            _ = try await SyncEngine(store: old, server: url, zone: zone.name, credentials: "alice-secret").sync()
            _ = try await SyncEngine(store: new, server: url, zone: zone.name, credentials: "alice-secret").sync()
            #expect(new.object(first)?["fullName"] == "Ada")

            let owner = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let described = try await owner.updateZone(zone, settings: ZoneSettings(minSchemaVersion: 2))
            #expect(described.minSchemaVersion == 2)
            // A bad minimum is refused, and changes nothing.
            await #expect(throws: SyncError.self) { _ = try await owner.updateZone(zone, settings: ZoneSettings(minSchemaVersion: 0)) }

            let edit = try await old.transaction { tx in try tx.insert("Person", ["name": "Grace"]) }
            let refused = await #expect(throws: SyncError.self) {
                _ = try await SyncEngine(store: old, server: url, zone: zone.name, credentials: "alice-secret").sync()
            }
            #expect(refused?.code == .schemaTooOld, "\(String(describing: refused))")
            #expect(refused?.minSchemaVersion == 2)
            #expect(refused?.status == 426)
            #expect(old.object(edit)?["name"] == "Grace", "the refused device keeps its edit")
            _ = try await SyncEngine(store: new, server: url, zone: zone.name, credentials: "alice-secret").sync()
            #expect(new.object(edit) == nil, "nothing of the old device reached the zone")

            // A stranger on version 1 learns nothing of the zone: not found, as for any zone
            // they may not read.
            let stranger = try await Store.open(at: dir.sub("stranger"), schema: Self.v1)
            let strangers = await #expect(throws: SyncError.self) {
                _ = try await SyncEngine(store: stranger, server: url, zone: zone.name, owner: "alice", credentials: "bob-secret").sync()
            }
            #expect(strangers?.code == .zoneNotFound, "\(String(describing: strangers))")
            try await stranger.close()
        }
        // After a restart of the server on its data the minimum holds.
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            // (An empty PUT changes nothing and answers the zone's description.)
            let described = try await HTTPSyncTransport(server: url, bearer: "alice-secret").updateZone(zone, settings: ZoneSettings())
            #expect(described.minSchemaVersion == 2)
            let again = await #expect(throws: SyncError.self) {
                _ = try await SyncEngine(store: old, server: url, zone: zone.name, credentials: "alice-secret").sync()
            }
            #expect(again?.code == .schemaTooOld)
        }
        // The device updates to version 2: its pending edit is pushed, and read under the new name.
        let oldPath = dir.sub("old")
        try await old.close()
        let updated = try await Store.open(at: oldPath, schema: Self.v2)
        #expect(updated.schemaVersion == 2)
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            _ = try await SyncEngine(store: updated, server: url, zone: zone.name, credentials: "alice-secret").sync()
            _ = try await SyncEngine(store: new, server: url, zone: zone.name, credentials: "alice-secret").sync()
            #expect(new.fetch("Person").compactMap { $0["fullName"].stringValue }.sorted() == ["Ada", "Grace"])
            #expect(updated.digest() == new.digest())
        }
        try await updated.close()
        try await new.close()
    }

    @Test("A database whose zone needs a newer app: that zone fails with schemaTooOld, the status names the version, the other zones sync on")
    func databaseStatusNamesTheVersion() async throws {
        let dir = TemporaryDirectory()
        let gated = ZoneReference("people"), open = ZoneReference("drafts")
        let database = try await Database.open(at: dir.sub("phone"), schema: Self.v1)
        _ = try await database.addZone(gated)
        _ = try await database.addZone(open)
        try await withServer(dir.sub("server")) { url, _ in
            let sync = DatabaseSyncEngine(database: database, server: url, credentials: "alice-secret")
            try await database.transaction { tx in _ = try tx.insert("Person", ["name": "Ada"], in: gated) }
            try await sync.sync()
            #expect(await sync.currentStatus.requiredSchemaVersion == nil)
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").updateZone(gated, settings: ZoneSettings(minSchemaVersion: 2))
            try await database.transaction { tx in
                _ = try tx.insert("Person", ["name": "Grace"], in: gated)
                _ = try tx.insert("Person", ["name": "Draft"], in: open)
            }
            let report = try await sync.sync()
            #expect(report.failures[gated]?.code == .schemaTooOld, "\(report.failures)")
            #expect(report.failures[open] == nil, "the other zone syncs on")
            #expect(await sync.currentStatus.requiredSchemaVersion == 2)
            // The draft reached the server; Grace stays on the device until the app is updated.
            let other = try await Store.open(at: dir.sub("other"), schema: Self.v2)
            _ = try await SyncEngine(store: other, server: url, zone: open.name, credentials: "alice-secret").sync()
            #expect(other.fetch("Person").map { $0["fullName"].stringValue } == ["Draft"])
            try await other.close()
        }
    }
}
