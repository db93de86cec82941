import ArgumentParser
import Foundation
import Strata
import StrataProtocol
import StrataServer
import StrataSync

/// `strata zones status [ZONE] --server URL …`: the zone's device registry as its owner sees it —
/// each device's position and lag, pending edits, library, and whether its state matches the
/// zone's (`divergent` ones first).
struct ZonesStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the devices syncing with your zones: where each stands, and which hold a state the zone never had.",
        discussion: """
        After each sync a device reports the digest of its state at its change token; the server \
        compares it with the zone's state at the same position. A device is `consistent` (the \
        same state), `divergent` (another state: run `strata diff STORE --server URL --zone Z` on \
        that device, or on a debug bundle of it, to find where), or `unverified` (not compared: \
        unpushed edits, a download mask, or a position the zone compacted). Lag is how many \
        transactions the zone holds past the device's position.

        Without ZONE, one line per zone you own. With ZONE (yours: only the owner sees a zone's \
        devices), one line per device, divergent ones first. --json prints the server's answer \
        ({epoch, end, divergent, devices: [...]}), or an array of {zone, ...} without ZONE.
        """
    )

    @Argument(help: "The zone (yours): NAME. Without it, every zone you own.")
    var zone: String?

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        if let zone { _ = try zoneReference(zone, owner: nil) }
    }

    struct ZoneStatus: Encodable {
        var zone: String
        var registry: ZoneDevices

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(zone, forKey: .zone)
            try container.encode(registry.epoch, forKey: .epoch)
            try container.encode(registry.end, forKey: .end)
            try container.encode(registry.divergent, forKey: .divergent)
            try container.encode(registry.devices, forKey: .devices)
        }

        enum Keys: String, CodingKey { case zone, epoch, end, divergent, devices }
    }

    func run() async throws {
        if let zone {
            let reference = try zoneReference(zone, owner: nil)
            let registry = try await connection.with("reading the devices of zone \(reference)") { try await $0.devices(reference) }
            if output.json {
                print(try JSONOutput.string(registry))
            } else {
                print(Self.render(reference.description, registry, now: Self.now()))
            }
            return
        }
        let statuses = try await connection.with("reading the devices of your zones") { transport in
            var owned: [DatabaseZone] = []
            var token: String?
            while true {
                let page = try await transport.databaseChanges(after: token, limit: 500, wait: nil)
                owned += page.zones.filter { $0.role == .owner }
                token = page.token
                if !page.moreComing { break }
            }
            var statuses: [ZoneStatus] = []
            for zone in owned.sorted(by: { $0.name < $1.name }) {
                statuses.append(ZoneStatus(zone: zone.name, registry: try await transport.devices(ZoneReference(zone.name))))
            }
            return statuses
        }
        if output.json {
            print(try JSONOutput.string(statuses))
            return
        }
        if statuses.isEmpty { print("no zones") }
        for status in statuses {
            let registry = status.registry
            let behind = registry.devices.filter { $0.position < registry.end }.count
            print("\(status.zone)  end \(registry.end)  \(registry.devices.count) devices  \(registry.divergent) divergent  \(behind) behind")
        }
    }

    static func now() -> UInt64 { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// One zone's devices as text: divergent first, then by last seen, newest first.
    static func render(_ zone: String, _ registry: ZoneDevices, now: UInt64) -> String {
        var lines = ["zone \(registry.owner)/\(registry.name): epoch \(registry.epoch), end \(registry.end), \(registry.devices.count) devices, \(registry.divergent) divergent"]
        if !registry.devices.isEmpty { lines.append("  DEVICE (replica)  USER  STATE  POSITION (LAG: transactions behind the zone's end)  PENDING  LIBRARY  SCHEMA  LAST SEEN") }
        let order: [DeviceStateCheck: Int] = [.divergent: 0, .unverified: 1, .consistent: 2]
        let devices = registry.devices.sorted { (order[$0.check] ?? 3, UInt64.max - $0.lastSeen) < (order[$1.check] ?? 3, UInt64.max - $1.lastSeen) }
        for device in devices {
            let lag = registry.end > device.position ? registry.end - device.position : 0
            var line = "  \(device.replica)  \(device.user)  \(device.check.rawValue)  at \(device.position) (lag \(lag))"
            line += "  pending \(device.pendingTransactions)"
            if device.pendingAssets > 0 { line += " (+\(device.pendingAssets) assets)" }
            line += "  \(device.library)"
            if let version = device.schemaVersion { line += "  schema \(version)" }
            line += "  seen \(ElapsedText.since(device.lastSeen, now: now)) ago"
            lines.append(line)
            if device.check == .divergent {
                // The zone as the device's user names it (another user's zone takes --owner).
                let name = registry.name
                let ownerOption = registry.owner == device.user ? "" : " --owner \(registry.owner)"
                lines.append("    \(device.reason ?? "its state differs from the zone's"): state \((device.digest ?? "?").prefix(12))…, the zone's \((device.zoneDigest ?? "?").prefix(12))…")
                lines.append("    on that device (as \(device.user)): strata diff STORE --server URL --zone \(name)\(ownerOption) --token-file F")
            } else if device.check == .unverified, let reason = device.reason {
                lines.append("    \(reason)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
