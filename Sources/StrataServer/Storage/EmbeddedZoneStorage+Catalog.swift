import Foundation
import StrataCore
public import StrataProtocol
import StrataLog
import Logging

/// The zones' catalog (`zones.json`): create, look up, change and delete zones, and the rules
/// kept of deleted ones.
extension EmbeddedZoneStorage {
    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await createZone(id, access: access, grants: grants, maxZonesPerOwner: nil)
    }

    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant],
                           maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        try await makeZone(id, access: access, grants: grants, maxZonesPerOwner: maxZonesPerOwner, lineage: [], accepted: [])
    }

    private func makeZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant],
                          maxZonesPerOwner: Int?, lineage: [UInt64], accepted: Set<String>) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        guard ZoneInfo.isValidName(id.name) else {
            throw ZoneStorageError(.invalidArgument, "invalid zone name \"\(id.name)\": 1–64 of [A-Za-z0-9._-]")
        }
        guard !id.owner.isEmpty else { throw ZoneStorageError(.invalidArgument, "a zone needs an owner") }
        guard zoneStates[id] == nil else {
            throw ZoneStorageError(.zoneExists, "zone \(id) already exists", zone: id.description)
        }
        // Counted and claimed without a suspension in between: concurrent creates cannot pass the
        // quota together.
        if let limit = maxZonesPerOwner, limit > 0 {
            let owned = zoneStates.keys.reduce(0) { $0 + ($1.owner == id.owner ? 1 : 0) }
            if owned >= limit { throw ZoneStorageError.zonesQuota(owner: id.owner, limit: limit, owned: owned, zone: id) }
        }
        // Zones of different owners may share a name: the epoch keeps their directories apart.
        let taken = Set(zoneStates.values.map { Self.logDirectoryName(for: $0.info) })
        var info = ZoneInfo(name: id.name, owner: id.owner, access: access, grants: grants, epoch: 0)
        info.lineage = lineage
        info.accepted = accepted.filter { grants[$0] != nil }
        while info.epoch == 0 || lineage.contains(info.epoch) || taken.contains(Self.logDirectoryName(for: info)) { info.epoch = options.makeEpoch() }
        let path = Self.logDirectory(in: directory, for: info)
        try DurableFile.removeTree(path)
        let log: SegmentLog
        do {
            var logOptions = options.log
            logOptions.create = true
            log = try SegmentLog.open(at: path, options: logOptions)
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "cannot create the log of zone \(id) at \(path): \(error)", zone: id.description)
        }
        zoneStates[id] = ZoneState(info: info, log: log, ledgers: [:], chain: HistoryChain(), storedBytes: Self.measure(log))
        // The zone has its own rules now: what was kept of a deleted one is forgotten.
        let forgotten = keptRules.removeValue(forKey: id)
        do {
            try writeCatalog()
        } catch {
            zoneStates[id] = nil
            keptRules[id] = forgotten
            try? await log.close()
            try? DurableFile.removeTree(path)
            throw error
        }
        usage[id.owner, default: 0] += zoneStates[id]?.storedBytes ?? 0
        database.members(of: id, from: [], to: info.members)
        database.touch(id)
        logger.info("zone created", metadata: ["zone": "\(id)", "access": "\(access.rawValue)"])
        return info
    }

    /// Creates the zone with the rules `settings` names and, for the rest, those kept of the
    /// deleted zone (see ``ZoneStorage/createZone(_:settings:maxZonesPerOwner:)``). Atomic: the
    /// actor does not suspend between reading the kept rules and the create, which forgets them.
    public func createZone(_ id: ZoneID, settings: ZoneSettings, maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        let kept = keptRules[id]
        let (access, grants) = Self.rules(settings, keeping: kept?.settings)
        let lineage = ZoneInfo.lineage(continuing: settings.continues, kept: kept.flatMap { kept in kept.epoch.map { ($0, kept.lineage ?? []) } })
        // Grantees kept through the deletion keep their acceptance; grants the settings name are new.
        let accepted: Set<String> = settings.grants == nil ? kept.map { Set($0.accepted ?? Array($0.grants.keys)) } ?? [] : []
        return try await makeZone(id, access: access, grants: grants, maxZonesPerOwner: maxZonesPerOwner, lineage: lineage, accepted: accepted)
    }

    public func deletedZoneRules(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneSettings? {
        try checkOpen()
        return keptRules[id]?.settings
    }

    public func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? {
        try checkOpen()
        return zoneStates[id]?.info
    }

    public func zones() async throws(ZoneStorageError) -> [ZoneInfo] {
        try checkOpen()
        return zoneStates.values.map(\.info).sorted { $0.id < $1.id }
    }

    /// Changes a zone's description with `change` and writes the catalog; the zone stays as it
    /// was when the write fails. The description before and after.
    private func changingZone(_ id: ZoneID, _ change: (inout ZoneInfo) -> Void) throws(ZoneStorageError) -> (previous: ZoneInfo, now: ZoneInfo) {
        try checkOpen()
        guard var state = zoneStates[id] else { throw Self.notFound(id) }
        let previous = state.info
        change(&state.info)
        zoneStates[id] = state
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = previous
            throw error
        }
        return (previous, state.info)
    }

    public func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        let (previous, info) = try changingZone(id) { info in
            let accepted = info.acceptedKept(under: grants)
            info.access = access
            info.grants = grants
            info.accepted = accepted
        }
        // Those who lost the zone (a grant taken, the zone made private) are told, then everyone
        // who keeps it sees the change.
        let lost = previous.members.subtracting(info.members)
        if !lost.isEmpty { database.remove(id, from: lost, .revoked) }
        database.members(of: id, from: previous.members, to: info.members)
        database.touch(id)
        logger.info("zone updated", metadata: ["zone": "\(id)", "access": "\(access.rawValue)"])
        return info
    }

    public func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo {
        let info = try changingZone(id) { $0.minSchemaVersion = version }.now
        logger.info("zone updated", metadata: ["zone": "\(id)", "minSchemaVersion": "\(version)"])
        return info
    }

    public func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) {
        try checkOpen()
        guard let state = zoneStates[id] else { throw Self.notFound(id) }
        zoneStates[id] = nil
        // Its rules are kept for a recreation (the defaults need no keeping), in the same catalog
        // write that deletes it; beyond the per-owner limit the oldest kept are dropped.
        let keptBefore = keptRules
        keptRules[id] = nil
        // Kept whatever the rules: the life's epoch and lineage are for a recreation that
        // continues it.
        let order = (keptRules.values.map(\.order).max() ?? 0) + 1
        keptRules[id] = KeptRules(owner: id.owner, name: id.name, access: state.info.access, grants: state.info.grants, order: order,
                                  epoch: state.info.epoch, lineage: state.info.lineage,
                                  accepted: state.info.grants.isEmpty ? nil : state.info.accepted.intersection(state.info.grants.keys).sorted())
        let owners = keptRules.values.filter { $0.owner == id.owner }.sorted { $0.order < $1.order }
        for dropped in owners.dropLast(Self.keptDeletedZoneRulesPerOwner) { keptRules[dropped.id] = nil }
        do {
            try writeCatalog()
        } catch {
            zoneStates[id] = state
            keptRules = keptBefore
            throw error
        }
        usage[id.owner, default: 0] -= state.storedBytes
        deviceRegistries[id] = nil
        database.remove(id, from: state.info.members, .deleted)
        database.members(of: id, from: state.info.members, to: [])
        // Its links to assets go with it (a crash before this: removed on the next open).
        try? assets.removeZone(state.info)
        // The zone is gone from the catalog: whatever happens below, it is deleted (a directory
        // left behind is removed on the next open).
        try? await state.log.close()
        do {
            try DurableFile.removeTree(Self.logDirectory(in: directory, for: state.info))
        } catch {
            logger.warning("could not remove a deleted zone's log; it is removed on the next open", metadata: [
                "zone": "\(id)", "error": "\(error)",
            ])
        }
        logger.info("zone deleted", metadata: ["zone": "\(id)"])
    }

    func writeCatalog() throws(ZoneStorageError) {
        let deleted = keptRules.values.sorted { $0.order < $1.order }
        let catalog = Catalog(formatVersion: Self.catalogVersion, zones: zoneStates.values.map(\.info).sorted { $0.id < $1.id },
                              deleted: deleted.isEmpty ? nil : deleted)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(catalog)
        } catch {
            throw ZoneStorageError(.storageFailure, "cannot encode the zone catalog: \(error)")
        }
        try DurableFile.writeAtomically(Array(data), to: DurableFile.join(directory, "zones.json"))
    }
}
