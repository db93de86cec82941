import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
@testable import StrataCommands
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// `strata users` (generated tokens, salted hashes, the users file), SIGHUP reload of a running
/// `strata serve`, and `strata sync --token-file` / `STRATA_TOKEN`.
@Suite("strata users: generated tokens, users file, SIGHUP reload, token files")
struct UsersCommandTests {
    /// What a finished `strata` child left.
    struct Output: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the `strata` executable (optionally with extra environment variables) to its end on a
    /// thread of its own; output goes through files.
    func strata(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) async throws -> Output {
        let executable = try ChildProcess.executable("strata")
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Swift.Result { () throws -> Output in
                    let scratch = NSTemporaryDirectory() + "strata-users-\(UUID().uuidString)"
                    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
                    defer { try? FileManager.default.removeItem(atPath: scratch) }
                    FileManager.default.createFile(atPath: scratch + "/out", contents: nil)
                    FileManager.default.createFile(atPath: scratch + "/err", contents: nil)
                    let process = SpawnedProcess()
                    process.executableURL = executable
                    process.arguments = arguments
                    var env = ProcessInfo.processInfo.environment
                    for name in removing { env[name] = nil }
                    env.merge(environment) { $1 }
                    process.environment = env
                    process.standardInput = FileHandle.nullDevice
                    process.standardOutput = FileHandle(forWritingAtPath: scratch + "/out")
                    process.standardError = FileHandle(forWritingAtPath: scratch + "/err")
                    try process.run()
                    process.waitUntilExit()
                    return Output(
                        status: process.terminationStatus,
                        stdout: String(decoding: FileManager.default.contents(atPath: scratch + "/out") ?? Data(), as: UTF8.self),
                        stderr: String(decoding: FileManager.default.contents(atPath: scratch + "/err") ?? Data(), as: UTF8.self))
                })
            }
        }
    }

    /// `strata users add NAME --users FILE`: the token it printed.
    func add(_ name: String, _ file: String) async throws -> String {
        let result = try await strata(["users", "add", name, "--users", file])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber).intValue
    }

    @Test("users add prints a strata_<id>_<256-bit secret> token once; the file (mode 0600) keeps only a salted hash that authenticates it; list shows no secret; remove drops the user")
    func addListRemove() async throws {
        let dir = TemporaryDirectory()
        let file = dir.sub("users.json")
        let token = try await add("alice", file)
        let parts = token.split(separator: "_", maxSplits: 2)
        #expect(parts.count == 3 && parts[0] == "strata" && parts[1].count == 16, "\(token)")
        // 32 random bytes in base64url without padding: 43 characters of its alphabet.
        let secret = String(parts.count == 3 ? parts[2] : "")
        #expect(secret.count == 43 && secret.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "\(secret)")
        #expect(try mode(file) == 0o600)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!text.contains(secret) && !text.contains(token))

        let users = try UserDirectory.load(from: file)
        #expect(users.authenticate(bearer: token) == "alice")
        // The same ID with another secret, and the token cut short, are nobody's.
        #expect(users.authenticate(bearer: "strata_\(parts[1])_" + String(repeating: "A", count: 43)) == nil)
        #expect(users.authenticate(bearer: String(token.dropLast())) == nil)
        // Two tokens are never the same (fresh randomness each time).
        let second = try await add("bob", file)
        #expect(second != token)
        let both = try UserDirectory(users: try UsersFile.list(file))
        #expect(both.authenticate(bearer: second) == "bob")

        let listed = try await strata(["users", "list", "--users", file])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout == "alice\tgenerated\nbob\tgenerated\n")
        #expect(!listed.stdout.contains(secret))
        let json = try await strata(["users", "list", "--users", file, "--json"])
        #expect(json.stdout.contains("\"alice\"") && !json.stdout.contains("Salt") && !json.stdout.contains("SHA256"))

        #expect(await StrataCLI.run(arguments: ["users", "remove", "alice", "--users", file]) == 0)
        #expect(try UsersFile.list(file).map(\.name) == ["bob"])
        #expect(try UserDirectory.load(from: file).authenticate(bearer: token) == nil)
        #expect(try mode(file) == 0o600)
        // Removing someone the file does not list is an error, and changes nothing.
        #expect(await StrataCLI.run(arguments: ["users", "remove", "alice", "--users", file]) == 2)
        #expect(try UsersFile.list(file).map(\.name) == ["bob"])
    }

    @Test("users add refuses a duplicate name, a bad name and a damaged file (naming it), changing nothing")
    func refusals() async throws {
        let dir = TemporaryDirectory()
        let file = dir.sub("users.json")
        _ = try UsersFile.add("alice", to: file)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(await StrataCLI.run(arguments: ["users", "add", "alice", "--users", file]) == 2)
        for bad in ["", "a b", "-alice", "ali/ce", String(repeating: "x", count: 65), "é"] {
            #expect(await StrataCLI.run(arguments: ["users", "add", bad, "--users", file]) == 2, "accepted \(bad)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        #expect(throws: UserDirectoryError.self) { try UsersFile.add("alice", to: file) }

        let damaged = dir.sub("damaged.json")
        try Data(#"{"users": [{"name": "x", "tokenSHA256": "#.utf8).write(to: URL(fileURLWithPath: damaged))
        #expect(await StrataCLI.run(arguments: ["users", "add", "bob", "--users", damaged]) == 2)
        #expect(await StrataCLI.run(arguments: ["users", "list", "--users", damaged]) == 2)
        do {
            _ = try UsersFile.add("bob", to: damaged)
            Issue.record("a damaged users file was accepted")
        } catch {
            #expect(error.message.contains(damaged))
        }
        #expect(try String(contentsOfFile: damaged, encoding: .utf8) == #"{"users": [{"name": "x", "tokenSHA256": "#)
        // A users file listing a token ID twice, or an entry with both kinds of credential, is damaged too.
        let entry = UserDirectory.User.hashing(UserToken.generate(), name: "a")
        var twin = entry
        twin.name = "b"
        #expect(throws: UserDirectoryError.self) { try UserDirectory(users: [entry, twin]) }
        var both = entry
        both.tokenSHA256 = UserDirectory.digest(of: "x")
        #expect(throws: UserDirectoryError.self) { try UserDirectory(users: [both]) }
    }

    @Test("a users file of older tokenSHA256 entries keeps working, and users add appends a generated entry beside them")
    func olderEntries() async throws {
        let dir = TemporaryDirectory()
        let file = dir.sub("users.json")
        let json = #"{"users": [{"name": "carol", "tokenSHA256": "\#(UserDirectory.digest(of: "carol-secret"))"}]}"#
        try Data(json.utf8).write(to: URL(fileURLWithPath: file))
        let token = try await add("alice", file)
        let users = try UserDirectory.load(from: file)
        #expect(users.authenticate(bearer: "carol-secret") == "carol")
        #expect(users.authenticate(bearer: token) == "alice")
        #expect(users.authenticate(bearer: "strata_0000000000000000_x") == nil)
        let listed = try await strata(["users", "list", "--users", file])
        #expect(listed.stdout == "carol\tsha256\nalice\tgenerated\n")
    }

    // MARK: SIGHUP reload against a real `strata serve`

    typealias Server = ServeChild

    /// The status of `GET /v1/zones` with `token`.
    func status(_ url: URL, token: String) async throws -> Int {
        var request = URLRequest(url: try #require(URL(string: url.absoluteString + "/v1/zones")))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return try #require(response as? HTTPURLResponse).statusCode
    }

    /// Sends SIGHUP, then asks until `token` gets `expected` (the reload runs on a signal queue
    /// of the server; a bound of minutes only keeps a broken server from hanging the test): the
    /// status last seen.
    func hangUp(_ server: Server, until token: String, answers expected: Int) async throws -> Int {
        kill(server.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(120)
        var last = try await status(server.url, token: token)
        while last != expected && Date() < deadline && server.process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
            last = try await status(server.url, token: token)
        }
        return last
    }

    @Test("SIGHUP makes a running strata serve read its users file again: an added user gets in, a damaged file is logged and the old users kept, a removed user is shut out")
    func sighupReload() async throws {
        let dir = TemporaryDirectory()
        let file = dir.sub("users.json")
        let alice = try UsersFile.add("alice", to: file).text
        let server = try Server(data: dir.sub("data"), users: file, scratch: dir.path)
        defer { server.kill9() }
        #expect(try await status(server.url, token: alice) == 200)

        // bob, added while the server runs, is unknown until the server reloads the file.
        let bob = try await add("bob", file)
        #expect(try await status(server.url, token: bob) == 401)
        #expect(try await hangUp(server, until: bob, answers: 200) == 200, "\(server.log)")
        #expect(try await status(server.url, token: alice) == 200)

        // A damaged file: the server says so in its log and keeps alice and bob.
        let good = try Data(contentsOf: URL(fileURLWithPath: file))
        try Data("{\"users\": [".utf8).write(to: URL(fileURLWithPath: file))
        kill(server.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(120)
        while !server.log.contains("users file not reloaded") && Date() < deadline && server.process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(server.log.contains("users file not reloaded"), "\(server.log)")
        #expect(server.process.isRunning)
        #expect(try await status(server.url, token: alice) == 200)
        #expect(try await status(server.url, token: bob) == 200)

        // The file repaired, bob removed: after the next SIGHUP his token no longer works.
        try good.write(to: URL(fileURLWithPath: file))
        #expect(await StrataCLI.run(arguments: ["users", "remove", "bob", "--users", file]) == 0)
        #expect(try await hangUp(server, until: bob, answers: 401) == 401, "\(server.log)")
        #expect(try await status(server.url, token: alice) == 200)
    }

    // MARK: strata sync --token-file and STRATA_TOKEN

    static let schema = """
    {"entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string", "default": ""}]}]}
    """

    /// Runs `body` with a log server on a free port of 127.0.0.1 whose users are `users`.
    func withServer(_ directory: String, users: UserDirectory, _ body: (URL) async throws -> Void) async throws {
        try await withLogServer(directory, users: users) { url, _ in try await body(url) }
    }

    @Test("strata sync takes the token from --token-file (refusing one others may read) or STRATA_TOKEN, so it never needs to be on the command line")
    func tokenFileAndEnvironment() async throws {
        let dir = TemporaryDirectory()
        let file = dir.sub("users.json")
        let token = try UsersFile.add("alice", to: file).text
        try await withServer(dir.sub("server"), users: try UserDirectory.load(from: file)) { url in
            let schemaFile = dir.sub("schema.json")
            try Data(Self.schema.utf8).write(to: URL(fileURLWithPath: schemaFile))
            let store = dir.sub("phone")
            #expect(try await strata(["init", store, "--schema", schemaFile]).status == 0)
            let base = ["sync", store, "--server", url.absoluteString, "--zone", "notes", "--json"]

            let tokenFile = dir.sub("token")
            try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: tokenFile))
            // Readable by others: refused before anything is sent, saying how to fix it.
            chmod(tokenFile, 0o644)
            let exposed = try await strata(base + ["--token-file", tokenFile], removing: ["STRATA_TOKEN"])
            #expect(exposed.status == 2)
            #expect(exposed.stderr.contains("chmod 600"), "\(exposed.stderr)")

            chmod(tokenFile, 0o600)
            let fromFile = try await strata(base + ["--token-file", tokenFile], removing: ["STRATA_TOKEN"])
            #expect(fromFile.status == 0, "\(fromFile.stdout) \(fromFile.stderr)")
            #expect(fromFile.stdout.contains("\"ok\" : true") || fromFile.stdout.contains("\"ok\":true"), "\(fromFile.stdout)")

            let fromEnvironment = try await strata(base, environment: ["STRATA_TOKEN": token])
            #expect(fromEnvironment.status == 0, "\(fromEnvironment.stdout) \(fromEnvironment.stderr)")

            // A wrong token in the environment is the server's 401, not a silent fallback.
            let wrong = try await strata(base, environment: ["STRATA_TOKEN": "strata_0000000000000000_nope"])
            #expect(wrong.status == 2)
            #expect(wrong.stdout.contains("unauthorized"), "\(wrong.stdout)")

            // No token anywhere, or two options at once: usage errors naming the ways to give one.
            let none = try await strata(base, removing: ["STRATA_TOKEN"])
            #expect(none.status == 2)
            #expect(none.stderr.contains("--token-file") && none.stderr.contains("STRATA_TOKEN"), "\(none.stderr)")
            let both = try await strata(base + ["--token", token, "--token-file", tokenFile], removing: ["STRATA_TOKEN"])
            #expect(both.status == 2)
        }
        let help = try await strata(["sync", "--help"])
        #expect(help.stdout.contains("ps"), "\(help.stdout)")
    }
}
