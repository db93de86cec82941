import Foundation
import Logging
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

@Suite("Users and access rules")
struct UserDirectoryTests {
    @Test("a users file of token digests authenticates exactly its users' tokens")
    func usersFile() throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("users.json")
        let json = #"{"users": [{"name": "alice", "tokenSHA256": "\#(UserDirectory.digest(of: "a-secret"))"}, {"name": "bob", "tokenSHA256": "\#(UserDirectory.digest(of: "b-secret").uppercased())"}]}"#
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        let users = try UserDirectory.load(from: path)
        #expect(users.names == ["alice", "bob"])
        #expect(users.authenticate(bearer: "a-secret") == "alice")
        #expect(users.authenticate(bearer: "b-secret") == "bob")
        #expect(users.authenticate(bearer: "c-secret") == nil)
        #expect(users.authenticate(bearer: "") == nil)
        // The digest of a known value (SHA-256 of "abc").
        #expect(UserDirectory.digest(of: "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("a bad users file is refused with a message naming it", arguments: [
        #"{"users": [{"name": "alice", "tokenSHA256": "xyz"}]}"#,
        #"{"users": [{"name": "", "tokenSHA256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}]}"#,
        #"{"users": [{"name": "a", "tokenSHA256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}, {"name": "a", "tokenSHA256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}]}"#,
        #"{"people": []}"#,
        "not json",
        #"{"users": [], "users": [{"name": "mallory", "tokenSHA256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}]}"#,
        #"{"users": [{"name": "alice", "name": "root", "tokenSHA256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}]}"#,
    ])
    func badUsersFile(contents: String) throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("users.json")
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try UserDirectory.load(from: path)
            Issue.record("accepted \(contents)")
        } catch {
            #expect(error.message.contains(path))
        }
        #expect(throws: UserDirectoryError.self) { try UserDirectory.load(from: dir.sub("missing.json")) }
    }

    @Test("a users file its group or everyone may write is refused, naming the file and its mode; the owner's 0600 and a read-only 0644 are served", arguments: [
        (0o600, true), (0o644, true), (0o400, true), (0o664, false), (0o620, false), (0o646, false), (0o666, false), (0o777, false),
    ])
    func writableUsersFile(mode: Int, served: Bool) throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("users.json")
        try Data(#"{"users": [{"name": "alice", "tokenSHA256": "\#(UserDirectory.digest(of: "a-secret"))"}]}"#.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        do {
            let users = try UserDirectory.load(from: path)
            #expect(served, "a users file of mode \(String(mode, radix: 8)) was served")
            #expect(users.authenticate(bearer: "a-secret") == "alice")
        } catch {
            #expect(!served, "a users file of mode \(String(mode, radix: 8)) was refused: \(error.message)")
            #expect(error.message.contains(path) && error.message.contains(String(mode, radix: 8)) && error.message.contains("chmod go-w"))
        }
        // A running server's reload keeps the users it had.
        let registry = UserRegistry(try UserDirectory(tokens: ["bob": "b-secret"]), path: path)
        #expect(registry.reload(logger: Logger(label: "test")) == served)
        #expect((registry.current.authenticate(bearer: "b-secret") == "bob") == !served)
    }

    @Test("a users file reached through a symbolic link (a mounted secret) is judged by the file's mode, not the link's")
    func symlinkedUsersFile() throws {
        let dir = TemporaryDirectory()
        let target = dir.sub("secret-users.json")
        try Data(#"{"users": [{"name": "alice", "tokenSHA256": "\#(UserDirectory.digest(of: "a-secret"))"}]}"#.utf8).write(to: URL(fileURLWithPath: target))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target)
        let link = dir.sub("users.json")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(try UserDirectory.load(from: link).authenticate(bearer: "a-secret") == "alice")
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: target)
        #expect(throws: UserDirectoryError.self) { try UserDirectory.load(from: link) }
    }

    @Test("zone names are 1–64 of [A-Za-z0-9._-]", arguments: [
        ("notes", true), ("A-b_c.9", true), (String(repeating: "x", count: 64), true),
        ("", false), (String(repeating: "x", count: 65), false), ("a b", false), ("a/b", false), ("é", false), ("a%20", false),
    ])
    func zoneNames(name: String, valid: Bool) {
        #expect(ZoneInfo.isValidName(name) == valid)
    }

    @Test("the owner may do everything; grants and public access let others read or push")
    func accessRules() {
        let shared = ZoneInfo(name: "z", owner: "alice", access: .shared, grants: ["bob": .read, "carol": .readWrite], epoch: 1)
        #expect(shared.canRead("alice") && shared.canPush("alice") && shared.canAdminister("alice"))
        #expect(shared.canRead("bob") && !shared.canPush("bob") && !shared.canAdminister("bob"))
        #expect(shared.canRead("carol") && shared.canPush("carol") && !shared.canAdminister("carol"))
        #expect(!shared.canRead("dave") && !shared.canPush("dave"))
        var closed = shared
        closed.access = .private
        #expect(!closed.canRead("bob") && !closed.canPush("carol") && closed.canPush("alice"))
        var open = shared
        open.access = .public
        #expect(open.canRead("dave") && !open.canPush("dave") && !open.canPush("bob") && open.canPush("carol"))
    }
}
