import Foundation
import Logging
import StrataCore
public import StrataProtocol

/// The device registry of the embedded storage: one `devices.json` per zone, beside its log (so
/// that deleting the zone deletes it, and a zone in a new life starts without one), read on first
/// use and replaced atomically on every report.
///
/// `devices.json`: `{"format": 1, "devices": [DeviceEntry…]}` (the wire's `DeviceEntry`). The
/// registry is a diagnostic record, not acknowledged data: a file that does not read is set aside
/// as `devices.json.damaged` (with a warning) and the registry starts empty, rather than refuse
/// every later report.
extension EmbeddedZoneStorage {
    struct DeviceRegistryFile: Codable {
        var format: Int
        var devices: [DeviceEntry]
    }

    static let devicesFileName = "devices.json"

    /// A device as the registry keys it: by reporting user and replica, so that a report under
    /// someone else's replica ID is that user's entry and never replaces (or blocks) the owner's.
    struct DeviceKey: Hashable {
        var user: String
        var replica: ReplicaID
    }

    public func devices(zone id: ZoneID) async throws(ZoneStorageError) -> [DeviceEntry] {
        try checkOpen()
        guard let state = zoneStates[id] else { throw Self.notFound(id) }
        return Array(try registry(of: state.info).values)
    }

    public func recordDevice(_ entry: DeviceEntry, zone id: ZoneID, epoch: UInt64, maxPerUser: Int) async throws(ZoneStorageError) {
        try checkOpen()
        guard let state = zoneStates[id] else { throw Self.notFound(id) }
        guard state.info.epoch == epoch else {
            throw ZoneStorageError(.zoneReset, "zone \(id) was deleted and created again since the report's token", zone: id.description)
        }
        guard let replica = ReplicaID(entry.replica) else {
            throw ZoneStorageError(.invalidArgument, "\"\(entry.replica.prefix(64))\" is not a replica ID", zone: id.description)
        }
        var devices = try registry(of: state.info)
        devices[DeviceKey(user: entry.user, replica: replica)] = entry
        let own = devices.filter { $0.key.user == entry.user }.sorted { ($0.value.lastSeen, $0.key.replica) > ($1.value.lastSeen, $1.key.replica) }
        for (dropped, _) in own.dropFirst(max(1, maxPerUser)) where dropped.replica != replica { devices[dropped] = nil }
        // Not seen for too long, or beyond the zone's bound: the least recently seen go.
        devices = devices.filter { $0.value.lastSeen + DeviceRegistryBounds.expiry > entry.lastSeen }
        devices[DeviceKey(user: entry.user, replica: replica)] = entry
        if devices.count > DeviceRegistryBounds.maxPerZone {
            let oldest = devices.sorted { ($0.value.lastSeen, $0.key.replica) > ($1.value.lastSeen, $1.key.replica) }.dropFirst(DeviceRegistryBounds.maxPerZone)
            for (dropped, _) in oldest where dropped != DeviceKey(user: entry.user, replica: replica) { devices[dropped] = nil }
        }
        let file = DeviceRegistryFile(format: 1, devices: devices.values.sorted { ($0.user, $0.replica) < ($1.user, $1.replica) })
        let bytes: Data
        do {
            bytes = try JSONEncoder().encode(file)
        } catch {
            throw ZoneStorageError(.storageFailure, "cannot encode the device registry of zone \(id): \(error)", zone: id.description)
        }
        try DurableFile.writeAtomically(Array(bytes), to: DurableFile.join(Self.logDirectory(in: directory, for: state.info), Self.devicesFileName))
        deviceRegistries[id] = (state.info.epoch, devices)
    }

    public func divergentDeviceCount() async throws(ZoneStorageError) -> Int {
        try checkOpen()
        var count = 0
        for state in zoneStates.values {
            count += try registry(of: state.info).values.filter { $0.check == .divergent }.count
        }
        return count
    }

    /// The zone's registry, read from its file on first use in the zone's life.
    private func registry(of info: ZoneInfo) throws(ZoneStorageError) -> [DeviceKey: DeviceEntry] {
        if let kept = deviceRegistries[info.id], kept.epoch == info.epoch { return kept.devices }
        let path = DurableFile.join(Self.logDirectory(in: directory, for: info), Self.devicesFileName)
        var devices: [DeviceKey: DeviceEntry] = [:]
        if let bytes = try DurableFile.read(path) {
            if let file = try? JSONDecoder().decode(DeviceRegistryFile.self, from: Data(bytes)), file.format == 1 {
                for entry in file.devices {
                    if let replica = ReplicaID(entry.replica) { devices[DeviceKey(user: entry.user, replica: replica)] = entry }
                }
            } else {
                logger.warning("a zone's device registry does not read; set aside, the registry starts empty", metadata: [
                    "zone": "\(info.id)", "path": "\(path)",
                ])
                _ = rename(path, path + ".damaged")
            }
        }
        deviceRegistries[info.id] = (info.epoch, devices)
        return devices
    }
}
