import Foundation
import StrataLog
public import StrataCore

/// `authors.json` in a store directory: which user pushed each replica's events, as the log server
/// reports it (the owner of a replica is the author of every event it carries, as CloudKit's
/// `modifiedByUserRecordID`).
///
/// ```json
/// {"authors": {"<replica uuid>": "alice"}, "checksum": "1a2b3c4d", "format": 1}
/// ```
///
/// The checksum is a CRC-32C of the entries in a canonical form (sorted by replica, `replica TAB
/// user LF`). The file is written atomically, so it never holds half a write; the checksum is for
/// what happens to it afterwards: a flipped bit on the medium, a truncation by a copy that did not
/// finish, a hand edit. It is not a signature: anyone who edits the file can recompute it. The
/// authors are a display aid for the tools, never an input to the merge or to sync decisions.
struct AuthorsFile: Sendable, Equatable {
    static let name = "authors.json"
    static let format = 1

    var authors: [ReplicaID: String]

    /// Why a file could not be used.
    enum Problem: Error, Equatable {
        /// Not JSON of this layout, an entry that is not a replica ID, or a checksum mismatch.
        case damaged(String)
        /// Written by a newer Strata: readable by it only.
        case unsupportedFormat(Int)
    }

    private struct Layout: Codable {
        var format: Int
        var checksum: String
        var authors: [String: String]
    }

    static func checksum(_ authors: [ReplicaID: String]) -> String {
        var canonical: [UInt8] = []
        for replica in authors.keys.sorted() {
            canonical.append(contentsOf: replica.description.utf8)
            canonical.append(9)
            canonical.append(contentsOf: (authors[replica] ?? "").utf8)
            canonical.append(10)
        }
        let value = CRC32C.checksum(canonical)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    func encoded() throws -> [UInt8] {
        let layout = Layout(format: Self.format, checksum: Self.checksum(authors),
                            authors: Dictionary(uniqueKeysWithValues: authors.map { ($0.key.description, $0.value) }))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return Array(try encoder.encode(layout)) + [10]
    }

    /// Decodes and checks a file's bytes.
    static func decode(_ bytes: Data) -> Result<AuthorsFile, Problem> {
        // The format first, so that a newer layout is told apart from damage.
        struct Version: Decodable { var format: Int }
        guard let version = try? JSONDecoder().decode(Version.self, from: bytes) else {
            return .failure(.damaged("not a JSON object with a format version"))
        }
        guard version.format == format else { return .failure(.unsupportedFormat(version.format)) }
        let layout: Layout
        do {
            layout = try JSONDecoder().decode(Layout.self, from: bytes)
        } catch {
            return .failure(.damaged("unexpected layout: \(error)"))
        }
        var authors: [ReplicaID: String] = [:]
        for (text, user) in layout.authors {
            guard let replica = ReplicaID(text) else { return .failure(.damaged("\(text) is not a replica ID")) }
            authors[replica] = user
        }
        guard checksum(authors) == layout.checksum.lowercased() else {
            return .failure(.damaged("checksum mismatch (recorded \(layout.checksum), computed \(checksum(authors)))"))
        }
        return .success(AuthorsFile(authors: authors))
    }

    /// The file in `directory`: `nil` when there is none.
    static func read(in directory: String) throws -> Result<AuthorsFile, Problem>? {
        let path = directory + "/" + name
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return decode(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw StoreError(.invalidArgument, "cannot read \(path): \(error)")
        }
    }

    /// Temporary file, fsync, rename, fsync of the directory: a crash leaves the old file or the
    /// new one.
    func write(in directory: String) throws {
        do {
            try FileSystem.writeAtomically(try encoded(), to: directory + "/" + Self.name)
        } catch let error as LogError {
            throw StoreError(error)
        }
    }
}

extension StoreError.Code {
    /// `authors.json` is damaged or of a format this version cannot read.
    public static let damagedAuthors = StoreError.Code("damagedAuthors")
}
