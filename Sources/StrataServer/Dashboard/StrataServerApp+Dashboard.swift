import HTTPTypes
import Hummingbird
import StrataCore
import StrataProtocol

/// The operator's dashboard: server-rendered HTML pages, no script, for the users named in
/// ``ServerConfiguration/operators``. A browser signs in with HTTP Basic (the user's name and
/// static token; the server asks with `WWW-Authenticate: Basic`), a script with the bearer token.
///
/// - `GET /dashboard`: the server's health, every zone (owner, access, size, growth over the
///   last hour, devices, how far behind the furthest one is, divergent devices), divergent
///   devices with a link to each, and the errors answered lately by code.
/// - `GET /dashboard/zones/{owner}/{zone}`: one zone's devices.
/// - `GET /dashboard/zones/{owner}/{zone}/devices/{user}/{replica}`: one device, and how to find
///   where it diverged (the commands to run on it, or on a debug bundle of it).
///
/// Everything shown comes from the storage (zones, sizes, the device registry) and from this
/// instance's memory (errors, growth: per instance, forgotten on restart).
extension StrataServerApp {
    static let dashboardPath = "/dashboard"
    // Constant names (valid tokens, checked by HTTPTypes when the server starts serving them).
    static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!
    static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!

    static func isDashboard(_ path: String) -> Bool { path == dashboardPath || path.hasPrefix(dashboardPath + "/") }

    func addDashboard(to router: Router<StrataRequestContext>) {
        router.get(RouterPath(Self.dashboardPath)) { request, context in try await self.dashboardOverview(request, context) }
        router.get(RouterPath(Self.dashboardPath + "/zones/:owner/:zone")) { request, context in try await self.dashboardZone(request, context) }
        router.get(RouterPath(Self.dashboardPath + "/zones/:owner/:zone/devices/:user/:replica")) { request, context in
            try await self.dashboardDevice(request, context)
        }
    }

    /// The operator signed in, or `403` for anyone else.
    private func requireOperator(_ context: StrataRequestContext) throws(ServerError) -> String {
        let user = try context.requireUser()
        guard configuration.operators.contains(user) else {
            throw ServerError(.forbidden, "user \(user) is not an operator of this server (strata serve --operator)")
        }
        return user
    }

    private func html(_ title: String, _ body: String) -> Response {
        Response(status: .ok, headers: [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            Self.contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
            Self.contentTypeOptions: "nosniff",
        ], body: ResponseBody(byteBuffer: ByteBuffer(string: DashboardHTML.page(title, body))))
    }

    private func zoneLink(_ id: ZoneID) -> String {
        "<a href=\"/dashboard/zones/\(DashboardHTML.segment(id.owner))/\(DashboardHTML.segment(id.name))\">\(DashboardHTML.escape(id.description))</a>"
    }

    private func deviceLink(_ id: ZoneID, _ device: DeviceEntry, text: String) -> String {
        "<a href=\"/dashboard/zones/\(DashboardHTML.segment(id.owner))/\(DashboardHTML.segment(id.name))/devices/\(DashboardHTML.segment(device.user))/\(DashboardHTML.segment(device.replica))\">\(DashboardHTML.escape(text))</a>"
    }

    private func checkCell(_ check: DeviceStateCheck) -> String {
        switch check {
        case .consistent: "<span class=\"ok\">consistent</span>"
        case .divergent: "<span class=\"bad\">divergent</span>"
        case .unverified: "<span class=\"warn\">unverified</span>"
        }
    }

