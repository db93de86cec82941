import Foundation
import StrataLog
import StrataCore
import Synchronization

/// The download mask each sync engine of a store downloads its zone with, kept by the store
/// itself: what the store holds of the zone is what that mask let in. It outlives the engine's
/// cursor (a damaged or missing cursor does not make the store forget what it lacks), and the
/// store refuses writes that would put defaults in place of what it never downloaded (moving an
/// object with masked attributes to another zone).
///
/// Kept in `download-masks.json` — `{"format": 1, "masks": {"<sync engine key>": "<mask>"}}`,
/// the key as the engine's pin (`sync-pins.json`), the mask in `DownloadMask`'s text form (empty:
/// none) — replaced atomically when a mask is recorded. Unlike the pins it is not bound to the
/// replica: a fork changes who authors, not what the store holds.
struct DownloadMasks: Codable, Equatable {
    var format = 1
    var masks: [String: String] = [:]

    static let fileName = "download-masks.json"

    /// What `directory` holds; `nil` when the file is missing, and `.unreadable` when it is damaged.
    static func load(in directory: String) -> DownloadMasks? {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName) else { return nil }
        guard let masks = try? JSONDecoder().decode(DownloadMasks.self, from: data), masks.format == 1 else { return .unreadable }
        return masks
    }

    /// A damaged file: every engine's mask is unknown, and the store acts as if everything were
    /// masked (no move out of it, no engine syncs it): its zone is downloaded again into a new
    /// store (a database's engine does it).
    static let unreadable = DownloadMasks(format: 0)

    func save(in directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try FileSystem.writeAtomically(Array(try encoder.encode(DownloadMasks(masks: masks))), to: directory + "/" + Self.fileName)
    }

    /// What the store lacks: the union of the recorded masks; `nil` (unknown) when the file is
    /// damaged or a recorded mask does not read.
    var union: DownloadMask? {
        guard format == 1 else { return nil }
        var entities = Set<String>()
        var attributes: [String: Set<String>] = [:]
        for text in masks.values {
            guard let mask = try? DownloadMask(parsing: text) else { return nil }
            entities.formUnion(mask.entities)
            for (entity, names) in mask.attributes { attributes[entity, default: []].formUnion(names) }
        }
        return try? DownloadMask(entities: entities, attributes: attributes)
    }
}

extension Store {
    /// The download mask the sync engine named `key` recorded (its text form; empty: none), or
    /// `nil` when none was recorded (or the file is damaged).
    @_spi(StrataInternals)
    public func downloadMask(for key: String) -> String? {
        core.withLock { $0.downloadMasks.format == 1 ? $0.downloadMasks.masks[key] : nil }
    }

    /// Records the download mask the sync engine named `key` downloads with (`SyncEngine` calls
    /// it before its first pull). Written to `download-masks.json` at once.
    @_spi(StrataInternals)
    public func recordDownloadMask(_ text: String, for key: String) throws {
        try core.withLock { core in
            var next = core.downloadMasks.format == 1 ? core.downloadMasks : DownloadMasks()
            guard next.masks[key] != text || core.downloadMasks.format != 1 else { return }
            next.masks[key] = text
            do {
                try next.save(in: directory)
            } catch {
                throw StoreError(.storeFailed, "cannot save \(DownloadMasks.fileName) in \(directory): \(error)")
            }
            core.downloadMasks = next
        }
    }

    /// Whether `download-masks.json` is damaged: what each engine downloaded with is unknown.
    @_spi(StrataInternals)
    public var downloadMasksAreDamaged: Bool { core.withLock { $0.downloadMasks.format != 1 } }

    /// What this store does not hold of its zone: the union of its sync engines' download masks
    /// (empty when it syncs unmasked, or never synced).
    ///
    /// - Throws: `StoreError` `storeFailed` when the record is damaged and what the store
    ///   lacks is unknown.
    public var downloadMask: DownloadMask {
        get throws {
            guard let union = core.withLock({ $0.downloadMasks.union }) else {
                throw StoreError(.storeFailed, "\(directory)/\(DownloadMasks.fileName) is damaged: which download masks the store was synced with is unknown")
            }
            return union
        }
    }
}
