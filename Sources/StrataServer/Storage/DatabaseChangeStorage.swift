public import StrataProtocol

/// The database-wide counter behind `GET /v1/database/changes` (see
/// ``ZoneStorage/databaseClock()``).
///
/// The embedded storage keeps it in memory: ``life`` is random per opening of the storage, so a
/// token of an earlier life (the server restarted) gets one full listing (a reset). PostgreSQL
/// keeps it in the database, shared by every instance, so that a token handed out by one instance
/// is understood by all of them.
public struct DatabaseClock: Sendable, Hashable {
    /// What the counter's values belong to: a life of the embedded storage, or the database.
    public var life: UInt64
    /// The counter's value now: every change stamped so far is visible.
    public var stamp: UInt64
    /// Removals stamped at or below this value were forgotten (bounded retention): a token at or
    /// below it gets a reset.
    public var horizon: UInt64
    /// A random secret of the clock's life: tokens carry the stamp sealed with it, so that they do
    /// not tell a user how many changes the whole server saw.
    public var key: UInt64

    public init(life: UInt64, stamp: UInt64, horizon: UInt64, key: UInt64) {
        self.life = life
        self.stamp = stamp
        self.horizon = horizon
        self.key = key
    }
}

/// A zone of a user, with the counter value of its latest change and what its change token needs.
public struct MemberZone: Sendable, Hashable {
    public var info: ZoneInfo
    /// The database counter's value at the zone's latest change.
    public var stamp: UInt64
    /// The end of its log.
    public var end: UInt64
    /// The fingerprint of its history at ``end`` (``ZoneStorage/fingerprint(zone:at:)``; 0 when none).
    public var fingerprint: UInt64

    public init(info: ZoneInfo, stamp: UInt64, end: UInt64, fingerprint: UInt64) {
        self.info = info
        self.stamp = stamp
        self.end = end
        self.fingerprint = fingerprint
    }
}

/// A zone a user lost (see ``ZoneStorage/removals(of:after:through:limit:)``).
public struct ZoneRemoval: Sendable, Hashable {
    public var zone: ZoneID
    public var reason: ZoneRemovalReason
    /// The database counter's value when it was lost.
    public var stamp: UInt64

    public init(zone: ZoneID, reason: ZoneRemovalReason, stamp: UInt64) {
        self.zone = zone
        self.reason = reason
        self.stamp = stamp
    }
}

extension ZoneStorage {
    /// A storage without a database clock (a test's wrapper): the database changes are refused.
    public func databaseClock() async throws(ZoneStorageError) -> DatabaseClock {
        throw ZoneStorageError(.invalidArgument, "this storage keeps no database changes")
    }

    public func memberZones(of user: String, after: UInt64?, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [MemberZone] {
        throw ZoneStorageError(.invalidArgument, "this storage keeps no database changes")
    }

    public func removals(of user: String, after: UInt64, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [ZoneRemoval] {
        throw ZoneStorageError(.invalidArgument, "this storage keeps no database changes")
    }

    public func acceptShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        throw ZoneStorageError(.invalidArgument, "this storage keeps no acceptances")
    }

    public func leaveShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo {
        throw ZoneStorageError(.invalidArgument, "this storage keeps no acceptances")
    }

    /// ``ZoneStorageError/Code/zoneNotFound`` unless `user` holds a grant that counts on `info`
    /// (the same answer as for a zone that does not exist: accepting or leaving reveals nothing).
    package static func checkGrantee(_ info: ZoneInfo?, _ id: ZoneID, user: String) throws(ZoneStorageError) -> ZoneInfo {
        guard let info, info.owner != user, info.isMember(user) else {
            if let info, info.owner == user {
                throw ZoneStorageError(.invalidArgument, "user \(user) owns zone \(id): an owner neither accepts nor leaves their own zone", zone: id.description)
            }
            throw ZoneStorageError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name) shared with \(user)", zone: id.description)
        }
        return info
    }
}
