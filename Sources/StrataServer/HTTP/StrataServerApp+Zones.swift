import Foundation
import HTTPTypes
import Hummingbird
import Logging
public import StrataProtocol

extension StrataServerApp {
    /// `GET /v1/zones`: the zones the caller may read.
    func listZones(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let zones = try await storageCall { () async throws(ZoneStorageError) in try await storage.zones() }
        var described: [ZoneDescription] = []
        for zone in zones where zone.canRead(user) {
            if let description = try await descriptionIfPresent(zone, for: user) { described.append(description) }
        }
        return try json(ZoneList(zones: described))
    }

    /// `GET /v1/zones/{zone}`.
    func getZone(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        return try json(try await description(of: zone, for: user))
    }

    /// `PUT /v1/zones/{zone}`: creates the zone in the caller's namespace (201), or lets its owner
    /// change its access and grants (200). Nobody creates or changes a zone in another user's
    /// namespace. Either way what the body leaves out stays as it was — for a zone that was
    /// deleted, as it was at the deletion.
    func putZone(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let name = try context.requestedZoneID()
        guard name.owner == user else {
            throw ServerError(.forbidden, "user \(user) may not create or change zones of user \(name.owner): zones are created in their creator's namespace")
        }
        // HTTP clients remove `.` and `..` segments from a URL's path (RFC 3986, 5.2.4), so that
        // nobody could reach such a zone again.
        guard name.name != ".", name.name != ".." else {
            throw ServerError(.badRequest, "invalid zone name \"\(name.name)\": . and .. are path segments that HTTP clients remove from URLs")
        }
        // A zone's settings are small (an access and the grants, which a quota bounds): 1 MiB is
        // room for tens of thousands of grants, and no reason to hold a push's 32 MiB.
        let body = try await readBody(request, limit: Self.maxSettingsBytes)
        // The body may have trickled in: the caller must still be a user.
        try requireStillSignedIn(request, as: user)
        let settings = try Self.settings(from: body)
        try await checkQuotas(name, settings)
        // Each attempt ends unless a concurrent request changed the zone meanwhile: a create can
        // lose a race with another create of the same name, which makes this request an update;
        // an update, or the description of the zone written, one with a DELETE, which makes it a
        // create again — as if this PUT had come after the delete, never a 404.
        for _ in 0..<5 {
            if let existing = try await storageCall({ () async throws(ZoneStorageError) in try await storage.zone(name) }) {
                guard existing.canAdminister(user) else {
                    throw ServerError(.forbidden, "only the owner (\(existing.owner)) may change zone \(name)")
                }
                var updated: ZoneInfo
                do {
                    updated = try await storage.updateZone(name, access: settings.access ?? existing.access, grants: settings.grants ?? existing.grants)
                    if let version = settings.minSchemaVersion, version != updated.minSchemaVersion {
                        updated = try await storage.setMinSchemaVersion(name, version)
                    }
                } catch {
                    if error.code == .zoneNotFound { continue }
                    throw answer(error)
                }
                // Long polls of the zone wake and check their callers' access again; a new
                // grantee's devices are woken to find the share.
                notifier.notify(zone: name.description, users: Self.databaseUsers(of: existing).union(Self.databaseUsers(of: updated)),
                                nowUsers: Self.databaseUsers(of: updated))
                webhooks?.zoneChanged(name, losing: Self.readers(of: existing).subtracting(Self.readers(of: updated)), metrics: metrics)
                guard let described = try await descriptionIfPresent(updated, for: user) else { continue }
                return try json(described)
            }
            if var created = try await create(name, settings) {
                if let version = settings.minSchemaVersion, version != created.minSchemaVersion {
                    do {
                        created = try await storage.setMinSchemaVersion(name, version)
                    } catch {
                        if error.code == .zoneNotFound { continue }
                        throw answer(error)
                    }
                }
                logger.info("zone created", metadata: ["zone": "\(name)", "user": "\(user)"])
                // The owner's other devices, and the grantees' of a zone shared as it was made,
                // find it at once rather than when their database long polls end.
                notifier.notify(zone: name.description, users: Self.databaseUsers(of: created), nowUsers: Self.databaseUsers(of: created))
                // Shared as it was made: the grantees' devices are woken to find the share.
                if !created.grants.isEmpty { webhooks?.zoneChanged(name, metrics: metrics) }
                guard let described = try await descriptionIfPresent(created, for: user) else { continue }
                return try json(described, status: .created)
            }
        }
        throw ServerError(.internalError, "zone \(name) changed while it was being created; try again")
    }

