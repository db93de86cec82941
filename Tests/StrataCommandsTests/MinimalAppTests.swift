import Foundation
import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// The example app package (Examples/MinimalApp) depends on `Strata` and `StrataSync` only, as an
/// app does: it must build without resolving any package of the server, PostgreSQL, the CLI or
/// the AsyncHTTPClient transport, and sync with a real `strata serve` through the default
/// transport (URLSession).
@Suite("An app that depends only on Strata and StrataSync")
struct MinimalAppTests {
    /// The repository's root (this file is Tests/StrataCommandsTests/MinimalAppTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every package an app resolves, and nothing more: the log (swift-log) and the engine's
    /// service lifecycle with what it needs. Not the server's (Hummingbird and what it brings),
    /// the database's, the CLI's, the metrics exporter, the NIO HTTP client with its TLS, nor
    /// swift-crypto (the store's SHA-256 is its own).
    static let expected: Set<String> = ["swift-log", "swift-service-lifecycle", "swift-async-algorithms", "swift-collections"]

    /// Builds the package (test.sh has built it already, so this only checks it is current) and
    /// returns the path of its executable.
    static func build() throws -> String {
        let swift = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build",
            "--package-path", root.appendingPathComponent("Examples/MinimalApp").path,
            "--scratch-path", root.appendingPathComponent(".build-minimal-app").path, "--show-bin-path"])
        guard swift.status == 0 else {
            throw ServeChildError("the example app's bin path: \(swift.stderr)")
        }
        let bin = swift.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let built = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build",
            "--package-path", root.appendingPathComponent("Examples/MinimalApp").path,
            "--scratch-path", root.appendingPathComponent(".build-minimal-app").path])
        guard built.status == 0 else {
            throw ServeChildError("the example app did not build (status \(built.status)):\n\(built.stdout.suffix(4000))\n\(built.stderr.suffix(4000))")
        }
        return bin + "/MinimalApp"
    }

    @Test("it resolves none of the server's, PostgreSQL's or the CLI's packages, and two runs sync through a real server over URLSession")
    func buildsLeanAndSyncs() async throws {
        let app = try Self.build()
        let resolved = try String(contentsOf: Self.root.appendingPathComponent("Examples/MinimalApp/Package.resolved"), encoding: .utf8)
        let pins = Set(resolved.split(separator: "\n").compactMap { line -> String? in
            guard line.contains("\"identity\"") else { return nil }
            return line.split(separator: "\"").dropFirst(3).first.map(String.init)
        })
        #expect(pins == Self.expected, "the app resolved \(pins.sorted()); more than expected: \(pins.subtracting(Self.expected).sorted())")

        let dir = TemporaryDirectory()
        let users = dir.sub("users.json")
        let alice = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [alice]]).write(to: URL(fileURLWithPath: users))
        let server = try ServeChild(data: dir.sub("server"), users: users, scratch: dir.path)
        defer { _ = server.process.isRunning ? kill(server.process.processIdentifier, SIGKILL) : 0 }

        let phone = try ChildProcess.run(URL(fileURLWithPath: app), [dir.sub("phone"), server.url.absoluteString, "alice-secret", "groceries", "Buy milk"])
        #expect(phone.status == 0, "\(phone.stderr)")
        #expect(phone.stdout == "Buy milk\n")
        let laptop = try ChildProcess.run(URL(fileURLWithPath: app), [dir.sub("laptop"), server.url.absoluteString, "alice-secret", "groceries", "Call Ann"])
        #expect(laptop.status == 0, "\(laptop.stderr)")
        #expect(laptop.stdout == "Buy milk\nCall Ann\n", "the laptop did not get the phone's note")
        // A wrong token: a typed refusal through URLSession, and a non-zero exit.
        let stranger = try ChildProcess.run(URL(fileURLWithPath: app), [dir.sub("stranger"), server.url.absoluteString, "wrong", "groceries", "x"])
        #expect(stranger.status == 1)
        #expect(stranger.stderr.contains("unauthorized"), "\(stranger.stderr)")
        _ = await server.stop()
    }
}
