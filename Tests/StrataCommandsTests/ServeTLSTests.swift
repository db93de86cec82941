import AsyncHTTPClient
import StrataSyncAsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Strata
import StrataServer
import StrataProtocol
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

/// `strata serve --tls-cert --tls-key`: a real child process answering HTTPS, checked by curl
/// trusting only the test's own self-signed certificate.
@Suite("strata serve over TLS")
struct ServeTLSTests {
    /// Runs `executable` with `arguments`; its exit status and standard output.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func which(_ name: String) -> String? {
        ["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A self-signed certificate for localhost and 127.0.0.1 and its key, made by openssl.
    static func makeCertificate(_ directory: TemporaryDirectory) throws -> (cert: String, key: String) {
        let openssl = try #require(which("openssl"), "openssl is needed to make the test certificate")
        let cert = directory.sub("cert.pem"), key = directory.sub("key.pem")
        let made = try run(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                     "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                                     "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        try #require(made.status == 0, "openssl could not make a certificate")
        return (cert, key)
    }

    @Test("The Strata client syncs over HTTPS: two devices trusting only the test certificate converge; a client that does not trust it is refused before anything is sent")
    func clientSyncsOverTLS() async throws {
        let directory = TemporaryDirectory(#function)
        let (cert, key) = try Self.makeCertificate(directory)
        let users = directory.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: users))
        let server = try ServeChild(data: directory.sub("data"), users: users, scratch: directory.path,
                                    arguments: ["--tls-cert", cert, "--tls-key", key])
        defer { server.kill9() }
        #expect(server.url.scheme == "https")

        let trusting = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPSyncTransport.configuration(trusting: .file(cert)))
        let schema = Schema { Entity("Note", attributes: [Attribute("title", .string, default: "")]) }
        let phone = try await Store.open(at: directory.sub("phone"), schema: schema)
        let laptop = try await Store.open(at: directory.sub("laptop"), schema: schema)
        func engine(_ store: Store, _ client: HTTPClient) throws -> SyncEngine {
            try SyncEngine(store: store, transport: HTTPSyncTransport(server: server.url, bearer: "alice-secret", client: client), zone: "notes")
        }
        func zoneStatus() async throws -> UInt {
            var request = HTTPClientRequest(url: server.url.absoluteString + "/v1/zones/notes")
            request.headers.add(name: "Authorization", value: "Bearer alice-secret")
            return try await trusting.execute(request, timeout: .seconds(30)).status.code
        }
        do {
            try await phone.transaction { tx in _ = try tx.insert("Note", ["title": "over TLS"]) }
            // A client trusting only the system's roots refuses the server's certificate: nothing
            // reaches the server (the zone is not even created), the edit stays pending.
            // Typed, and not retried: the sync fails at once instead of backing off for minutes.
            let refusal = await #expect(throws: SyncError.self) { try await engine(phone, HTTPSyncTransport.defaultClient).sync() }
            #expect(refusal?.code == .untrustedServer)
            #expect(refusal?.isTransient == false)
            #expect(try await zoneStatus() == 404)

            try await engine(phone, trusting).sync()
            try await engine(laptop, trusting).sync()
            #expect(try await zoneStatus() == 200)
            #expect(laptop.count("Note") == 1)
            #expect(laptop.digest() == phone.digest())

            // `strata sync`: refused with the typed code without --ca-file, syncs with it.
            let cli = ServeShutdownTests()
            let tablet = try await cli.makeStore(directory, "tablet")
            let arguments = ["sync", tablet, "--server", server.url.absoluteString, "--zone", "notes", "--token", "alice-secret", "--json"]
            let refused = try await cli.strata(arguments)
            #expect(refused.status == 2)
            #expect(refused.stdout.contains(#""code" : "untrustedServer""#) || refused.stdout.contains(#""code":"untrustedServer""#), "\(refused.stdout)")
            let synced = try await cli.strata(arguments + ["--ca-file", cert])
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            #expect(try await cli.titles(tablet) == ["over TLS"])
            let damaged = try await cli.strata(arguments + ["--ca-file", key])
            #expect(damaged.status == 2 && damaged.stderr.contains("--ca-file \(key)"), "\(damaged.stderr)")
        } catch {
            Issue.record("sync over TLS failed: \(error)")
        }
        try await phone.close()
        try await laptop.close()
        try await trusting.shutdown()
        #expect(await server.stop()?.status == 0, "\(server.stderr)")
    }

    @Test("HTTPS end to end: curl with the test CA gets /health and /metrics; a client not trusting it is refused")
    func httpsEndToEnd() async throws {
        let openssl = try #require(Self.which("openssl"), "openssl is needed to make the test certificate")
        let curl = try #require(Self.which("curl"), "curl is needed to make HTTPS requests")
        let directory = TemporaryDirectory(#function)
        let cert = directory.sub("cert.pem"), key = directory.sub("key.pem")
        let made = try Self.run(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                          "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                                          "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        try #require(made.status == 0, "openssl could not make a certificate")
        let users = directory.sub("users.json")
        try Data(#"{"users": []}"#.utf8).write(to: URL(fileURLWithPath: users))
        let out = directory.sub("serve.out")
        FileManager.default.createFile(atPath: out, contents: nil)
        let process = SpawnedProcess()
        process.executableURL = try ChildProcess.executable("strata")
        process.arguments = ["serve", "--data", directory.sub("data"), "--port", "0", "--users", users, "--tls-cert", cert, "--tls-key", key]
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        var url: String?
        for _ in 0..<1500 where url == nil && process.isRunning {
            let text = String(decoding: FileManager.default.contents(atPath: out) ?? Data(), as: UTF8.self)
            url = text.split(separator: "\n").first { $0.hasPrefix("listening on ") }.map { String($0.dropFirst("listening on ".count)) }
            if url == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        let base = try #require(url, "strata serve --tls-cert did not start")
        #expect(base.hasPrefix("https://127.0.0.1:"))

        let health = try Self.run(curl, ["-sS", "--cacert", cert, base + "/health"])
        #expect(health.status == 0)
        #expect(health.output.contains(#""status":"ok""#))
        let metrics = try Self.run(curl, ["-sS", "--cacert", cert, base + "/metrics"])
        #expect(metrics.output.contains("strata_http_requests_total{route=\"/health\",method=\"GET\",status=\"200\"} 1"))
        // Without the CA the handshake fails: the server really answers with the given certificate.
        let untrusted = try Self.run(curl, ["-sS", base + "/health"])
        #expect(untrusted.status != 0)
        // And plain HTTP on the TLS port gets no HTTP answer.
        let plain = try Self.run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code}", base.replacingOccurrences(of: "https://", with: "http://") + "/health"])
        #expect(plain.output != "200")

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}
