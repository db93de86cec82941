import StrataProtocol
import Hummingbird

/// The preamble of every `/v1/zones/{zone}` endpoint, done once for the route group: the caller
/// (authenticated by then), the zone name in the path and the `owner` query parameter (a bad one
/// is `400 badRequest`), and the zone's lookup. Handlers then ask the context for the access they
/// need (``StrataRequestContext/readableZone()``, ``StrataRequestContext/writableZone()``,
/// ``StrataRequestContext/existingZone()``): reading, pushing and administering differ, and
/// `PUT` works on a zone that may not exist yet.
struct ZoneResolution: RouterMiddleware {
    typealias Context = StrataRequestContext
    let server: StrataServerApp

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let user = try context.requireUser()
        let id = try server.zoneID(request, context, user: user)
        context.zoneID = id
        context.zone = try await server.storageCall { () async throws(ZoneStorageError) in try await server.storage.zone(id) }
        return try await next(request, context)
    }
}

extension StrataRequestContext {
    /// The zone the request names (resolved by ``ZoneResolution``).
    func requestedZoneID() throws(ServerError) -> ZoneID {
        guard let zoneID else { throw ServerError(.internalError, "internal: the zone of the request was not resolved") }
        return zoneID
    }

    /// The zone the request names, or `404 zoneNotFound`.
    func existingZone() throws(ServerError) -> ZoneInfo {
        let id = try requestedZoneID()
        guard let zone else { throw Self.noSuchZone(id) }
        return zone
    }

    /// The answer to a zone that does not exist — and to one the caller may not read: a stranger
    /// cannot tell which zone names another user has (the same code, status and message).
    static func noSuchZone(_ id: ZoneID) -> ServerError {
        ServerError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name)")
    }

    /// The zone, when the caller may read it, else `404 zoneNotFound` as if it did not exist.
    func readableZone() throws(ServerError) -> (user: String, zone: ZoneInfo) {
        let user = try requireUser()
        let zone = try existingZone()
        guard zone.canRead(user) else { throw Self.noSuchZone(zone.id) }
        return (user, zone)
    }

    /// The zone, when the caller may push to it (its owner, or a `readWrite` grant); `403
    /// forbidden` for a caller who may only read it, `404 zoneNotFound` for one who may not even
    /// read it (as if it did not exist).
    func writableZone() throws(ServerError) -> (user: String, zone: ZoneInfo) {
        let (user, zone) = try readableZone()
        guard zone.canPush(user) else { throw ServerError(.forbidden, "user \(user) may not push to zone \(zone.id)") }
        return (user, zone)
    }
}
