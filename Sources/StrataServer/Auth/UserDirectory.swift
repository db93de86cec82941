import Crypto
import Foundation
import StrataCore

/// The users the server knows and how they authenticate: each has a bearer token of which only a
/// hash is stored.
///
/// The users file is JSON (see <doc:UsersFileFormat> for every field):
///
/// ```json
/// {"users": [
///   {"name": "alice", "tokenID": "9f3c0a7e51b2d4c8", "tokenSalt": "<32 hex digits>", "tokenSaltedSHA256": "<64 hex digits>"},
///   {"name": "bob", "tokenSHA256": "<64 hex digits: SHA-256 of bob's bearer token>"}
/// ]}
/// ```
///
/// `strata users add NAME` writes the first kind: a token `strata_<tokenID>_<secret>` with 256
/// random bits, of which the file keeps the ID, a random salt and SHA-256(salt ‖ token). The
/// second kind (a plain SHA-256 digest of a token the operator chose) is still read.
///
/// ```swift
/// let users = try UserDirectory.load(from: "/etc/strata/users.json")
/// users.authenticate(bearer: "strata_9f3c0a7e51b2d4c8_…")   // "alice", or nil
/// ```
///
/// A generated token names its entry (the ID), so authenticating it costs one dictionary lookup and
/// one hash whatever the number of users; the digests are compared in time independent of where
/// they differ. Tokens of the older kind are compared against every such entry.
public struct UserDirectory: Sendable {
    /// A user as the users file lists them: a name and either a salted hash of a generated token
    /// (`tokenID`, `tokenSalt`, `tokenSaltedSHA256`) or the SHA-256 digest of a chosen one
    /// (`tokenSHA256`).
    public struct User: Sendable, Hashable, Codable {
        public var name: String
        /// Lower- or upper-case hex of the SHA-256 digest of the user's bearer token (the older
        /// kind of entry).
        public var tokenSHA256: String?
        /// The ID a generated token carries (``UserToken``): 16 hex digits.
        public var tokenID: String?
        /// Hex of the random salt hashed before the token.
        public var tokenSalt: String?
        /// Hex of SHA-256(salt ‖ the token's UTF-8 bytes).
        public var tokenSaltedSHA256: String?

        /// An entry of the older kind: the digest of a token the operator chose.
        public init(name: String, tokenSHA256: String) {
            self.name = name
            self.tokenSHA256 = tokenSHA256
        }

        /// An entry of a generated token: its ID, the salt and the salted hash.
        public init(name: String, tokenID: String, tokenSalt: String, tokenSaltedSHA256: String) {
            self.name = name
            self.tokenID = tokenID
            self.tokenSalt = tokenSalt
            self.tokenSaltedSHA256 = tokenSaltedSHA256
        }

        /// The entry of a freshly generated `token` for `name`, with a new random salt.
        public static func hashing(_ token: UserToken, name: String) -> User {
            var generator = SystemRandomNumberGenerator()
            let salt = (0..<UserToken.saltBytes).map { _ in UInt8.random(in: 0 ... .max, using: &generator) }
            return User(name: name, tokenID: token.id, tokenSalt: Hex.encode(salt),
                        tokenSaltedSHA256: Hex.encode(UserDirectory.saltedDigest(salt: salt, token: token.text)))
        }

        /// Which kind of credential the entry holds, for listings (never the hash itself).
        public var kind: String { tokenID != nil ? "generated" : "sha256" }
    }

    /// The users file's top level.
    struct File: Codable {
        var users: [User]
    }

    private struct Legacy: Sendable {
        var name: String
        var digest: [UInt8]
    }

    private struct Salted: Sendable {
        var name: String
        var salt: [UInt8]
        var digest: [UInt8]
    }

    private let legacy: [Legacy]
    private let salted: [String: Salted]
    /// The entries as given (what a users file writer keeps).
    public let users: [User]

    /// The names of the users, sorted.
    public var names: [String] { users.map(\.name).sorted() }

