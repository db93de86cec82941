import Foundation
import StrataTestSupport
import Testing

/// `strata serve --tls-cert --tls-key`: a real child process answering HTTPS, checked by curl
/// trusting only the test's own self-signed certificate.
@Suite("strata serve over TLS")
struct ServeTLSTests {
    /// Runs `executable` with `arguments`; its exit status and standard output.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
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
        let process = Process()
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
