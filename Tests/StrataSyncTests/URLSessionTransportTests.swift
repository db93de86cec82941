import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Strata
import StrataSync
import StrataSyncAsyncHTTPClient
import StrataTestSupport
import Synchronization
import Testing

@Suite("The protocol over URLSession, against a real server")
struct URLSessionTransportTests {
    @Test("a device syncing over URLSession and one over AsyncHTTPClient converge; the server's typed errors and a token refresh come through URLSession the same way")
    func convergesOverURLSession() async throws {
        let dir = TemporaryDirectory()
        let phone = try await Store.open(at: dir.sub("phone"), schema: deviceSchema)
        let laptop = try await Store.open(at: dir.sub("laptop"), schema: deviceSchema)
        try await phone.transaction { tx in _ = try tx.insert("Folder", ["name": "from the phone"]) }
        try await laptop.transaction { tx in _ = try tx.insert("Folder", ["name": "from the laptop"]) }
        let refreshed = Atomic<Int>(0)
        let tokens = TokenProvider { refresh in
            if refresh { refreshed.add(1, ordering: .relaxed) }
            return refresh ? "alice-secret" : "expired"
        }
        try await withServer(dir.sub("server")) { url, _ in
            let overURLSession = HTTPSyncTransport(server: url, tokens: tokens, session: URLSession(configuration: .ephemeral))
            let phoneSync = try SyncEngine(store: phone, transport: overURLSession, zone: "notes")
            let overNIO = HTTPSyncTransport(server: url, bearer: "alice-secret", client: HTTPSyncTransport.defaultClient)
            let laptopSync = try SyncEngine(store: laptop, transport: overNIO, zone: "notes")
            try await phoneSync.sync()
            try await laptopSync.sync()
            try await phoneSync.sync()
            #expect(phone.digest() == laptop.digest())
            #expect(Set(phone.fetch("Folder").compactMap { $0["name"].stringValue }) == ["from the phone", "from the laptop"])
            #expect(refreshed.load(ordering: .relaxed) == 1)

            // bob's zone does not exist: the server's JSON error, typed, through URLSession too.
            let stranger = try SyncEngine(store: phone, transport: overURLSession, zone: "missing", owner: "bob")
            await #expect { try await stranger.sync() } throws: { ($0 as? SyncError)?.code == .zoneNotFound }
        }
        // No server at all: a transport failure (retried by the engine), not a crash or a hang.
        let nowhere = HTTPSyncTransport(server: URL(string: "http://127.0.0.1:9")!, tokens: .fixed("x"), session: .shared)
        await #expect { _ = try await nowhere.replicas(zone: ZoneReference("notes")) } throws: { ($0 as? SyncError)?.code == .transport }
        try await phone.close()
        try await laptop.close()
    }
}
