import Foundation
import Logging
import StrataProtocol
// The database changes and the zone descriptions are the HTTP app's own code (its
// `databasePage(for:after:limit:)` and `description(of:for:)`, internal to the server): the
// simulation runs them, rather than a copy that could drift from what the routes answer.
@testable import StrataServer
import StrataSync

/// The database-changes and sharing calls of ``SimulatedNetwork``, with the access rules of the
/// routes (`GET /v1/database/changes`, `GET`/`PUT /v1/zones/{zone}`, `…/accept`, `…/leave`), and
/// the same faults as the other calls: a request dropped before the server sees it, an answer
/// dropped after the server acted.
extension SimulatedNetwork {
    /// The server's HTTP app over the storage as it is now (a restart opens another storage).
    private func app() throws -> StrataServerApp {
        StrataServerApp(storage: try storage(), users: try UserDirectory(users: []), logger: SimulatedServerSite.quiet)
    }

    /// The answer of a route's call, its errors answered as the route answers them.
    private func routed<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as ServerError {
            throw Self.answered(error)
        } catch let error as ZoneStorageError {
            throw Self.answered(ServerError(error))
        }
    }

    func databaseChanges(user: String, after token: String?, limit: Int) async throws -> DatabaseChanges {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        if roll(20) { await deliverLate() }
        let page = try await routed {
            var after: DatabaseToken?
            if let token, !token.isEmpty {
                guard let parsed = DatabaseToken(token) else { throw ServerError(.badRequest, "after \"\(token.prefix(64))\" is not a database token of this server") }
                after = parsed
            }
            return try await app().databasePage(for: user, after: after, limit: min(max(1, limit), StrataServerApp.maxDatabaseLimit))
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return page
    }

    /// `GET /v1/zones/{zone}`: a zone the caller may not read is answered as one that does not exist.
    func describeZone(_ zone: ZoneID, user: String) async throws -> ZoneDescription {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let description = try await routed {
            guard let info = try await storage().zone(zone), info.canRead(user) else { throw ServerError(.zoneNotFound, "no zone \(zone)") }
            return try await app().description(of: info, for: user)
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return description
    }

    /// `PUT /v1/zones/{zone}`: the owner creates the zone or changes its access and grants; what the
    /// settings leave out stays as it was.
    func updateZone(_ zone: ZoneID, user: String, settings: ZoneSettings) async throws -> ZoneDescription {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let description = try await routed {
            guard zone.owner == user else { throw ServerError(.forbidden, "user \(user) may not create or change zones of user \(zone.owner)") }
            let storage = try storage()
            let info: ZoneInfo
            if let existing = try await storage.zone(zone) {
                info = try await storage.updateZone(zone, access: settings.access ?? existing.access, grants: settings.grants ?? existing.grants)
            } else {
                info = try await storage.createZone(zone, settings: settings, maxZonesPerOwner: nil)
            }
            return try await app().description(of: info, for: user)
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return description
    }

    /// `POST /v1/zones/{zone}/accept`: without a grant, `zoneNotFound` (as for a zone that does not exist).
    func acceptShare(_ zone: ZoneID, user: String) async throws -> ZoneDescription {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        let description = try await routed {
            let info = try await shareCall(zone) { storage async throws(ZoneStorageError) in try await storage.acceptShare(zone, user: user) }
            return try await app().description(of: info, for: user)
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
        return description
    }

    /// `POST /v1/zones/{zone}/leave`.
    func leaveShare(_ zone: ZoneID, user: String) async throws {
        if roll(10) { throw SyncError(.transport, "request dropped") }
        try await routed {
            _ = try await shareCall(zone) { storage async throws(ZoneStorageError) in try await storage.leaveShare(zone, user: user) }
        }
        if roll(10) { throw SyncError(.transport, "answer dropped") }
    }

    /// The share routes' answers to the storage's refusals.
    private func shareCall(_ zone: ZoneID, _ body: (any ZoneStorage) async throws(ZoneStorageError) -> ZoneInfo) async throws -> ZoneInfo {
        do {
            return try await body(storage())
        } catch let error as ZoneStorageError {
            switch error.code {
            case .zoneNotFound: throw ServerError(.zoneNotFound, "no zone \(zone)")
            case .invalidArgument: throw ServerError(.badRequest, error.message)
            default: throw ServerError(error)
            }
        }
    }
}

extension SimulatedClient {
    func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
        // The simulation never waits: a long poll would answer at once here, as nothing else runs.
        try await network.databaseChanges(user: user, after: token, limit: limit)
    }
    func describeZone(_ zone: ZoneReference) async throws -> ZoneDescription {
        try await network.describeZone(id(zone), user: user)
    }
    func updateZone(_ zone: ZoneReference, settings: ZoneSettings) async throws -> ZoneDescription {
        try await network.updateZone(id(zone), user: user, settings: settings)
    }
    func acceptShare(_ zone: ZoneReference) async throws -> ZoneDescription {
        try await network.acceptShare(id(zone), user: user)
    }
    func leaveShare(_ zone: ZoneReference) async throws {
        try await network.leaveShare(id(zone), user: user)
    }
}
