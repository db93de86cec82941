import Foundation
import StrataLog
import StrataCore
import Synchronization

extension Database {
    /// Takes a zone out of the database: its objects leave every read and observed query, the
    /// other zones are untouched, and its store — with every edit no server acknowledged — is kept
    /// aside in `lost/` (``lostZones``) until ``discardLostZone(_:)``. The hook set with
    /// ``whenRemovingZone(_:)`` runs first, with the store still open, so the app can copy what
    /// it wants to keep — into another zone too: the hook may add zones and change the default
    /// zone (only this zone cannot become the default, nor be removed again, while it runs). Observers get ``DatabaseChange/Kind/zoneRemoved(_:)``.
    ///
    /// A sync engine calls it when the server says access was lost (`revoked`, `deleted`); an app
    /// calls it to stop holding a zone (`removedByApp`).
    ///
    /// - Throws: `unknownZone`; `invalidArgument` for the default zone (make another zone the
    ///   default first: ``setDefaultZone(_:)``).
    @discardableResult
    public func removeZone(_ zone: ZoneReference, reason: LostZone.Reason) async throws -> LostZone {
        await membership.enter()
        let store: Store
        let hook: (@Sendable (ZoneReference, Store) async -> Void)?
        do {
            (store, hook) = try state.withLock { state -> (Store, (@Sendable (ZoneReference, Store) async -> Void)?) in
                let store = try Self.removableStore(zone, in: state)
                state.removing.insert(zone)
                return (store, state.willRemoveZone)
            }
        } catch {
            membership.leave()
            throw error
        }
        membership.leave()
        // The hook runs outside `membership`: keeping a copy may mean adding a zone to copy into
        // or making another zone the default, which take `membership` themselves (inside it, the
        // hook would wait for itself). The zone is marked as being removed meanwhile, so neither
        // another removal nor setDefaultZone can take it.
        await hook?(zone, store)
        await membership.enter()
        defer { membership.leave() }
        defer { state.withLock { _ = $0.removing.remove(zone) } }
        try state.withLock { state in
            if state.closed { throw StoreError(.storeFailed, "the database was closed while zone \(zone) was being removed") }
        }
        // What no server acknowledged stays in the kept store's log; counted for the app.
        let acknowledged = store.core.withLock { core in
            core.syncPins.replica == core.replica ? core.syncPins.acknowledgedByAll : 0
        }
        let unpushed = (try? await BlockingIO.run { try store.unpushedEdits(after: acknowledged) })?.count ?? 0
        let at = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        let keptName = "lost/\(at)-\(zone.relativeDirectory.split(separator: "/").dropFirst().joined(separator: "@"))"
        let lost = LostZone(zone: zone, directory: keptName, reason: reason, at: at, unpushedEdits: unpushed)
        let forwarder = try state.withLock { state -> Task<Void, Never>? in
            var manifest = state.manifest
            manifest.zones.removeAll { $0.zone == zone }
            manifest.lost.append(lost)
            // The manifest first: a crash before the move below is finished on the next open.
            try manifest.write(in: directory)
            state.manifest = manifest
            state.stores[zone] = nil
            return state.forwarders.removeValue(forKey: zone)
        }
        forwarder?.cancel()
        try? await store.close()
        try Self.finishSettingAside(lost, database: directory)
        deliver(DatabaseChange(zone: zone, kind: .zoneRemoved(lost)))
        return lost
    }

