import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
@testable import StrataSync
import StrataTestSupport
import Testing

/// A zone deleted and created again by its owner is a new zone: devices of its previous life used
/// to get `zoneReset`, start over and upload everything they held into it — a new reader then saw
/// the deleted contents. Now they go on only into a life that continues theirs (the owner's
/// device asked for it with `recreateZone()`); of a new zone, they get `zoneDeleted`. Through a
/// real server, both backends.
@Suite("A new zone is new")
struct NewZoneLifeTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
    }

    func titles(_ store: Store) -> Set<String> { Set(store.fetch("Note").compactMap { $0["title"].stringValue }) }

    @Test("the owner deletes a zone and creates it anew with a new reader: the grantee's and the owner's other old devices stop with zoneDeleted and push nothing; the reader never sees the deleted notes",
          arguments: ServerBackend.allCases)
    func newLifeIsNotReseeded(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let admin = patient(url, "alice-secret")
            let phone = try await open(dir.sub("phone"))
            let phoneEngine = try SyncEngine(store: phone, server: url, zone: "board", credentials: "alice-secret")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "deleted secret"]) }
            try await phoneEngine.sync()
            try await admin.setAccess("board", #"{"access": "shared", "grants": {"bob": "readWrite"}}"#)
            let bob = try await open(dir.sub("bob"))
            let bobEngine = try SyncEngine(store: bob, server: url, zone: "board", owner: "alice", credentials: "bob-secret")
            try await bobEngine.sync()
            #expect(titles(bob) == ["deleted secret"])

            // Alice deletes the zone and creates a new one under the name, shared with bob and a new reader.
            try await admin.deleteZone("board")
            try await admin.setAccess("board", #"{"access": "shared", "grants": {"bob": "readWrite", "carol": "read"}}"#)
            #expect(try await admin.describe(ZoneReference("board")).continues == [])

            // Bob's old device, with an edit made meanwhile, and alice's phone stop: the zone they knew is gone.
            try await bob.transaction { tx in _ = try tx.insert("Note", ["title": "bob offline"]) }
            await #expect { try await bobEngine.sync() } throws: { error in
                (error as? SyncError)?.code == .zoneDeleted && ((error as? SyncError)?.message.contains("created again as a new zone") ?? false)
            }
            await #expect { try await phoneEngine.sync() } throws: { ($0 as? SyncError)?.code == .zoneDeleted }

            // Carol, the new reader, sees none of it.
            let carol = try await open(dir.sub("carol"))
            try await SyncEngine(store: carol, server: url, zone: "board", owner: "alice", credentials: "carol-secret").sync()
            #expect(titles(carol).isEmpty)
            let pulled = try await patient(url, "carol-secret").pull(zone: ZoneReference("board", owner: "alice"), after: nil, limit: 100, wait: nil)
            #expect(pulled.transactions.isEmpty)
            for store in [phone, bob, carol] { try await store.close() }
        }
    }

    @Test("recreateZone() continues the deleted life: the owner's other device and the grantee go on into it, also two recreations later")
    func recreationContinues() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let admin = patient(url, "alice-secret")
            let phone = try await open(dir.sub("phone"))
            let laptop = try await open(dir.sub("laptop"))
            let phoneEngine = try SyncEngine(store: phone, server: url, zone: "board", credentials: "alice-secret")
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "board", credentials: "alice-secret")
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "kept"]) }
            try await phoneEngine.sync()
            try await laptopEngine.sync()
            let first = try await admin.describe(ZoneReference("board")).epoch

            // Deleted and restored twice by the phone; the laptop sleeps through both.
            try await admin.deleteZone("board")
            try await phoneEngine.recreateZone()
            let second = try await admin.describe(ZoneReference("board"))
            #expect(second.continues == [first])
            try await admin.deleteZone("board")
            try await phoneEngine.recreateZone()
            let third = try await admin.describe(ZoneReference("board"))
            #expect(third.continues == [second.epoch, first])

            try await laptop.transaction { tx in _ = try tx.insert("Note", ["title": "laptop offline"]) }
            try await laptopEngine.sync()
            try await phoneEngine.sync()
            #expect(titles(phone) == ["kept", "laptop offline"])
            #expect(phone.digest() == laptop.digest())
            try await phone.close()
            try await laptop.close()
        }
    }
}