    /// The users whose database may list `zone`, whose database long polls a change of it wakes:
    /// its owner and every grantee (a superset: a private zone's grants are ignored).
    static func databaseUsers(of zone: ZoneInfo) -> Set<String> {
        Set([zone.owner] + zone.grants.keys)
    }

    /// The users who may read `zone`: its owner and its grantees who may (the webhook's users).
    static func readers(of zone: ZoneInfo) -> Set<String> {
        Set([zone.owner] + zone.grants.keys.filter { zone.canRead($0) })
    }

    /// `DELETE /v1/zones/{zone}`: owner only.
    func deleteZone(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let zone = try context.existingZone()
        let name = zone.id
        guard zone.canRead(user) else { throw StrataRequestContext.noSuchZone(name) }
        guard zone.canAdminister(user) else {
            throw ServerError(.forbidden, "only the owner (\(zone.owner)) may delete zone \(name)")
        }
        try await storageCall { () async throws(ZoneStorageError) in try await storage.deleteZone(name) }
        await digestCache.forget(name)
        await stateDigests.forget(name)
        zoneActivity.forget(name)
        notifier.notify(zone: name.description, users: Self.databaseUsers(of: zone), nowUsers: [])
        webhooks?.zoneChanged(name, losing: Self.readers(of: zone), deleted: true, metrics: metrics)
        logger.info("zone deleted", metadata: ["zone": "\(name)", "user": "\(user)"])
        return Response(status: .noContent)
    }

    /// Creates a zone; `nil` when one of that name appeared meanwhile. What the settings leave
    /// out is what the zone had when it was deleted, if it was (its grantees keep their access
    /// through a recreation), else the defaults: private, no grants.
    private func create(_ id: ZoneID, _ settings: ZoneSettings) async throws(ServerError) -> ZoneInfo? {
        do {
            return try await storage.createZone(id, settings: settings, maxZonesPerOwner: configuration.limits.maxZonesPerUser)
        } catch {
            if error.code == .zoneExists { return nil }
            throw answer(error)
        }
    }

    /// The zone's description; `nil` when it was deleted meanwhile.
    private func descriptionIfPresent(_ zone: ZoneInfo, for user: String) async throws(ServerError) -> ZoneDescription? {
        do {
            return try await description(of: zone, for: user)
        } catch {
            if error.code == .zoneNotFound { return nil }
            throw error
        }
    }

    /// The body of a PUT: empty (all defaults) or JSON settings.
    /// The largest body of a zone's `PUT`.
    static let maxSettingsBytes = 1 << 20
    /// The highest schema version a zone may require (and a client may say it runs).
    static let maxSchemaVersion = 1_000_000

    static func settings(from body: [UInt8]) throws(ServerError) -> ZoneSettings {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return ZoneSettings() }
        if let problem = DuplicateJSONKeys.first(in: body) {
            throw ServerError(.badRequest, "the body \(problem): which value counts would be a guess")
        }
        let settings: ZoneSettings
        do {
            settings = try JSONDecoder().decode(ZoneSettings.self, from: Data(body))
        } catch {
            throw ServerError(.badRequest, "the body is not {\"access\": \"private\" | \"shared\" | \"public\", \"grants\": {\"<user>\": \"read\" | \"readWrite\"}}: \(describe(error))")
        }
        if let grants = settings.grants, let bad = grants.keys.first(where: { $0.isEmpty || $0.count > 256 }) {
            throw ServerError(.badRequest, "invalid user name \"\(bad.prefix(64))\" in grants")
        }
        if let version = settings.minSchemaVersion, !(1...maxSchemaVersion).contains(version) {
            throw ServerError(.badRequest, "minSchemaVersion \(version) is not from 1 to \(maxSchemaVersion)")
        }
        return settings
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): context.debugDescription
        case DecodingError.keyNotFound(let key, _): "missing \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        default: "\(error)"
        }
    }
}
