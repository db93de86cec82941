import Foundation
import StrataLog
import Synchronization
import StrataCore

/// How far each sync engine of a store has had the store's own transactions acknowledged, so
/// that compaction keeps in the log what some engine has yet to push (the push path reads them
/// from there). One pin per engine (a zone, say), of the store's current replica; a fork, which
/// starts a new replica, makes every pin void.
///
/// Kept in `sync-pins.json` in the store's directory — `{"format": 1, "replica": "<uuid>",
/// "pins": {"<key>": <sequence>}}` — replaced atomically (temporary file, fsync, rename, fsync of
/// the directory) when a pin moves. A store without pins (it never synced, or its file is
/// unreadable) compacts as before: everything the snapshot covers may be retired.
struct SyncPins: Codable, Equatable {
    var format = 1
    var replica: ReplicaID?
    var pins: [String: UInt64] = [:]

    static let fileName = "sync-pins.json"

    /// The pins of `replica` read from `directory` (none when the file is missing, damaged or of
    /// another replica).
    static func load(in directory: String, replica: ReplicaID) -> SyncPins {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
              let pins = try? JSONDecoder().decode(SyncPins.self, from: data), pins.format == 1, pins.replica == replica else {
            return SyncPins(replica: replica)
        }
        return pins
    }

    func save(in directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try FileSystem.writeAtomically(Array(try encoder.encode(self)), to: directory + "/" + Self.fileName)
    }

    /// The highest own sequence every engine has had acknowledged (0 without a pin).
    var acknowledgedByAll: UInt64 { pins.values.min() ?? 0 }
}

extension Store {
    /// Tells the store how far the sync engine named `key` has had this store's transactions
    /// acknowledged by its server, so that compaction keeps in the log every transaction some
    /// engine has not pushed yet. `SyncEngine` calls it; the pin is of the current replica.
    @_spi(StrataInternals)
    public func pinUnpushed(_ key: String, acknowledged: UInt64) throws {
        let (pins, changed) = core.withLock { core -> (SyncPins, Bool) in
            if core.syncPins.replica != core.replica { core.syncPins = SyncPins(replica: core.replica) }
            guard core.syncPins.pins[key] != acknowledged else { return (core.syncPins, false) }
            core.syncPins.pins[key] = acknowledged
            core.own.drop(acknowledgedThrough: core.syncPins.acknowledgedByAll)
            return (core.syncPins, true)
        }
        if changed {
            do {
                try pins.save(in: directory)
            } catch {
                throw StoreError(.storeFailed, "cannot save \(SyncPins.fileName) in \(directory): \(error)")
            }
        }
    }

    /// The first log position holding a transaction of the current replica that some sync engine
    /// has not had acknowledged (`nil` when there is none): compaction retires nothing from
    /// there on. Without a pin, nothing is kept — unless `keepingUnpinned` (automatic
    /// compaction): then every own transaction counts as unpushed, since a store that has not
    /// synced yet may still.
    func firstUnpushedPosition(keepingUnpinned: Bool = false) throws -> UInt64? {
        let (replica, pins, retains) = core.withLock { ($0.replica, $0.syncPins, $0.retainsUnpushed) }
        guard retains else { return nil }
        let acknowledged: UInt64
        if pins.replica == replica, !pins.pins.isEmpty {
            acknowledged = pins.acknowledgedByAll
        } else if keepingUnpinned {
            acknowledged = 0
        } else {
            return nil
        }
        return try firstOwnTransaction(after: acknowledged, before: log.nextPosition)?.position
    }
}