    /// Empties a zone's store, so that the next sync downloads the zone again from the server —
    /// what a sync engine does when the zone's download mask changed (the store holds what the
    /// old mask let in, and lacks what the new one lets in). The zone stays in the database (the
    /// default zone too); its objects leave every read until the sync, and observers get
    /// ``DatabaseChange/Kind/zoneEmptied``. The store as it was is kept in ``lostZones``
    /// (reason `redownloaded`), with what no server has (local-only values), until
    /// ``discardLostZone(_:)``.
    ///
    /// Only a store whose every edit a server acknowledged is emptied: the check is made after
    /// the store is closed, so no commit can land after it.
    ///
    /// - Throws: `unknownZone`; `invalidArgument` when the store holds edits no server
    ///   acknowledged (sync the zone first; the store is kept as it was) or its removal's hook runs.
    @discardableResult
    public func emptyZone(_ zone: ZoneReference) async throws -> LostZone {
        await membership.enter()
        defer { membership.leave() }
        let (store, forwarder) = try state.withLock { state -> (Store, Task<Void, Never>?) in
            if state.closed { throw StoreError(.storeFailed, "the database is closed") }
            guard let store = state.stores[zone] else { throw StoreError(.unknownZone, "the database holds no zone \(zone)") }
            guard !state.removing.contains(zone) else { throw StoreError(.invalidArgument, "zone \(zone) is being removed") }
            // Out of the database first: new transactions cannot reach it, and one in flight
            // finds it closed below (and fails, so nothing it wrote is taken for kept).
            state.stores[zone] = nil
            return (store, state.forwarders.removeValue(forKey: zone))
        }
        forwarder?.cancel()
        let path = directory + "/" + zone.relativeDirectory
        // Puts the store back when it cannot be emptied (nothing changed on disk).
        func restore(_ error: StoreError) async throws -> Never {
            let reopened = try await Self.openZoneStore(path, zone: zone, schema: schema, options: options)
            let closed = state.withLock { state -> Bool in
                if state.closed { return true }
                state.stores[zone] = reopened
                return false
            }
            if closed { try? await reopened.close() } else { forwardChanges(of: reopened, zone: zone) }
            throw error
        }
        try? await store.close()
        // Counted on the closed store's files, so that no commit can come after the count.
        let closed = try await Self.openZoneStore(path, zone: zone, schema: schema, options: options)
        let acknowledged = closed.core.withLock { core in
            core.syncPins.replica == core.replica ? core.syncPins.acknowledgedByAll : 0
        }
        let unpushed = (try? await BlockingIO.run { try closed.unpushedEdits(after: acknowledged) })?.count
        try? await closed.close()
        guard unpushed == 0 else {
            try await restore(StoreError(.invalidArgument, "zone \(zone) holds \(unpushed.map(String.init) ?? "an unknown number of") edits no server acknowledged: sync the zone before emptying it"))
        }
        // Set aside as a lost zone is (the manifest first: a crash before the move is finished
        // on the next open, and the zone's store then opens empty), while the zone stays.
        let at = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        let keptName = "lost/\(at)-\(zone.relativeDirectory.split(separator: "/").dropFirst().joined(separator: "@"))"
        let kept = LostZone(zone: zone, directory: keptName, reason: .redownloaded, at: at, unpushedEdits: 0)
        do {
            try state.withLock { state in
                var manifest = state.manifest
                manifest.lost.append(kept)
                try manifest.write(in: directory)
                state.manifest = manifest
            }
            try Self.finishSettingAside(kept, database: directory)
        } catch let error as StoreError {
            // Not set aside: the record goes too, or the next open would set the zone's live
            // store aside.
            try? state.withLock { state in
                var manifest = state.manifest
                manifest.lost.removeAll { $0 == kept }
                try manifest.write(in: directory)
                state.manifest = manifest
            }
            try await restore(error)
        }
        let fresh = try await Self.openZoneStore(path, zone: zone, schema: schema, options: options)
        // Closed meanwhile (the app signed out, say): the fresh store is closed too, not left open.
        let databaseClosed = state.withLock { state -> Bool in
            if state.closed { return true }
            state.stores[zone] = fresh
            return false
        }
        if databaseClosed {
            try? await fresh.close()
            throw StoreError(.storeFailed, "the database was closed while zone \(zone) was being emptied; it opens empty")
        }
        forwardChanges(of: fresh, zone: zone)
        deliver(DatabaseChange(zone: zone, kind: .zoneEmptied))
        return kept
    }

