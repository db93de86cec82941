import Foundation
import Hummingbird
import Logging
import StrataCore
import StrataProtocol

/// The device registry's endpoints. After a sync a device reports the digest of its state at its
/// change token (`POST /v1/zones/{zone}/devices`); the server compares it with the zone's own
/// state at the token's position (``ZoneStateDigests``), answers what it found and keeps the
/// report. The zone's owner lists the registry (`GET`): which devices are where, how far behind,
/// on which library, and which hold a state the zone never had (`divergent`).
///
/// What a report claims is checked, never believed: a replica whose transactions another user
/// pushed to the zone is refused; the token is checked as a pull's is (its life, its position
/// within the zone's history, its history fingerprint); the time recorded is the server's. Entries
/// are the reporting user's (keyed by user and replica): a report under someone else's replica ID
/// that never pushed here is listed under the reporter, and never replaces or blocks the other's
/// entry. A reader who lost access meanwhile gets no answer and leaves no record.
extension StrataServerApp {
    /// The largest report body.
    static let maxDeviceReportBytes = 4_096
    /// Devices kept per user and zone: the least recently seen beyond it are dropped.
    static let maxDevicesPerUser = 64

    /// `POST /v1/zones/{zone}/devices`: a device's state digest at its token.
    func reportDevice(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let body = try await readBody(request, limit: min(configuration.limits.maxBodyBytes, Self.maxDeviceReportBytes))
        let report = try Self.deviceReport(body)
        guard let replica = ReplicaID(report.replica) else {
            throw ServerError(.badRequest, "the report's replica \"\(report.replica.prefix(64))\" is not a replica ID")
        }
        // A replica whose transactions another user pushed is not the caller's to report on.
        let held = try await storageCall { () async throws(ZoneStorageError) in try await storage.replicas(zone: zone.id) }
        if let owner = held.first(where: { $0.replica == replica })?.user, owner != user {
            throw ServerError(.replicaNotYours, "replica \(replica) of zone \(zone.id) belongs to another user")
        }
        // Checked as a pull's token is: this life, within the history, the same history. A token
        // without a history fingerprint (an older one) gets a pull from the start: no position
        // to compare at.
        let position = try await PullStart.position(after: report.token, zone: zone, storage: storage)
        let claimed = (try? ChangeToken(parsing: report.token))?.position
        let verdict = claimed == position ? try await check(report, at: position, of: zone)
            : DeviceVerdict(check: .unverified, reason: "the token carries no fingerprint of the zone's history: no position to compare at",
                            position: position, zoneDigest: nil)
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        let entry = DeviceEntry(replica: replica.description, user: user, lastSeen: clock.wallMilliseconds(), token: report.token,
                                position: position, digest: report.digest, pendingTransactions: report.pendingTransactions,
                                pendingAssets: report.pendingAssets, masked: report.masked, library: report.library,
                                schemaVersion: request.headers[Self.schemaVersionHeader].flatMap { Int($0) },
                                check: verdict.check, reason: verdict.reason, zoneDigest: verdict.zoneDigest)
        try await storageCall { () async throws(ZoneStorageError) in
            try await storage.recordDevice(entry, zone: zone.id, epoch: zone.epoch, maxPerUser: Self.maxDevicesPerUser)
        }
        metrics.recordDeviceReport(verdict.check)
        // Counted again in the background (one count at a time), not on the report's path.
        refreshDivergentDevices()
        if verdict.check == .divergent {
            logger.warning("a device holds a state the zone never had", metadata: [
                "zone": "\(zone.id)", "user": "\(user)", "replica": "\(replica)", "position": "\(position)",
                "digest": "\(report.digest ?? "")", "zoneDigest": "\(verdict.zoneDigest ?? "")",
            ])
        }
        return try json(verdict)
    }

    /// `GET /v1/zones/{zone}/devices`: the zone's registry, for its owner.
    func listDevices(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        guard user == zone.id.owner else {
            throw ServerError(.forbidden, "only the owner of zone \(zone.id) sees its devices")
        }
        let devices = try await storageCall { () async throws(ZoneStorageError) in try await storage.devices(zone: zone.id) }
        let end = try await storageCall { () async throws(ZoneStorageError) in try await storage.endPosition(zone: zone.id) }
        try requireStillSignedIn(request, as: user)
        let sorted = devices.sorted { ($0.lastSeen, $0.replica) > ($1.lastSeen, $1.replica) }
        return try json(ZoneDevices(owner: zone.id.owner, name: zone.id.name, epoch: zone.epoch, end: end, devices: sorted))
    }

    /// A report's body, read and bounded.
    static func deviceReport(_ body: [UInt8]) throws(ServerError) -> DeviceReport {
        let report = try decodeJSONBody(body, as: DeviceReport.self,
                                        shape: "a device report {replica, token, digest, pendingTransactions, pendingAssets, masked, library}")
        if let digest = report.digest, !DeviceReport.isDigest(digest) {
            throw ServerError(.badRequest, "the report's digest \"\(digest.prefix(80))\" is not 64 lower-case hex digits")
        }
        guard DeviceReport.isLibrary(report.library) else {
            throw ServerError(.badRequest, "the report's library is not 1 to \(DeviceReport.maxLibraryLength) printable ASCII characters")
        }
        guard !report.token.isEmpty else {
            throw ServerError(.badRequest, "the report names no change token: a device reports after a pull")
        }
        return report
    }

    /// What the server finds of a report at `position`.
    func check(_ report: DeviceReport, at position: UInt64, of zone: ZoneInfo) async throws -> DeviceVerdict {
        if report.pendingTransactions > 0 {
            return DeviceVerdict(check: .unverified, reason: "\(report.pendingTransactions) of the device's transactions are not pushed yet: its state is ahead of the zone's",
                                 position: position, zoneDigest: nil)
        }
        if report.masked {
            return DeviceVerdict(check: .unverified, reason: "the device downloads the zone with a download mask: it holds part of the zone's state",
                                 position: position, zoneDigest: nil)
        }
        guard let claimed = report.digest else {
            return DeviceVerdict(check: .unverified, reason: "the device sent no state digest", position: position, zoneDigest: nil)
        }
        let digest: String
        do {
            digest = try await stateDigests.digest(zone: zone.id, epoch: zone.epoch, generation: zone.generation, at: position)
        } catch ZoneStateDigests.Unavailable.compacted(let snapshot) {
            return DeviceVerdict(check: .unverified, reason: "the zone's history before position \(snapshot) is compacted: its state at \(position) is no longer known",
                                 position: position, zoneDigest: nil)
        } catch ZoneStateDigests.Unavailable.behind(let kept) {
            return DeviceVerdict(check: .unverified, reason: "the server keeps the zone's state at position \(kept), past \(position), and replayed an older one lately: a report after the device's next pull is compared",
                                 position: position, zoneDigest: nil)
        } catch let error as ZoneStorageError {
            throw ServerError(error)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.internalError, "zone \(zone.id): its state at position \(position) cannot be computed: \(error)")
        }
        guard digest == claimed else {
            return DeviceVerdict(check: .divergent, reason: "the device's state differs from the zone's at position \(position)",
                                 position: position, zoneDigest: digest)
        }
        return DeviceVerdict(check: .consistent, reason: nil, position: position, zoneDigest: digest)
    }
}
