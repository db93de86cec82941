import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StrataProtocol

extension StrataServerApp {
    /// `GET /v1/database/changes?after=&limit=&wait=`: which of the caller's zones (owned, or
    /// shared with them by a grant) changed since a database token, and which they lost
    /// (``DatabaseChanges``); with `wait`, a long poll that answers as soon as one of them changes.
    ///
    /// An idle device costs one clock read per poll, whatever its number of zones: the zones are
    /// listed only when the counter moved past the caller's token.
    func databaseChanges(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let query = request.uri.queryParameters
        let limit = try databaseLimit(query.get(StrataQuery.limit))
        let wait = try databaseWait(query.get(StrataQuery.wait))
        let after = try databaseToken(query.get(StrataQuery.after))
        let clock = ContinuousClock()
        let deadline = clock.now + wait
        while true {
            // Registered before looking, so that a change landing in between wakes the wait.
            let waiter = notifier.register(databaseOf: user)
            let notifier = self.notifier
            // The client going away ends the wait (as a cancellation: the empty page).
            let watching = ConnectionWatch.shared.onClose(context.connection) { notifier.cancel(waiter) }
            defer { ConnectionWatch.shared.forget(context.connection, watching) }
            let page: DatabaseChanges
            do {
                page = try await databasePage(for: user, after: after, limit: limit)
            } catch {
                notifier.remove(waiter)
                throw error
            }
            let remaining = deadline - clock.now
            if page.reset || !page.zones.isEmpty || !page.removed.isEmpty || remaining <= .zero || notifier.isShutDown || Task.isCancelled {
                notifier.remove(waiter)
                return try databaseAnswer(page, request, user: user)
            }
            // No longer than the caller's JWT is valid: the answer below checks it again.
            let wake = await notifier.wait(waiter, timeout: signedInWait(remaining, context))
            notifier.remove(waiter)
            // A timeout, a shutdown or a cancellation answers the empty page (with the token of
            // the clock as it was read), which reveals nothing.
            guard wake == .notified else { return try databaseAnswer(page, request, user: user) }
            // Woken by a change (or a reload of the users): a caller signed out meanwhile gets no further.
            try requireStillSignedIn(request, as: user)
        }
    }

    private func databaseAnswer(_ page: DatabaseChanges, _ request: Request, user: String) throws -> Response {
        try requireStillSignedIn(request, as: user)
        var response = try json(page)
        if notifier.isShutDown { response.headers[Self.databaseShuttingDownHeader] = "true" }
        return response
    }

    private static let databaseShuttingDownHeader = HTTPField.Name(StrataHeader.shuttingDown)!

    /// One page of `user`'s database changes after `after`.
    func databasePage(for user: String, after: DatabaseToken?, limit: Int) async throws(ServerError) -> DatabaseChanges {
        let clock = try await storageCall { () async throws(ZoneStorageError) in try await storage.databaseClock() }
        // A token of this life, not older than the removals kept and not ahead of the counter
        // (a database restored from a backup) goes on from where it was; any other gets a reset.
        var since: UInt64?
        var reset = true
        if let after, after.life == clock.life {
            let stamp = after.stamp(key: clock.key)
            if stamp >= clock.horizon, stamp <= clock.stamp {
                since = stamp
                reset = after.resetting
            }
        }
        if let since, !reset, since == clock.stamp {
            // Nothing changed anywhere: no zone is looked at.
            return DatabaseChanges(token: DatabaseToken(life: clock.life, stamp: since, resetting: false, key: clock.key).text,
                                   reset: false, moreComing: false, zones: [], removed: [], user: user)
        }
        let through = clock.stamp
        let zones = try await storageCall { () async throws(ZoneStorageError) in
            try await storage.memberZones(of: user, after: since, through: through, limit: limit + 1)
        }
        // A reset's first page lists every zone; removals matter from its second page on (a zone
        // listed on the first and lost before the next is named as lost).
        let lost = try await since.asyncMap { (since: UInt64) async throws(ServerError) -> [ZoneRemoval] in
            try await storageCall { () async throws(ZoneStorageError) in
                try await storage.removals(of: user, after: since, through: through, limit: limit + 1)
            }
        } ?? []
        // Each list is complete up to its last stamp only when it was cut: the page holds what
        // both lists hold completely.
        var cutoff = through
        if zones.count > limit, let last = zones.last { cutoff = min(cutoff, last.stamp) }
        if lost.count > limit, let last = lost.last { cutoff = min(cutoff, last.stamp) }
        var cut = cutoff < through

        // A zone lost and the caller's again (granted anew, recreated) is listed, not removed;
        // a zone lost twice is named once, at its latest loss.
        let listed = Set(zones.map(\.info.id))
        var latestLoss: [ZoneID: ZoneRemoval] = [:]
        for removal in lost where removal.stamp <= cutoff && !listed.contains(removal.zone) { latestLoss[removal.zone] = removal }
        var removals: [ZoneRemoval] = []
        for removal in latestLoss.values {
            let now = try await storageCall { () async throws(ZoneStorageError) in try await storage.zone(removal.zone) }
            if now?.isMember(user) != true { removals.append(removal) }
        }

        enum Item { case zone(MemberZone), removal(ZoneRemoval) }
        var items: [(stamp: UInt64, item: Item)] = zones.filter { $0.stamp <= cutoff }.map { ($0.stamp, .zone($0)) }
        items += removals.map { ($0.stamp, .removal($0)) }
        items.sort { $0.stamp < $1.stamp }
        if items.count > limit {
            items.removeLast(items.count - limit)
            cut = true
        }
        let stamp = cut ? (items.last?.stamp ?? cutoff) : through

        var described: [DatabaseZone] = []
        var removed: [RemovedZone] = []
        for (_, item) in items {
            switch item {
            case .zone(let zone):
                let info = zone.info
                var token = info.token(at: zone.end)
                token.fingerprint = zone.fingerprint
                let role: ZoneRole = user == info.owner ? .owner : (info.grants[user] == .readWrite ? .readWrite : .read)
                described.append(DatabaseZone(name: info.name, owner: info.owner, access: info.access, role: role, token: token.description,
                                              epoch: info.epoch, accepted: user == info.owner || info.accepted.contains(user)))
            case .removal(let removal):
                removed.append(RemovedZone(name: removal.zone.name, owner: removal.zone.owner, reason: removal.reason))
            }
        }
        return DatabaseChanges(token: DatabaseToken(life: clock.life, stamp: stamp, resetting: reset && cut, key: clock.key).text,
                               reset: reset, moreComing: cut, zones: described, removed: removed, user: user)
    }

