import Foundation
import StrataLog
import StrataCore

/// `database.json`: which zones a database holds and where, its default zone, and the zones it
/// set aside when access to them was lost.
///
/// ```json
/// {"format": 1, "defaultZone": {"name": "default"},
///  "zones": [{"zone": {"name": "default"}, "directory": "zones/own/default"}],
///  "lost": [{"zone": {"name": "list", "owner": "bob"}, "directory": "lost/1732650000000-list@bob",
///            "reason": "revoked", "at": 1732650000000, "unpushedEdits": 2}]}
/// ```
///
/// Replaced atomically (temporary file, fsync, rename, fsync of the directory) on every change.
/// Read strictly: an unknown format, a zone name a server would refuse, or a directory other
/// than the one the zone's name gives (a hand edit pointing outside the database) is
/// `corruptDatabase`, naming the file.
struct DatabaseManifest: Codable, Equatable {
    var format = 1
    var defaultZone: ZoneReference
    var zones: [Entry] = []
    var lost: [LostZone] = []

    struct Entry: Codable, Equatable {
        var zone: ZoneReference
        var directory: String
    }

    static let fileName = "database.json"

    static func path(in directory: String) -> String { directory + "/" + fileName }

    /// The manifest in `directory`, or `nil` when there is none (a new database).
    static func read(in directory: String) throws -> DatabaseManifest? {
        let path = path(in: directory)
        let bytes: [UInt8]?
        do {
            bytes = try FileSystem.read(path)
        } catch {
            throw StoreError(.corruptDatabase, "cannot read \(path): \(error)")
        }
        guard let bytes else { return nil }
        let manifest: DatabaseManifest
        do {
            manifest = try JSONDecoder().decode(DatabaseManifest.self, from: Data(bytes))
        } catch {
            throw StoreError(.corruptDatabase, "\(path) does not decode: \(error)")
        }
        guard manifest.format == 1 else {
            throw StoreError(.corruptDatabase, "\(path) is of format \(manifest.format); this version reads format 1")
        }
        var seen = Set<ZoneReference>()
        for entry in manifest.zones {
            do { try entry.zone.validate() } catch let error as StoreError {
                throw StoreError(.corruptDatabase, "\(path): \(error.message)")
            }
            guard entry.directory == entry.zone.relativeDirectory else {
                throw StoreError(.corruptDatabase, "\(path): zone \(entry.zone) is in \"\(entry.directory)\", not in \(entry.zone.relativeDirectory)")
            }
            guard seen.insert(entry.zone).inserted else {
                throw StoreError(.corruptDatabase, "\(path): zone \(entry.zone) is listed twice")
            }
        }
        for lost in manifest.lost {
            do { try lost.zone.validate() } catch let error as StoreError {
                throw StoreError(.corruptDatabase, "\(path): lost zone: \(error.message)")
            }
            let parts = lost.directory.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == "lost", !parts[1].isEmpty, parts[1] != ".", parts[1] != ".." else {
                throw StoreError(.corruptDatabase, "\(path): the lost zone \(lost.zone) is kept in \"\(lost.directory)\", outside lost/")
            }
        }
        do { try manifest.defaultZone.validate() } catch let error as StoreError {
            throw StoreError(.corruptDatabase, "\(path): default zone: \(error.message)")
        }
        return manifest
    }

    func write(in directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do {
            try FileSystem.writeAtomically(Array(try encoder.encode(self)), to: Self.path(in: directory))
        } catch {
            throw StoreError(.storeFailed, "cannot save \(Self.path(in: directory)): \(error)")
        }
    }
}

/// A zone a database set aside when access to it was lost (a grant revoked, the zone deleted):
/// its store, with every edit not yet pushed, is kept in `directory` (relative to the database)
/// until the app discards it.
public struct LostZone: Sendable, Hashable, Codable {
    public var zone: ZoneReference
    /// The kept store's directory, relative to the database's.
    public var directory: String
    public var reason: Reason
    /// When it was set aside (milliseconds since 1970).
    public var at: UInt64
    /// The local transactions (edits of objects) that no server had acknowledged: they stay in
    /// the kept store's log.
    public var unpushedEdits: Int
}

extension LostZone {
/// Why a zone left a database.
public enum Reason: String, Sendable, Hashable, Codable {
    /// The zone's owner took back the caller's grant (or narrowed its access).
    case revoked
    /// The zone was deleted on the server.
    case deleted
    /// The app removed it (stopped syncing it).
    case removedByApp
    /// The user left the share (the sync engine's `leave`): their grant is gone by their own
    /// choice, which other devices of theirs learn as `revoked`.
    case left
    /// Not lost: the zone stays in the database, downloaded again because its download mask
    /// changed (``Database/emptyZone(_:)``); this is the store as it was, kept with what it
    /// held that no server has (local-only values) until the app discards it.
    case redownloaded
}
}
