import Foundation
import StrataLog
import Strata

/// `database-sync.json` in a database's directory: the database token of the server's last
/// answer, and the zones that answer named that have not synced since (a sync that failed part
/// way tries them again, although the token has moved past their change).
///
/// `{"format": 1, "server": "<url>", "token": "…", "user": "…", "dirty": [{"name": …, "owner": …}]}`. A file
/// that does not decode, or of another server, is ignored: the next sync asks for every zone (a
/// reset), which costs one listing and loses nothing.
struct DatabaseSyncState: Codable, Equatable {
    var format = 1
    var server: String
    var token: String?
    /// The user's name as the server gives it to their own zones (learned from its answers).
    var user: String?
    var dirty: [ZoneReference] = []

    static let fileName = "database-sync.json"

    static func load(in directory: String, server: String) -> DatabaseSyncState {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
              let state = try? JSONDecoder().decode(DatabaseSyncState.self, from: data),
              state.format == 1, state.server == server,
              state.dirty.allSatisfy({ ZoneReference.isValidName($0.name) && ($0.owner.map(ZoneReference.isValidOwner) ?? true) }) else {
            return DatabaseSyncState(server: server)
        }
        return state
    }

    func save(in directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try FileSystem.writeAtomically(Array(try encoder.encode(self)), to: directory + "/" + Self.fileName)
        } catch {
            throw SyncError(.store, "cannot save \(directory)/\(Self.fileName): \(error)")
        }
    }
}
