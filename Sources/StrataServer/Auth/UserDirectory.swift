import Crypto
import Foundation

/// The users the server knows and how they authenticate: each has a bearer token, of which only
/// the SHA-256 digest is stored.
///
/// The users file is JSON:
///
/// ```json
/// {"users": [{"name": "alice", "tokenSHA256": "<64 hex digits: SHA-256 of alice's bearer token>"}]}
/// ```
///
/// ```swift
/// let users = try UserDirectory.load(from: "/etc/strata/users.json")
/// users.authenticate(bearer: "s3cret")   // "alice", or nil
/// ```
///
/// Authentication hashes the presented token and compares digests in time independent of where
/// they differ, against every user, so that timing tells nothing about the stored digests.
public struct UserDirectory: Sendable {
    /// A user: a name and the SHA-256 digest of their bearer token.
    public struct User: Sendable, Hashable, Codable {
        public var name: String
        /// Lower- or upper-case hex of the SHA-256 digest of the user's bearer token.
        public var tokenSHA256: String

        public init(name: String, tokenSHA256: String) {
            self.name = name
            self.tokenSHA256 = tokenSHA256
        }
    }

    private struct File: Codable {
        var users: [User]
    }

    private let entries: [(name: String, digest: [UInt8])]

    /// The names of the users, sorted.
    public var names: [String] { entries.map(\.name).sorted() }

    /// A directory of `users`.
    ///
    /// - Throws: ``UserDirectoryError`` for an empty or duplicate name or a digest that is not 64
    ///   hex digits.
    public init(users: [User]) throws(UserDirectoryError) {
        var seen = Set<String>()
        var entries: [(name: String, digest: [UInt8])] = []
        for (index, user) in users.enumerated() {
            guard !user.name.isEmpty else { throw UserDirectoryError("user \(index) has an empty name") }
            guard seen.insert(user.name).inserted else { throw UserDirectoryError("user \(user.name) is listed twice") }
            guard let digest = Self.parseHex(user.tokenSHA256), digest.count == SHA256.byteCount else {
                throw UserDirectoryError("user \(user.name): tokenSHA256 must be 64 hex digits")
            }
            entries.append((user.name, digest))
        }
        self.entries = entries
    }

    /// A directory of users given their plain bearer tokens (for tests and tools): each token is
    /// hashed at once and only its digest kept.
    public init(tokens: [String: String]) throws(UserDirectoryError) {
        try self.init(users: tokens.sorted { $0.key < $1.key }.map { User(name: $0.key, tokenSHA256: Self.digest(of: $0.value)) })
    }

    /// Reads a users file (see the type's discussion).
    ///
    /// - Throws: ``UserDirectoryError`` naming the file when it cannot be read or parsed.
    public static func load(from path: String) throws(UserDirectoryError) -> UserDirectory {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw UserDirectoryError("cannot read the users file \(path): \(error.localizedDescription)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw UserDirectoryError("the users file \(path) is not {\"users\": [{\"name\", \"tokenSHA256\"}]}: \(error)")
        }
        do {
            return try UserDirectory(users: file.users)
        } catch {
            throw UserDirectoryError("the users file \(path): \(error.message)")
        }
    }

    /// The hex SHA-256 digest of a bearer token: what a users file stores for it.
    public static func digest(of token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
    }

    /// The user whose token is `bearer`, or `nil`.
    public func authenticate(bearer: String) -> String? {
        let presented = Array(SHA256.hash(data: Array(bearer.utf8)))
        var match: String?
        for entry in entries {
            var difference: UInt8 = 0
            for i in 0..<presented.count { difference |= presented[i] ^ entry.digest[i] }
            if difference == 0 && match == nil { match = entry.name }
        }
        return match
    }

    private static func parseHex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        var i = 0
        while i < chars.count {
            guard let high = nibble(chars[i]), let low = nibble(chars[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }
}

/// A users file or list that cannot be used: the message says what and where.
public struct UserDirectoryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
