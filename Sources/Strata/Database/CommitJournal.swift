import Foundation
import StrataLog
import StrataCore

/// `commit-<id>.journal`, one per multi-zone commit in flight (so that two concurrent commits
/// never overwrite or remove each other's): the parts of a multi-zone commit, written (durably) before the first part
/// is appended to its zone's log and removed once every part is durable. Opening a database with
/// a journal applies each part to its zone's store — a part already there is skipped by event ID
/// — so a crash between two appends leaves every zone with its part, never some only.
///
/// JSON: `{"format": 1, "parts": [{"zone": {"name": …, "owner": …}, "bytes": "<base64 of the
/// encoded transaction>"}]}`.
struct CommitJournal: Codable {
    var format = 1
    var parts: [Part]

    struct Part: Codable {
        var zone: ZoneReference
        var bytes: [UInt8]

        enum CodingKeys: String, CodingKey { case zone, bytes }

        init(zone: ZoneReference, bytes: [UInt8]) {
            self.zone = zone
            self.bytes = bytes
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            zone = try c.decode(ZoneReference.self, forKey: .zone)
            guard let data = Data(base64Encoded: try c.decode(String.self, forKey: .bytes)) else {
                throw DecodingError.dataCorruptedError(forKey: .bytes, in: c, debugDescription: "not base64")
            }
            bytes = Array(data)
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(zone, forKey: .zone)
            try c.encode(Data(bytes).base64EncodedString(), forKey: .bytes)
        }
    }

    init(parts: [Part]) { self.parts = parts }

    /// A new journal's path (its own name: concurrent commits each write one).
    static func newPath(in directory: String) -> String { directory + "/commit-\(UUID().uuidString).journal" }

    /// The journals in the database's directory, in name order.
    static func all(in directory: String) throws -> [String] {
        let names: [String]
        do { names = try FileSystem.list(directory) } catch {
            throw StoreError(.corruptDatabase, "cannot list \(directory): \(error)")
        }
        return names.filter { $0.hasPrefix("commit-") && $0.hasSuffix(".journal") }.sorted().map { directory + "/" + $0 }
    }

    func write(to path: String) throws {
        do {
            try FileSystem.writeAtomically(Array(try JSONEncoder().encode(self)), to: path)
        } catch {
            throw StoreError(.storeFailed, "cannot write \(path) (nothing was committed): \(error)")
        }
    }

    static func read(at path: String) throws -> CommitJournal? {
        let bytes: [UInt8]?
        do { bytes = try FileSystem.read(path) } catch {
            throw StoreError(.corruptDatabase, "cannot read \(path): \(error)")
        }
        guard let bytes else { return nil }
        let journal: CommitJournal
        do {
            journal = try JSONDecoder().decode(CommitJournal.self, from: Data(bytes))
        } catch {
            throw StoreError(.corruptDatabase, "\(path) does not decode: \(error)")
        }
        guard journal.format == 1 else { throw StoreError(.corruptDatabase, "\(path) is of format \(journal.format); this version reads format 1") }
        return journal
    }

    static func remove(at path: String) throws {
        do { try FileSystem.remove(path) } catch {
            throw StoreError(.storeFailed, "cannot remove \(path): \(error)")
        }
    }
}