    func dashboardOverview(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        _ = try requireOperator(context)
        let now = clock.wallMilliseconds()
        let ready = (try? await ready().status) == .ok
        let zones = try await storageCall { () async throws(ZoneStorageError) in try await storage.zones() }.sorted { $0.id < $1.id }
        let growth = zoneActivity.lastHour(now: now)
        var ownerBytes: [String: Int64] = [:]
        var rows: [[String]] = []
        var divergentRows: [[String]] = []
        var divergentZones = Set<Int>()
        var totalDevices = 0
        for zone in zones {
            let id = zone.id
            if ownerBytes[id.owner] == nil {
                ownerBytes[id.owner] = (try? await storage.storedBytes(owner: id.owner)) ?? 0
            }
            let end = (try? await storage.endPosition(zone: id)) ?? 0
            let devices = (try? await storage.devices(zone: id)) ?? []
            totalDevices += devices.count
            let divergent = devices.filter { $0.check == .divergent }
            let furthest = devices.map { end > $0.position ? end - $0.position : 0 }.max()
            if !divergent.isEmpty { divergentZones.insert(rows.count) }
            rows.append([zoneLink(id), DashboardHTML.escape(zone.access.rawValue), "\(end)", "\(growth[id] ?? 0)", "\(devices.count)",
                         furthest.map { "\($0)" } ?? "–", divergent.isEmpty ? "0" : "<span class=\"bad\">\(divergent.count)</span>"])
            for device in divergent {
                divergentRows.append([zoneLink(id), DashboardHTML.escape(device.user), deviceLink(id, device, text: device.replica),
                                      "\(device.position)", ElapsedText.since(device.lastSeen, now: now) + " ago",
                                      deviceLink(id, device, text: "how to diff")])
            }
        }
        let divergentCount = divergentRows.count
        var body = "<h1>Strata server</h1>"
        body += "<h2>Health</h2><ul>"
        body += "<li>Storage: " + (ready ? "<span class=\"ok\">ready</span>" : "<span class=\"bad\">not ready</span>") + "</li>"
        body += "<li>Up for \(ElapsedText.age(UInt64(max(0, (clock.elapsed() - startedAt) / .milliseconds(1)))))</li>"
        body += "<li>Long polls waiting: \(notifier.totalWaiterCount)</li>"
        body += "<li>\(zones.count) zones, \(totalDevices) devices, " + (divergentCount == 0 ? "no divergent device" : "<span class=\"bad\">\(divergentCount) divergent</span>") + "</li></ul>"
        body += "<h2>Divergent devices</h2>"
        body += divergentRows.isEmpty ? "<p class=\"ok\">None: every device that reported holds its zone's state (or was not compared).</p>"
            : DashboardHTML.table(["Zone", "User", "Device", "Position", "Last seen", "Diff"], divergentRows, numeric: [3], rowClass: { _ in "bad" })
        body += "<h2>Zones</h2>"
        body += zones.isEmpty ? "<p>No zones.</p>"
            : DashboardHTML.table(["Zone", "Access", "Transactions", "Last hour", "Devices", "Furthest behind", "Divergent"], rows,
                                  numeric: [2, 3, 4, 5, 6], rowClass: { divergentZones.contains($0) ? "bad" : nil })
        body += "<h2>Stored bytes by owner</h2>"
        body += DashboardHTML.table(["Owner", "Stored"], ownerBytes.sorted { $0.key < $1.key }.map { [DashboardHTML.escape($0.key), DashboardHTML.bytes($0.value)] }, numeric: [1])
        let errors = recentErrors.snapshot(now: now)
        body += "<h2>Errors in the last hour (this instance)</h2>"
        body += errors.counts.isEmpty ? "<p class=\"ok\">None.</p>"
            : DashboardHTML.table(["Code", "Count"], errors.counts.map { [DashboardHTML.escape($0.code), "\($0.count)"] }, numeric: [1])
        if !errors.newest.isEmpty {
            body += "<h2>Latest errors</h2>"
            body += DashboardHTML.table(["When", "Code", "Status", "Request", "User"], errors.newest.prefix(20).map {
                [ElapsedText.since($0.at, now: now) + " ago", DashboardHTML.escape($0.code), "\($0.status)",
                 DashboardHTML.escape("\($0.method) \($0.path)"), DashboardHTML.escape($0.user ?? "–")]
            }, numeric: [2])
        }
        return html("Overview", body)
    }

    /// The zone named by the dashboard path's `owner` and `zone`, or `404`.
    private func dashboardZoneInfo(_ context: StrataRequestContext) async throws -> ZoneInfo {
        guard let owner = context.parameters.get("owner"), let name = context.parameters.get("zone"), ZoneInfo.isValidName(name) else {
            throw ServerError(.badRequest, "a dashboard zone path is /dashboard/zones/OWNER/NAME")
        }
        let id = ZoneID(owner: owner, name: name)
        guard let zone = try await storageCall({ () async throws(ZoneStorageError) in try await storage.zone(id) }) else {
            throw StrataRequestContext.noSuchZone(id)
        }
        return zone
    }

