import StrataLog
import Logging
import StrataProtocol

/// The database changes of the embedded storage (see ``ZoneStorage/databaseClock()``), kept in
/// memory: the counter, each zone's latest stamp and the removals. Nothing of it is written to the
/// data directory, so the clock's life is random per opening: after a restart every device's token
/// is of another life and gets one reset (a full listing of its user's zones), which is correct
/// and costs one answer per device. The removals kept are bounded (``keptRemovals``, the latest);
/// a token older than the oldest kept gets a reset too.
struct EmbeddedDatabase {
    struct Removal {
        var user: String
        var zone: ZoneID
        var reason: ZoneRemovalReason
        var stamp: UInt64
    }

    /// How many removals are kept, server-wide.
    static let keptRemovals = 65_536

    let life = UInt64.random(in: 1 ... .max)
    let key = UInt64.random(in: 0 ... .max)
    private(set) var stamp: UInt64 = 0
    private(set) var horizon: UInt64 = 0
    /// Each zone's latest stamp (every zone opened gets one at open: ``stampOpened(_:)``).
    private(set) var stamps: [ZoneID: UInt64] = [:]
    /// Per user, their removals, the oldest first.
    private var removalsByUser: [String: [Removal]] = [:]
    /// Every removal's user and stamp, the oldest first (for the bound).
    private var order: [(user: String, stamp: UInt64)] = []

    /// Per user, the zones that are theirs (``ZoneInfo/members``), so that listing a user's zones
    /// costs their number, not the server's. Built from the catalog on first use (`nil` until
    /// then), then kept up to date by every change of a zone's members.
    private var zonesByMember: [String: Set<ZoneID>]?

    var clock: DatabaseClock { DatabaseClock(life: life, stamp: stamp, horizon: horizon, key: key) }

    /// The zones that are `user`'s, the index built from `zones` when it was not yet.
    mutating func zones(of user: String, building zones: @autoclosure () -> [ZoneInfo]) -> Set<ZoneID> {
        if zonesByMember == nil {
            var index: [String: Set<ZoneID>] = [:]
            for zone in zones() {
                for member in zone.members { index[member, default: []].insert(zone.id) }
            }
            zonesByMember = index
        }
        return zonesByMember?[user] ?? []
    }

    /// Zone `id`'s members went from `old` to `new` (empty: created, or deleted).
    mutating func members(of id: ZoneID, from old: Set<String>, to new: Set<String>) {
        guard zonesByMember != nil else { return }
        for user in old.subtracting(new) {
            zonesByMember?[user]?.remove(id)
            if zonesByMember?[user]?.isEmpty == true { zonesByMember?[user] = nil }
        }
        for user in new.subtracting(old) { zonesByMember?[user, default: []].insert(id) }
    }

    /// Gives every zone opened a stamp of its own (in ID order), as if each had just changed: a
    /// page of the database changes is cut between two stamps, and a page cut inside a run of
    /// zones sharing one stamp (all 0 after a restart) would leave the rest of the run out of the
    /// following pages — a device would take the listing as complete and set those zones aside.
    mutating func stampOpened(_ ids: some Collection<ZoneID>) {
        for id in ids.sorted(by: { ($0.owner, $0.name) < ($1.owner, $1.name) }) { touch(id) }
    }

    /// Stamps a change of zone `id`.
    mutating func touch(_ id: ZoneID) {
        stamp += 1
        stamps[id] = stamp
    }

    /// Records that `users` lost zone `id`; a deleted zone's stamp goes with it.
    mutating func remove(_ id: ZoneID, from users: Set<String>, _ reason: ZoneRemovalReason) {
        stamp += 1
        if reason == .deleted { stamps[id] = nil }
        for user in users.sorted() {
            removalsByUser[user, default: []].append(Removal(user: user, zone: id, reason: reason, stamp: stamp))
            order.append((user, stamp))
        }
        // Dropped in batches, so that the bound costs O(1) per removal on average.
        guard order.count > Self.keptRemovals + Self.keptRemovals / 4 else { return }
        let dropped = order.prefix(order.count - Self.keptRemovals)
        order.removeFirst(dropped.count)
        var perUser: [String: Int] = [:]
        for entry in dropped {
            perUser[entry.user, default: 0] += 1
            horizon = max(horizon, entry.stamp)
        }
        for (user, count) in perUser {
            removalsByUser[user]?.removeFirst(count)
            if removalsByUser[user]?.isEmpty == true { removalsByUser[user] = nil }
        }
    }

    func removals(of user: String, after: UInt64, through: UInt64, limit: Int) -> [ZoneRemoval] {
        guard let all = removalsByUser[user] else { return [] }
        // Stamps grow along the array: the first after `after` is found by bisection.
        var low = 0, high = all.count
        while low < high {
            let middle = (low + high) / 2
            if all[middle].stamp <= after { low = middle + 1 } else { high = middle }
        }
        return all[low...].prefix { $0.stamp <= through }.prefix(limit).map { ZoneRemoval(zone: $0.zone, reason: $0.reason, stamp: $0.stamp) }
    }
}

extension EmbeddedZoneStorage {
    public func databaseClock() async throws(ZoneStorageError) -> DatabaseClock {
        try checkOpen()
        return database.clock
    }

    public func memberZones(of user: String, after: UInt64?, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [MemberZone] {
        try checkOpen()
        let mine = database.zones(of: user, building: zoneStates.values.map(\.info))
        let found = mine.compactMap { id -> (ZoneID, UInt64)? in
            guard let state = zoneStates[id], state.info.isMember(user) else { return nil }
            let stamp = database.stamps[id] ?? 0
            if let after, stamp <= after { return nil }
            return stamp <= through ? (id, stamp) : nil
        }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.prefix(max(0, limit))
        var zones: [MemberZone] = []
        zones.reserveCapacity(found.count)
        for (id, stamp) in found {
            guard let open = zoneStates[id] else { continue }
            // A zone whose log failed is reopened first (as a pull would), so that its end is true.
            let state = open.broken ? try await usableZone(id) : open
            let end = state.log.endPosition
            zones.append(MemberZone(info: state.info, stamp: stamp, end: end, fingerprint: end == 0 ? 0 : state.chain.value(at: end) ?? 0))
        }
        return zones
    }

    public func removals(of user: String, after: UInt64, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [ZoneRemoval] {
        try checkOpen()
        return database.removals(of: user, after: after, through: through, limit: limit)
    }

    public func acceptShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        let previous = try Self.checkGrantee(zoneStates[id]?.info, id, user: user)
        guard !previous.accepted.contains(user) else { return previous }
        zoneStates[id]?.info.accepted.insert(user)
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = previous
            throw error
        }
        database.touch(id)
        logger.info("share accepted", metadata: ["zone": "\(id)", "user": "\(user)"])
        return zoneStates[id]?.info ?? previous
    }

    public func leaveShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        try checkOpen()
        let previous = try Self.checkGrantee(zoneStates[id]?.info, id, user: user)
        zoneStates[id]?.info.grants[user] = nil
        zoneStates[id]?.info.accepted.remove(user)
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = previous
            throw error
        }
        database.remove(id, from: [user], .revoked)
        database.members(of: id, from: previous.members, to: zoneStates[id]?.info.members ?? [])
        database.touch(id)
        logger.info("share left", metadata: ["zone": "\(id)", "user": "\(user)"])
        return zoneStates[id]?.info ?? previous
    }
}