    /// The store of `zone`, or why it cannot be removed now.
    static func removableStore(_ zone: ZoneReference, in state: DatabaseState) throws -> Store {
        if state.closed { throw StoreError(.storeFailed, "the database is closed") }
        guard let store = state.stores[zone] else { throw StoreError(.unknownZone, "the database holds no zone \(zone)") }
        guard !state.removing.contains(zone) else {
            throw StoreError(.invalidArgument, "zone \(zone) is already being removed (its whenRemovingZone hook is running)")
        }
        guard zone != state.manifest.defaultZone else {
            throw StoreError(.invalidArgument, "zone \(zone) is the database's default zone: make another zone the default (setDefaultZone) before removing it")
        }
        return store
    }

    /// Makes `zone` (a zone the database holds) the one inserts go to when they name none — for
    /// example before removing the default zone, or when the default zone was deleted on the
    /// server. Written to `database.json` at once.
    ///
    /// - Throws: `unknownZone` when the database holds no such zone.
    public func setDefaultZone(_ zone: ZoneReference) async throws {
        await membership.enter()
        defer { membership.leave() }
        try state.withLock { state in
            if state.closed { throw StoreError(.storeFailed, "the database is closed") }
            guard state.stores[zone] != nil else { throw StoreError(.unknownZone, "the database holds no zone \(zone)") }
            guard !state.removing.contains(zone) else {
                throw StoreError(.invalidArgument, "zone \(zone) is being removed: it cannot become the default zone")
            }
            guard zone != state.manifest.defaultZone else { return }
            var manifest = state.manifest
            manifest.defaultZone = zone
            try manifest.write(in: directory)
            state.manifest = manifest
        }
    }

    /// Deletes the kept store of a lost zone and forgets it.
    public func discardLostZone(_ lost: LostZone) async throws {
        await membership.enter()
        defer { membership.leave() }
        try state.withLock { state in
            var manifest = state.manifest
            guard let index = manifest.lost.firstIndex(of: lost) else {
                throw StoreError(.unknownZone, "the database kept no lost zone \(lost.zone) in \(lost.directory)")
            }
            manifest.lost.remove(at: index)
            try manifest.write(in: directory)
            state.manifest = manifest
        }
        do {
            try FileSystem.removeTree(directory + "/" + lost.directory)
        } catch {
            throw StoreError(.storeFailed, "cannot remove \(directory)/\(lost.directory): \(error)")
        }
    }

    /// Moves a lost zone's store from its zone directory to its place in `lost/` (when it is
    /// not there yet: a crash can come between the manifest and the move).
    static func finishSettingAside(_ lost: LostZone, database: String) throws {
        let from = database + "/" + lost.zone.relativeDirectory
        let to = database + "/" + lost.directory
        guard FileSystem.exists(from), !FileSystem.exists(to) else { return }
        do {
            try FileSystem.makeDirectory(database + "/lost")
            try FileManager.default.moveItem(atPath: from, toPath: to)
            try FileSystem.syncDirectory(database + "/lost")
            try FileSystem.syncDirectory(FileSystem.parentPath(from))
        } catch {
            throw StoreError(.storeFailed, "cannot set zone \(lost.zone) aside in \(to): \(error)")
        }
    }
}

extension Database {
    /// Whether the zone's store holds local transactions that the sync engine of the zone has not
    /// had acknowledged (every own transaction when it never synced): what a sync must push.
    @_spi(StrataInternals)
    public func hasUnpushedEdits(in zone: ZoneReference) throws -> Bool {
        guard let store = store(for: zone) else { throw StoreError(.unknownZone, "the database holds no zone \(zone)") }
        let acknowledged = store.core.withLock { core in
            core.syncPins.replica == core.replica ? core.syncPins.acknowledgedByAll : 0
        }
        return try !store.unpushedEdits(after: acknowledged).isEmpty
    }
}
