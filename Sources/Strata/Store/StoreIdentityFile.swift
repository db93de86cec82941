import Foundation
import StrataLog
import StrataCore

/// `store.json`: the bytes of a `StoreIdentity`.
///
/// Format 2 (written):
///
/// ```json
/// {"format":2,"lineage":[…],"logID":"<hex>","replicaID":"<uuid>","checksum":"<sha-256 hex>"}
/// ```
///
/// The fields other than the checksum are the JSON encoding with sorted keys (canonical: integers,
/// strings, booleans only). `checksum` is the lower-case hex SHA-256 of every byte of the file
/// before `,"checksum":"`; after it come exactly the 64 hex digits, `"}` and a newline. So any
/// change to the file — a flipped bit anywhere, a truncation, a hand edit — is refused, not read as
/// a different identity. Format 1 (`{"format":1,"replicaID":…}`, no checksum) is still read; a
/// store opened for writing rewrites it as format 2.
enum StoreIdentityFile {
    static let name = "store.json"
    static let format = 2
    private static let marker = Array(#","checksum":""#.utf8)
    private static let suffix = Array("\"}\n".utf8)

    private struct Body: Codable {
        var format: Int
        var lineage: [ReplicaFork]
        var logID: String?
        var replicaID: ReplicaID
    }

    private struct Version1: Codable {
        var format: Int
        var replicaID: ReplicaID
    }

    private struct FormatOnly: Decodable {
        var format: Int
    }

    /// What a `store.json` holds, and whether it is of the current format.
    struct Loaded {
        var identity: StoreIdentity
        var format: Int
    }

    static func encode(_ identity: StoreIdentity) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = Array(try encoder.encode(Body(format: format, lineage: identity.lineage, logID: identity.logID, replicaID: identity.replicaID)))
        guard body.last == UInt8(ascii: "}") else { throw StoreError(.invalidArgument, "internal: the identity does not encode to a JSON object") }
        let covered = Array(body.dropLast())
        return covered + marker + Array(hex(SHA256Hasher.hash(data: covered)).utf8) + suffix
    }

    /// Decodes `store.json`.
    ///
    /// - Throws: `StoreError.Code.corruptIdentity` naming `path`.
    static func decode(_ bytes: [UInt8], path: String) throws -> Loaded {
        func corrupt(_ why: String) -> StoreError {
            StoreError(.corruptIdentity, "\(path) is damaged: \(why); the store's identity cannot be trusted (restore the file, or move the store aside)")
        }
        guard let probe = try? JSONDecoder().decode(FormatOnly.self, from: Data(bytes)) else {
            // A damaged file may not even be JSON; a checksummed one says which bytes are wrong.
            throw corrupt(bytes.isEmpty ? "empty" : "not a JSON object with a format")
        }
        switch probe.format {
        case 1:
            guard let v1 = try? JSONDecoder().decode(Version1.self, from: Data(bytes)) else { throw corrupt("not a format-1 store identity") }
            return Loaded(identity: StoreIdentity(replicaID: v1.replicaID), format: 1)
        case format:
            guard bytes.count > marker.count + 64 + suffix.count,
                  Array(bytes.suffix(suffix.count)) == suffix else { throw corrupt("it does not end with its checksum") }
            let checksumStart = bytes.count - suffix.count - 64
            let markerStart = checksumStart - marker.count
            guard Array(bytes[markerStart..<checksumStart]) == marker else { throw corrupt("it does not end with its checksum") }
            let covered = Array(bytes[..<markerStart])
            let recorded = String(decoding: bytes[checksumStart..<(checksumStart + 64)], as: UTF8.self)
            guard recorded == hex(SHA256Hasher.hash(data: covered)) else { throw corrupt("checksum mismatch") }
            guard let body = try? JSONDecoder().decode(Body.self, from: Data(covered + [UInt8(ascii: "}")])), body.format == format else {
                throw corrupt("the checksum matches but the content does not decode")
            }
            if let logID = body.logID, logID.count != 32 || !logID.allSatisfy(\.isHexDigit) { throw corrupt("logID \(logID) is not a log ID") }
            return Loaded(identity: StoreIdentity(replicaID: body.replicaID, logID: body.logID, lineage: body.lineage), format: format)
        default:
            throw StoreError(.corruptIdentity, "\(path): unknown store format \(probe.format) (written by a newer Strata?)")
        }
    }

    /// Reads `store.json` in `directory`; `nil` when there is none.
    static func read(in directory: String) throws -> Loaded? {
        let path = directory + "/" + name
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.corruptIdentity, "\(path) cannot be read")
        }
        return try decode(Array(data), path: path)
    }

    /// Writes `store.json` atomically and durably: temporary file, fsync, rename, fsync of the
    /// directory. The replica ID must never change under a store by accident, nor be lost.
    static func write(_ identity: StoreIdentity, in directory: String) throws {
        let path = directory + "/" + name
        do {
            try FileSystem.writeAtomically(try encode(identity), to: path)
        } catch let error as LogError {
            throw StoreError(.log, "cannot write \(path): \(error)", logError: error)
        }
    }

    private static func hex(_ digest: some Sequence<UInt8>) -> String { Hex.encode(digest) }
}