    /// A directory of `users`.
    ///
    /// - Throws: ``UserDirectoryError`` for an empty or duplicate name, an entry with no credential
    ///   or both kinds, a digest that is not 64 hex digits, a salt that is not hex, or a token ID
    ///   listed twice.
    public init(users: [User]) throws(UserDirectoryError) {
        var seen = Set<String>()
        var legacy: [Legacy] = []
        var salted: [String: Salted] = [:]
        for (index, user) in users.enumerated() {
            guard !user.name.isEmpty else { throw UserDirectoryError("user \(index) has an empty name") }
            guard seen.insert(user.name).inserted else { throw UserDirectoryError("user \(user.name) is listed twice") }
            switch (user.tokenSHA256, user.tokenID) {
            case (let digestText?, nil):
                guard let digest = Hex.decode(digestText), digest.count == SHA256.byteCount else {
                    throw UserDirectoryError("user \(user.name): tokenSHA256 must be 64 hex digits")
                }
                legacy.append(Legacy(name: user.name, digest: digest))
            case (nil, let id?):
                guard UserToken.isValidID(id) else {
                    throw UserDirectoryError("user \(user.name): tokenID must be \(UserToken.idHexDigits) lower-case hex digits")
                }
                guard let saltText = user.tokenSalt, let salt = Hex.decode(saltText), !salt.isEmpty else {
                    throw UserDirectoryError("user \(user.name): tokenSalt must be hex digits")
                }
                guard let digestText = user.tokenSaltedSHA256, let digest = Hex.decode(digestText), digest.count == SHA256.byteCount else {
                    throw UserDirectoryError("user \(user.name): tokenSaltedSHA256 must be 64 hex digits")
                }
                guard salted[id] == nil else { throw UserDirectoryError("user \(user.name): tokenID \(id) is also another user's") }
                salted[id] = Salted(name: user.name, salt: salt, digest: digest)
            case (nil, nil):
                throw UserDirectoryError("user \(user.name) has no token: give tokenID, tokenSalt and tokenSaltedSHA256 (strata users add), or tokenSHA256")
            case (_?, _?):
                throw UserDirectoryError("user \(user.name) has both tokenSHA256 and tokenID: keep one")
            }
        }
        self.legacy = legacy
        self.salted = salted
        self.users = users
    }

    /// A directory of users given their plain bearer tokens (for tests and tools): each token is
    /// hashed at once and only its digest kept.
    public init(tokens: [String: String]) throws(UserDirectoryError) {
        try self.init(users: tokens.sorted { $0.key < $1.key }.map { User(name: $0.key, tokenSHA256: Self.digest(of: $0.value)) })
    }

    /// Reads a users file (see the type's discussion).
    ///
    /// - Throws: ``UserDirectoryError`` naming the file when it cannot be read or parsed, or when
    ///   users other than its owner may write it (group- or world-writable).
    public static func load(from path: String) throws(UserDirectoryError) -> UserDirectory {
        // Whoever may write the users file may add a user with a token of their choosing: a file
        // writable by its group or by everyone is refused, not served. `stat` follows a symbolic
        // link (a mounted secret is often one, mode 0777 itself): the file's own mode counts. A
        // file that cannot be examined cannot be read either: the read below says why.
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & 0o022 != 0 {
            let mode = String(status.st_mode & 0o777, radix: 8)
            throw UserDirectoryError("the users file \(path) is writable by other users (mode \(mode)): anyone who can write it can add a user; make it writable by its owner only (chmod go-w \(path))")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw UserDirectoryError("cannot read the users file \(path): \(error.localizedDescription)")
        }
        return try parse(data, path: path)
    }

    /// Parses the contents of the users file at `path` (named in errors).
    static func parse(_ data: Data, path: String) throws(UserDirectoryError) -> UserDirectory {
        if let problem = DuplicateJSONKeys.first(in: Array(data)) {
            throw UserDirectoryError("the users file \(path) \(problem)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw UserDirectoryError("the users file \(path) is not {\"users\": [{\"name\", \"tokenID\", \"tokenSalt\", \"tokenSaltedSHA256\"} or {\"name\", \"tokenSHA256\"}]}: \(error)")
        }
        do {
            return try UserDirectory(users: file.users)
        } catch {
            throw UserDirectoryError("the users file \(path): \(error.message)")
        }
    }

    /// The hex SHA-256 digest of a bearer token: what a users file stores for it (older kind).
    public static func digest(of token: String) -> String {
        Hex.encode(Array(SHA256.hash(data: Array(token.utf8))))
    }

    static func saltedDigest(salt: [UInt8], token: String) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: salt)
        hasher.update(data: Array(token.utf8))
        return Array(hasher.finalize())
    }

    /// The user whose token is `bearer`, or `nil`.
    public func authenticate(bearer: String) -> String? {
        if let id = UserToken.id(in: bearer), let entry = salted[id] {
            let presented = Self.saltedDigest(salt: entry.salt, token: bearer)
            return Self.constantTimeEqual(presented, entry.digest) ? entry.name : nil
        }
        guard !legacy.isEmpty else { return nil }
        let presented = Array(SHA256.hash(data: Array(bearer.utf8)))
        var match: String?
        for entry in legacy where Self.constantTimeEqual(presented, entry.digest) && match == nil {
            match = entry.name
        }
        return match
    }

    /// Whether two digests of the same length are equal, in time independent of where they differ.
    private static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// A users file or list that cannot be used: the message says what and where.
public struct UserDirectoryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

