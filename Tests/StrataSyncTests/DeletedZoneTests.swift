import AsyncHTTPClient
import StrataSyncAsyncHTTPClient
import Foundation
import NIOHTTP1
import Strata
@testable import StrataSync
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("A deleted zone, end to end")
struct DeletedZoneTests {
    @Test("a zone its owner deleted stays deleted (zoneDeleted, nothing recreated) until a device asks, which recreates it with what it holds; the other devices then converge with it")
    func deletedZoneStaysDeleted() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let phone = try await Store.open(at: dir.sub("phone"), schema: deviceSchema)
            let laptop = try await Store.open(at: dir.sub("laptop"), schema: deviceSchema)
            let phoneEngine = try SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret")
            let laptopEngine = try SyncEngine(store: laptop, server: url, zone: "notes", credentials: "alice-secret")
            try await phone.transaction { tx in _ = try tx.insert("Folder", ["name": "phone"]) }
            try await phoneEngine.sync()
            try await laptop.transaction { tx in _ = try tx.insert("Folder", ["name": "laptop"]) }
            try await laptopEngine.sync()
            try await phoneEngine.sync()

            let admin = HTTPSyncTransport(server: url, bearer: "alice-secret")
            _ = try await admin.send(HTTPExchangeRequest(method: "DELETE", url: admin.url(ZoneReference("notes"))))

            for engine in [phoneEngine, laptopEngine] {
                await #expect { try await engine.sync() } throws: { ($0 as? SyncError)?.code == .zoneDeleted }
            }
            // A new engine on the same store (an app restart) does not recreate it either.
            await #expect {
                try await SyncEngine(store: phone, server: url, zone: "notes", credentials: "alice-secret").sync()
            } throws: { ($0 as? SyncError)?.code == .zoneDeleted }
            await #expect { _ = try await admin.ensureZone(ZoneReference("notes"), create: false) } throws: { ($0 as? SyncError)?.code == .zoneNotFound }

            // The phone asks: the zone comes back with everything the phone holds.
            try await phone.transaction { tx in _ = try tx.insert("Folder", ["name": "after the deletion"]) }
            let recreated = try await phoneEngine.recreateZone()
            // Its own history goes back as its state (with the laptop's edits it holds).
            #expect(recreated.stateUploads == 1)
            try await laptopEngine.sync()
            try await phoneEngine.sync()
            #expect(Set(laptop.fetch("Folder").compactMap { $0["name"].stringValue }) == ["phone", "laptop", "after the deletion"])
            #expect(laptop.digest() == phone.digest())
            try await phone.close()
            try await laptop.close()
        }
    }
}