    func dashboardZone(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        _ = try requireOperator(context)
        let zone = try await dashboardZoneInfo(context)
        let now = clock.wallMilliseconds()
        let end = try await storageCall { () async throws(ZoneStorageError) in try await storage.endPosition(zone: zone.id) }
        let devices = try await storageCall { () async throws(ZoneStorageError) in try await storage.devices(zone: zone.id) }
        let order: [DeviceStateCheck: Int] = [.divergent: 0, .unverified: 1, .consistent: 2]
        let sorted = devices.sorted { (order[$0.check] ?? 3, UInt64.max - $0.lastSeen) < (order[$1.check] ?? 3, UInt64.max - $1.lastSeen) }
        var body = "<h1>Zone \(DashboardHTML.escape(zone.id.description))</h1>"
        body += "<p>Access \(DashboardHTML.escape(zone.access.rawValue)), epoch \(zone.epoch), \(end) transactions, \(zone.grants.count) grants.</p>"
        body += "<h2>Devices</h2>"
        body += sorted.isEmpty ? "<p>No device has reported.</p>" : DashboardHTML.table(
            ["Device", "User", "State", "Position", "Behind", "Pending", "Library", "Schema", "Last seen"],
            sorted.map { device in
                [deviceLink(zone.id, device, text: device.replica), DashboardHTML.escape(device.user), checkCell(device.check), "\(device.position)",
                 "\(end > device.position ? end - device.position : 0)", "\(device.pendingTransactions)", DashboardHTML.escape(device.library),
                 device.schemaVersion.map { "\($0)" } ?? "–", ElapsedText.since(device.lastSeen, now: now) + " ago"]
            }, numeric: [3, 4, 5], rowClass: { sorted[$0].check == .divergent ? "bad" : nil })
        return html("Zone \(zone.id)", body)
    }

    func dashboardDevice(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        _ = try requireOperator(context)
        let zone = try await dashboardZoneInfo(context)
        let devices = try await storageCall { () async throws(ZoneStorageError) in try await storage.devices(zone: zone.id) }
        guard let device = devices.first(where: { $0.user == context.parameters.get("user") && $0.replica == context.parameters.get("replica") }) else {
            throw ServerError(.notFound, "zone \(zone.id) has no such device in its registry")
        }
        let now = clock.wallMilliseconds()
        let end = (try? await storage.endPosition(zone: zone.id)) ?? device.position
        let ownerOption = " --owner \(zone.id.owner)"
        var body = "<h1>Device \(DashboardHTML.escape(device.replica))</h1>"
        body += "<p>Of user \(DashboardHTML.escape(device.user)) in zone \(zoneLink(zone.id)); last seen \(ElapsedText.since(device.lastSeen, now: now)) ago, running \(DashboardHTML.escape(device.library)).</p>"
        body += DashboardHTML.table(["", ""], [
            ["State", checkCell(device.check) + (device.reason.map { " — " + DashboardHTML.escape($0) } ?? "")],
            ["At position", "\(device.position) (the zone is at \(end))"],
            ["Device's state digest", device.digest.map { "<code>\(DashboardHTML.escape($0))</code>" } ?? "not computed"],
            ["Zone's state digest there", device.zoneDigest.map { "<code>\(DashboardHTML.escape($0))</code>" } ?? "not computed"],
            ["Pending", "\(device.pendingTransactions) transactions, \(device.pendingAssets) assets"],
            ["Token", "<code>\(DashboardHTML.escape(device.token))</code>"],
        ])
        body += "<h2>Finding where it diverged</h2>"
        body += "<p>The server holds the zone, not the device's store: the comparison runs where the store is. On the device (or on a debug bundle of it), as <code>\(DashboardHTML.escape(device.user))</code>:</p>"
        body += "<pre><code>strata diff STORE --server URL --zone \(DashboardHTML.escape(zone.id.name))\(DashboardHTML.escape(device.user == zone.id.owner ? "" : ownerOption)) --token-file TOKEN</code></pre>"
        body += "<p>It exchanges digests of ranges of the history with the server — a few KiB — and names the events whose content differs. To look at it elsewhere, the user can send <code>strata bundle STORE --redact</code>: every value replaced by a keyed hash, the structure kept.</p>"
        return html("Device \(device.replica)", body)
    }
}