    /// The database token a request goes on from (`nil`: none, a full listing).
    func databaseToken(_ text: String?) throws(ServerError) -> DatabaseToken? {
        guard let text, !text.isEmpty else { return nil }
        guard let token = DatabaseToken(text) else {
            throw ServerError(.badRequest, "after \"\(text.prefix(64))\" is not a database token of this server (ask without after for a full listing)")
        }
        return token
    }

    /// The most zones one page of database changes names by default, and at most.
    static let defaultDatabaseLimit = 500
    static let maxDatabaseLimit = 2_000

    func databaseLimit(_ text: String?) throws(ServerError) -> Int {
        guard let text else { return Self.defaultDatabaseLimit }
        guard let value = Int(text), value > 0 else {
            throw ServerError(.badRequest, "limit must be a positive integer, got \"\(text.prefix(32))\"")
        }
        return min(value, Self.maxDatabaseLimit)
    }

    private func databaseWait(_ text: String?) throws(ServerError) -> Duration {
        guard let text else { return .zero }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else {
            throw ServerError(.badRequest, "wait must be a number of seconds, got \"\(text.prefix(32))\"")
        }
        return min(.nanoseconds(Int64(min(seconds, 1e9) * 1e9)), configuration.limits.maxWait)
    }

    // MARK: Sharing

    /// `POST /v1/zones/{zone}/accept?owner=`: the caller accepts the share a grant gave them, and
    /// gets the zone's description. A caller without a grant gets `404 zoneNotFound`, as for a
    /// zone that does not exist.
    func acceptShare(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let id = try context.requestedZoneID()
        let info = try await shareCall(id) { () async throws(ZoneStorageError) in try await storage.acceptShare(id, user: user) }
        notifier.notify(zone: id.description, users: Self.databaseUsers(of: info).union([user]), nowUsers: Self.databaseUsers(of: info))
        logger.info("share accepted", metadata: ["zone": "\(id)", "user": "\(user)"])
        return try json(try await description(of: info, for: user))
    }

    /// `POST /v1/zones/{zone}/leave?owner=`: the caller leaves a zone shared with them (their grant
    /// is removed; the owner sees it in the participants). `204`.
    func leaveShare(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let id = try context.requestedZoneID()
        let info = try await shareCall(id) { () async throws(ZoneStorageError) in try await storage.leaveShare(id, user: user) }
        notifier.notify(zone: id.description, users: Self.databaseUsers(of: info).union([user]), nowUsers: Self.databaseUsers(of: info))
        // The user's other devices drop the zone; the owner's see the participant gone.
        webhooks?.zoneChanged(id, losing: [user], metrics: metrics)
        logger.info("share left", metadata: ["zone": "\(id)", "user": "\(user)"])
        return Response(status: .noContent)
    }

    private func shareCall(_ id: ZoneID, _ body: () async throws(ZoneStorageError) -> ZoneInfo) async throws(ServerError) -> ZoneInfo {
        do {
            return try await body()
        } catch {
            switch error.code {
            case .zoneNotFound: throw StrataRequestContext.noSuchZone(id)
            case .invalidArgument: throw ServerError(.badRequest, error.message)
            default: throw answer(error)
            }
        }
    }
}

extension Optional {
    /// `map` with an async, typed-throwing transform.
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws(ServerError) -> T) async throws(ServerError) -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
