import Foundation
import Hummingbird
import NIOCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Strata
import StrataProtocol
import StrataSync
import StrataSyncAsyncHTTPClient
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

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
            let overURLSession = HTTPSyncTransport(server: url, tokens: tokens, configuration: .ephemeral)
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
        let nowhere = HTTPSyncTransport(server: URL(string: "http://127.0.0.1:9")!, tokens: .fixed("x"))
        await #expect { _ = try await nowhere.replicas(zone: ZoneReference("notes")) } throws: { ($0 as? SyncError)?.code == .transport }
        try await phone.close()
        try await laptop.close()
    }
}

/// The promises every ``HTTPExchange`` makes, kept by the URLSession one: a server that trickles
/// or floods its answer is cut off, and a cancelled request ends as cancelled.
@Suite("URLSession exchange bounds, against a real HTTP server that misbehaves")
struct URLSessionExchangeBoundsTests {
    /// Set by `/trickle` once it has sent its whole answer.
    static let trickleFinished = Mutex(false)

    /// A live Hummingbird server: `/trickle` sends one byte every 100 ms for 60 s, `/flood`
    /// sends 1 MiB chunks without end (or `Content-Length` of 1 GiB with `/announced`).
    static func withMisbehavingServer(_ body: (URL) async throws -> Void) async throws {
        let router = Router()
        router.get("trickle") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody { writer in
                for _ in 0..<600 {
                    try await writer.write(ByteBuffer(bytes: [0x61]))
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await writer.finish(nil)
                Self.trickleFinished.withLock { $0 = true }
            })
        }
        router.get("flood") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody { writer in
                let chunk = ByteBuffer(repeating: 0x62, count: 1 << 20)
                while true { try await writer.write(chunk) }
            })
        }
        router.get("announced") { _, _ -> Response in
            Response(status: .ok, headers: [.contentLength: "\(1 << 30)"], body: ResponseBody { writer in
                let chunk = ByteBuffer(repeating: 0x63, count: 1 << 20)
                while true { try await writer.write(chunk) }
            })
        }
        try await withRouterServer(router, body)
    }

    @Test("an answer that trickles in is cut off at the request's timeout, answer included (not read to its end a minute later)")
    func wholeRequestDeadline() async throws {
        try await Self.withMisbehavingServer { url in
            let exchange = URLSessionExchange(configuration: .ephemeral, answerLimit: 1 << 20)
            // A byte every 100 ms keeps the connection from ever being idle for 2 s: only a
            // deadline on the whole request ends it before the server's minute is up. (On a
            // machine too loaded to send a byte in 2 s, URLSession's own idle timeout may end it
            // first: a transport failure too.)
            await #expect { _ = try await exchange.send(HTTPExchangeRequest(method: "GET", url: url.absoluteString + "/trickle", timeout: .seconds(2))) }
                throws: { error in
                    // Our deadline ("no whole answer within 2 s"), or URLSession's timeout (-1001).
                    (error as? SyncError)?.code == .transport && ("\(error)".contains("within") || "\(error)".contains("-1001"))
                }
            #expect(!Self.trickleFinished.withLock { $0 }, "the whole trickled answer was read: the request's timeout did not bound it")
        }
    }

    @Test("an answer larger than the limit is refused as it arrives, whether announced by Content-Length or not")
    func answerLimit() async throws {
        try await Self.withMisbehavingServer { url in
            let exchange = URLSessionExchange(configuration: .ephemeral, answerLimit: 4 << 20)
            for path in ["/flood", "/announced"] {
                await #expect { _ = try await exchange.send(HTTPExchangeRequest(method: "GET", url: url.absoluteString + path, timeout: .seconds(60))) }
                    throws: { ($0 as? SyncError)?.code == .transport && "\($0)".contains("more than the \(4 << 20) read") }
            }
        }
    }

    @Test("a cancelled request throws CancellationError at once, not a network failure the engine would retry")
    func cancellation() async throws {
        try await Self.withMisbehavingServer { url in
            let exchange = URLSessionExchange(configuration: .ephemeral, answerLimit: 1 << 20)
            let request = Task {
                try await exchange.send(HTTPExchangeRequest(method: "GET", url: url.absoluteString + "/trickle", timeout: .seconds(60)))
            }
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            request.cancel()
            await #expect(throws: CancellationError.self) { _ = try await request.value }
            // Ended by the cancellation, not by the answer's end: the trickle (60 s from the
            // request) is still going, and the wait was well under it. The bound is loose on
            // purpose — under the whole suite's load this machine has taken 20 s to schedule the
            // cancelled task again; an exchange that ignored cancellation would take 60.
            #expect(!Self.trickleFinished.withLock { $0 }, "the trickled answer was read to its end: the cancellation did not end the request")
            #expect(ContinuousClock.now - started < .seconds(40))
        }
    }
}
