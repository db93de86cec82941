import Foundation
import Strata
public import StrataProtocol

/// The database-wide and sharing endpoints: which zones changed, a zone's description and
/// settings, accepting and leaving shares; and the zone's device registry.
extension HTTPSyncTransport {
    public func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
        var query: [(String, String)] = [(StrataQuery.limit, String(limit))]
        if let token { query.append((StrataQuery.after, token)) }
        var extra = Duration.zero
        if let wait, wait > .zero {
            let seconds = max(1, Int((wait / .seconds(1)).rounded(.up)))
            query.append((StrataQuery.wait, String(seconds)))
            extra = .seconds(seconds)
        }
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url(String(StrataEndpoint.databaseChanges.dropFirst()), query: query)), extra: extra).body
        guard let answer = try? JSONDecoder().decode(DatabaseChanges.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "the database changes are not {token, reset, moreComing, zones, removed}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        // Bounded as a page the server was asked for (twice the limit: zones and removals).
        guard answer.zones.count + answer.removed.count <= 2 * max(limit, 1) else {
            throw SyncError(.malformedResponse, "the database changes list \(answer.zones.count) zones and \(answer.removed.count) removals, more than the \(limit) asked for")
        }
        return answer
    }

    public func describeZone(_ zone: ZoneReference) async throws -> ZoneDescription {
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone))).body
        return try Self.description(body, of: zone)
    }

    public func updateZone(_ zone: ZoneReference, settings: ZoneSettings) async throws -> ZoneDescription {
        let body = try await send(HTTPExchangeRequest(method: "PUT", url: url(zone), headers: [("Content-Type", "application/json")],
                                                      body: Array(try JSONEncoder().encode(settings)))).body
        return try Self.description(body, of: zone)
    }

    public func acceptShare(_ zone: ZoneReference) async throws -> ZoneDescription {
        let body = try await send(HTTPExchangeRequest(method: "POST", url: url(zone, StrataEndpoint.accept))).body
        return try Self.description(body, of: zone)
    }

    public func leaveShare(_ zone: ZoneReference) async throws {
        _ = try await send(HTTPExchangeRequest(method: "POST", url: url(zone, StrataEndpoint.leave)))
    }

    public func reportDevice(_ zone: ZoneReference, _ report: DeviceReport) async throws -> DeviceVerdict {
        let body = try await send(HTTPExchangeRequest(method: "POST", url: url(zone, StrataEndpoint.devices), headers: [("Content-Type", "application/json")],
                                                      body: Array(try JSONEncoder().encode(report)))).body
        guard let verdict = try? JSONDecoder().decode(DeviceVerdict.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "the device report's answer is not {check, reason, position, zoneDigest}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return verdict
    }

    /// The zone's device registry (its owner only; `403 forbidden` for anyone else).
    public func devices(_ zone: ZoneReference) async throws -> ZoneDevices {
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url(zone, StrataEndpoint.devices))).body
        guard let devices = try? JSONDecoder().decode(ZoneDevices.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "the zone's devices are not {epoch, end, devices, divergent}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        return devices
    }

    static func description(_ body: [UInt8], of zone: ZoneReference) throws -> ZoneDescription {
        guard let described = try? JSONDecoder().decode(ZoneDescription.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "the zone's description is not {name, owner, …}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        if let owner = zone.owner, described.owner != owner {
            throw SyncError(.malformedResponse, "asked for \(owner)'s zone \(zone.name), the server answered with \(described.owner)'s")
        }
        guard described.name == zone.name else {
            throw SyncError(.malformedResponse, "asked for zone \(zone.name), the server answered with \(described.name)")
        }
        return described
    }
}
