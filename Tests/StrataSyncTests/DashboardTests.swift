import Foundation
import AsyncHTTPClient
import HummingbirdTesting
import NIOCore
import NIOHTTP1
@_spi(StrataInternals) import Strata
import StrataCore
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// The operator's dashboard in a real headless browser (Debian's Chromium), against a server on a
/// real port seeded with zones, devices that synced, one device that diverged, and refused
/// requests. The screenshot is kept (`.build/test-artifacts/dashboard.png`, or under
/// `STRATA_TEST_ARTIFACTS`).
@Suite("Operator dashboard: server-rendered pages behind the operators' sign-in, in headless Chromium")
struct DashboardTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: "")])
    }
    static let tokens = ["alice": "alice-secret", "bob": "bob-secret", "ops": "ops-secret-token"]

    /// A server whose operator is `ops`, on a real port.
    func withServer(_ directory: String, _ body: @Sendable (URL) async throws -> Void) async throws {
        let storage = try EmbeddedZoneStorage(directory: directory)
        var configuration = ServerConfiguration(port: 0)
        configuration.operators = ["ops"]
        let app = StrataServerApp(storage: storage, users: try UserDirectory(tokens: Self.tokens), configuration: configuration)
        do {
            try await app.buildApplication().test(.live) { client in
                let port = try #require(client.port)
                try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
            }
        } catch {
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: Self.schema, options: StoreOptions(durability: .buffered))
    }

    func sync(_ store: Store, _ url: URL, zone: String, user: String = "alice", owner: String? = nil) async throws -> SyncReport {
        var options = SyncOptions()
        options.stateReportInterval = .zero
        return try await SyncEngine(store: store, server: url, zone: zone, owner: owner, credentials: "\(user)-secret", options: options).sync()
    }

    /// `GET path` with `authorization` (a whole header value): its status, headers and body.
    /// Through AsyncHTTPClient: FoundationNetworking's URLSession meets a `401` with a Basic
    /// challenge by waiting for credentials nobody gives it.
    func get(_ url: URL, _ path: String, authorization: String?) async throws -> (status: Int, headers: [String: String], body: String) {
        var request = HTTPClientRequest(url: url.appendingPathComponent(path).absoluteString)
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 4 << 20)
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return (Int(response.status.code), headers, String(buffer: body))
    }

    static func basic(_ user: String, _ token: String) -> String { "Basic " + Data("\(user):\(token)".utf8).base64EncodedString() }

    /// Where the screenshot goes: `STRATA_TEST_ARTIFACTS`, or the package's `.build/test-artifacts`.
    static var artifacts: String {
        if let directory = ProcessInfo.processInfo.environment["STRATA_TEST_ARTIFACTS"], !directory.isEmpty { return directory }
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return package.appendingPathComponent(".build/test-artifacts").path
    }

    /// Runs headless Chromium on `url` with `arguments` (bounded to 90 s), off the cooperative
    /// threads the server answers on.
    func chromium(_ arguments: [String], _ url: String, profile: String) async throws -> ChildProcess.Result {
        let chromium = try #require(["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                    "Chromium is not installed (Tools/scripts/ensure-deps.sh installs Debian's chromium)")
        let all = ["90", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                   "--user-data-dir=\(profile)"] + arguments + [url]
        // On a thread of its own: not the cooperative pool nor the storage's blocking queue, which
        // the server needs to answer the browser.
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/timeout"), all) })
            }
        }
    }

    @Test("the dashboard shows zones, devices and the divergent one with a link to its page, and recent errors; only operators get in; Chromium renders it and a screenshot is kept",
          .timeLimit(.minutes(5)))
    func dashboardInChromium() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            // Seed: alice's zones notes and photos, two devices on notes and one on photos; bob
            // reads notes; one of alice's devices took events the zone never had.
            let phone = try await open(dir.sub("phone"))
            let laptop = try await open(dir.sub("laptop"))
            let camera = try await open(dir.sub("camera"))
            for i in 0..<8 { try await phone.transaction { tx in _ = try tx.insert("Note", ["title": .string("note \(i)")]) } }
            try await camera.transaction { tx in _ = try tx.insert("Note", ["title": .string("sunset")]) }
            _ = try await sync(phone, url, zone: "notes")
            _ = try await sync(laptop, url, zone: "notes")
            _ = try await sync(camera, url, zone: "photos")
            _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret")
                .updateZone(ZoneReference("notes"), settings: ZoneSettings(access: .shared, grants: ["bob": .read]))
            let reader = try await open(dir.sub("reader"))
            let read = try await sync(reader, url, zone: "notes", user: "bob", owner: "alice")
            // A device's claims are shown, never run: a library name made of markup.
            let hostile = try await HTTPSyncTransport(server: url, bearer: "bob-secret").reportDevice(
                ZoneReference("notes", owner: "alice"),
                DeviceReport(replica: ReplicaID.random().description, token: try #require(read.token), digest: nil, pendingTransactions: 0,
                             pendingAssets: 0, masked: false, library: "<script>alert(1)</script>"))
            #expect(hostile.check == .unverified)
            let stray = try await open(dir.sub("stray"))
            try await stray.transaction { tx in _ = try tx.insert("Note", ["title": .string("never pushed")]) }
            try await laptop.applyRemote(try stray.transactions().filter { $0.transaction.replica == stray.replicaID }.map(\.transaction))
            let diverged = try await sync(laptop, url, zone: "notes")
            #expect(diverged.stateCheck?.check == .divergent)
            // Refused requests, for the errors table.
            #expect(try await get(url, "v1/zones", authorization: "Bearer wrong-token").status == 401)
            #expect(try await get(url, "v1/zones/nothing-here/changes", authorization: "Bearer alice-secret").status == 404)

            // Only operators: no credentials asks for them (HTTP Basic), a user who is not an
            // operator is refused, a wrong token too; the bearer token works for scripts.
            let anonymous = try await get(url, "dashboard", authorization: nil)
            #expect(anonymous.status == 401)
            #expect(anonymous.headers["www-authenticate"]?.hasPrefix("Basic") == true, "\(anonymous.headers)")
            #expect(try await get(url, "dashboard", authorization: Self.basic("alice", "alice-secret")).status == 403)
            #expect(try await get(url, "dashboard", authorization: Self.basic("ops", "alice-secret")).status == 401, "another user's token under the operator's name")
            #expect(try await get(url, "dashboard", authorization: "Bearer ops-secret-token").status == 200)
            let overview = try await get(url, "dashboard", authorization: Self.basic("ops", "ops-secret-token"))
            #expect(overview.status == 200 && overview.headers["content-type"]?.hasPrefix("text/html") == true)
            let laptopPage = "/dashboard/zones/alice/notes/devices/alice/\(laptop.replicaID)"
            for expected in ["alice/notes", "alice/photos", "1 divergent", laptopPage, "unauthorized", "zoneNotFound", "ready"] {
                #expect(overview.body.contains(expected), "the overview lacks \(expected)")
            }
            let zonePage = try await get(url, "dashboard/zones/alice/notes", authorization: Self.basic("ops", "ops-secret-token"))
            for replica in [phone.replicaID, laptop.replicaID, reader.replicaID] { #expect(zonePage.body.contains(replica.description)) }
            #expect(zonePage.body.contains(">divergent<") && zonePage.body.contains(">consistent<"))
            #expect(zonePage.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !zonePage.body.contains("<script"), "a device's library is escaped")
            let devicePage = try await get(url, String(laptopPage.dropFirst()), authorization: Self.basic("ops", "ops-secret-token"))
            #expect(devicePage.status == 200 && devicePage.body.contains("strata diff STORE --server URL --zone notes") && devicePage.body.contains(laptop.digest()))
            #expect(try await get(url, "dashboard/zones/alice/nothing", authorization: Self.basic("ops", "ops-secret-token")).status == 404)
            // A zone name is never HTML: names are [A-Za-z0-9._-], user names too; the page escapes anyway.
            #expect(!overview.body.contains("<script"))

            // In a real browser: the DOM it builds holds the seeded data; the screenshot is kept.
            let address = "http://ops:ops-secret-token@127.0.0.1:\(url.port ?? 0)/dashboard"
            let dom = try await chromium(["--dump-dom"], address, profile: dir.sub("chromium-dom"))
            #expect(dom.status == 0, "chromium --dump-dom exited \(dom.status): \(dom.stderr.suffix(2000))")
            for expected in ["Divergent devices", "alice/notes", "alice/photos", laptop.replicaID.description, "zoneNotFound"] {
                #expect(dom.stdout.contains(expected), "the rendered page lacks \(expected): \(dom.stdout.prefix(500))")
            }
            try FileManager.default.createDirectory(atPath: Self.artifacts, withIntermediateDirectories: true)
            let screenshot = Self.artifacts + "/dashboard.png"
            try? FileManager.default.removeItem(atPath: screenshot)
            let shot = try await chromium(["--screenshot=\(screenshot)", "--window-size=1280,1400", "--hide-scrollbars"], address, profile: dir.sub("chromium-shot"))
            #expect(shot.status == 0, "chromium --screenshot exited \(shot.status): \(shot.stderr.suffix(2000))")
            let png = try #require(FileManager.default.contents(atPath: screenshot), "no screenshot at \(screenshot)")
            #expect(png.count > 10_000 && png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "\(png.count) bytes")
            for store in [phone, laptop, camera, reader, stray] { try await store.close() }
        }
    }
}
