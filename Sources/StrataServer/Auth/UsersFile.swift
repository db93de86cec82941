import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Edits of a users file (see ``UserDirectory``), as `strata users` makes them: each reads the
/// whole file (refusing a damaged one), changes it, and replaces it atomically — a temporary file
/// beside it with mode `0600`, `fsync`, `rename`, `fsync` of the directory — so that a crash leaves
/// the old file or the new one, and a server reloading it (SIGHUP) never reads half of it. Edits
/// hold an exclusive `flock` on the file's directory, so that two at once do not lose one.
///
/// ```swift
/// let token = try UsersFile.add("alice", to: "/etc/strata/users.json")
/// print(token.text)   // shown once; the file keeps only its salted hash
/// ```
public enum UsersFile {
    /// Whether `name` may be a user's name: 1–64 of `[A-Za-z0-9._@-]`, starting with a letter or
    /// digit (names appear in zone paths' `owner` parameter and in logs).
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        func alphanumeric(_ c: UInt8) -> Bool {
            (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
        }
        guard alphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { alphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "@") }
    }

    /// Adds the user `name` with a newly generated token (creating the file when there is none)
    /// and returns the token: the only time it exists outside its holder's hands.
    ///
    /// - Throws: ``UserDirectoryError`` for an invalid name, a name already listed, a damaged file,
    ///   or a failed write — each naming the file.
    public static func add(_ name: String, to path: String) throws(UserDirectoryError) -> UserToken {
        guard isValidName(name) else {
            throw UserDirectoryError("invalid user name \"\(name.prefix(80))\": 1–64 of [A-Za-z0-9._@-], starting with a letter or digit")
        }
        return try editing(path, creating: true) { (users: inout [UserDirectory.User]) throws(UserDirectoryError) -> UserToken in
            guard !users.contains(where: { $0.name == name }) else {
                throw UserDirectoryError("the users file \(path) already lists user \(name) (strata users remove \(name) first to replace the token)")
            }
            let taken = Set(users.compactMap(\.tokenID))
            var token = UserToken.generate()
            while taken.contains(token.id) { token = UserToken.generate() }
            users.append(.hashing(token, name: name))
            return token
        }
    }

    /// Removes the user `name`.
    ///
    /// - Throws: ``UserDirectoryError`` when the file does not list them, is missing or damaged, or
    ///   cannot be written.
    public static func remove(_ name: String, from path: String) throws(UserDirectoryError) {
        try editing(path, creating: false) { (users: inout [UserDirectory.User]) throws(UserDirectoryError) in
            guard let index = users.firstIndex(where: { $0.name == name }) else {
                throw UserDirectoryError("the users file \(path) lists no user \(name)")
            }
            users.remove(at: index)
        }
    }

    /// The users the file lists, in its order.
    ///
    /// - Throws: ``UserDirectoryError`` naming the file when it is missing or damaged.
    public static func list(_ path: String) throws(UserDirectoryError) -> [UserDirectory.User] {
        try UserDirectory.load(from: path).users
    }

    /// Reads the file (an empty list when it is missing and `creating`), lets `change` edit the
    /// users, checks the result and writes it atomically, under the directory's lock.
    private static func editing<T>(_ path: String, creating: Bool,
                                   _ change: (inout [UserDirectory.User]) throws(UserDirectoryError) -> T) throws(UserDirectoryError) -> T {
        let directory = DurableFile.parent(of: path)
        let lock = open(directory, O_RDONLY | O_CLOEXEC)
        guard lock >= 0 else { throw failure("open the directory", directory, of: path) }
        defer { _ = close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { throw failure("lock the directory", directory, of: path) }
        var users: [UserDirectory.User] = []
        if FileManager.default.fileExists(atPath: path) {
            users = try UserDirectory.load(from: path).users
        } else if !creating {
            throw UserDirectoryError("there is no users file at \(path)")
        }
        let result = try change(&users)
        do {
            _ = try UserDirectory(users: users)
        } catch {
            throw UserDirectoryError("the users file \(path): \(error.message)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let bytes: Data
        do {
            bytes = try encoder.encode(UserDirectory.File(users: users))
        } catch {
            throw UserDirectoryError("cannot encode the users file \(path): \(error)")
        }
        try writeAtomically(Array(bytes) + [0x0A], to: path)
        return result
    }

    /// Replaces `path` with `bytes` atomically and durably, with mode 0600 (``DurableFile``).
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(UserDirectoryError) {
        do {
            try DurableFile.writeAtomically(bytes, to: path, mode: 0o600)
        } catch {
            throw UserDirectoryError("the users file \(path): \(error.message)")
        }
    }

    private static func failure(_ call: String, _ target: String, of path: String) -> UserDirectoryError {
        let code = errno
        return UserDirectoryError("the users file \(path): cannot \(call) \(target): \(String(cString: strerror(code))) (errno \(code))")
    }
}
