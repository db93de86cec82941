import Foundation
import Strata

/// How far a store has synced with one zone: the last change token it applied, and the highest
/// of its own sequences the server has acknowledged. Kept in `sync-<zone>.json` in the store's
/// directory, replaced atomically (temporary file, fsync, rename) after every step, so a restart
/// resumes with nothing lost and nothing applied twice.
public struct SyncCursor: Codable, Sendable, Hashable {
    public var token: String?
    public var acknowledged: UInt64

    public init(token: String? = nil, acknowledged: UInt64 = 0) {
        self.token = token
        self.acknowledged = acknowledged
    }

    static func path(store: Store, zone: String) -> String {
        store.directory + "/sync-\(zone).json"
    }

    static func load(store: Store, zone: String) throws -> SyncCursor {
        let path = path(store: store, zone: zone)
        guard FileManager.default.fileExists(atPath: path) else { return SyncCursor() }
        guard let data = FileManager.default.contents(atPath: path),
              let cursor = try? JSONDecoder().decode(SyncCursor.self, from: data) else {
            throw SyncError(.store, "the sync cursor \(path) is damaged")
        }
        return cursor
    }

    func save(store: Store, zone: String) throws {
        let path = Self.path(store: store, zone: zone)
        let temporary = path + ".tmp"
        do {
            try JSONEncoder().encode(self).write(to: URL(fileURLWithPath: temporary))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            try handle.synchronize()
            try handle.close()
            guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            throw SyncError(.store, "cannot save the sync cursor \(path): \(error)")
        }
    }
}
