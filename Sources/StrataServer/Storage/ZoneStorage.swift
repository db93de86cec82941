public import ServiceLifecycle
public import StrataCore
public import StrataProtocol

/// Where zones and their logs live. The HTTP endpoints talk only to this protocol, so that a
/// backend other than ``EmbeddedZoneStorage`` (a PostgreSQL one, say) can be added without
/// touching them.
///
/// Positions count transactions in a zone's log from 0; the position *after* the last one is the
/// log's end. Every method that names a zone throws ``ZoneStorageError/Code/zoneNotFound`` when
/// there is no such zone.
///
/// An implementation must be safe to call from many tasks at once, and must keep the
/// exactly-once rule of ``append(zone:user:replica:transactions:)`` atomic: two concurrent pushes of
/// the same batch append it once.
///
/// A storage is a swift-service-lifecycle `Service`: its `run()` does what it needs in the
/// background (a database's connection pool) and closes it when the graceful shutdown reaches
/// it. `strata serve` runs it as the first service of its group (so that it closes last); a tool
/// or a test runs it around its work with ``withRunning(_:)``. A storage of one process has
/// nothing to run (the default `run()` waits and closes).
public protocol ZoneStorage: Service, AssetStorage {
    /// Creates a zone with a fresh random epoch and an empty log, in its owner's namespace
    /// (`id.owner` is the creator), with exactly the access and grants given: rules kept of a
    /// deleted zone of that name (``deletedZoneRules(_:)``) are forgotten.
    ///
    /// - Throws: ``ZoneStorageError/Code/zoneExists`` when the owner already has a zone of that
    ///   name, ``ZoneStorageError/Code/invalidArgument`` for an invalid name.
    func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo

    /// ``createZone(_:access:grants:)`` refused with ``ZoneStorageError/Code/quotaExceeded`` when
    /// the owner already has `maxZonesPerOwner` zones, checked atomically with the create. `nil`
    /// or `0`: no limit.
    func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant], maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo

    /// Creates a zone as ``createZone(_:access:grants:maxZonesPerOwner:)`` does, with the rules
    /// `settings` names; what it leaves out (`nil`) is what the zone had when it was last deleted
    /// (``deletedZoneRules(_:)``) — as a change of an existing zone keeps what it leaves out — or
    /// the defaults (private, no grants) when nothing is kept. So a zone deleted and then
    /// recreated keeps its grantees, as they were at the deletion: a grant revoked before it stays
    /// revoked. The kept rules are read and forgotten atomically with the create.
    func createZone(_ id: ZoneID, settings: ZoneSettings, maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo

    /// The access and grants zone `id` had when it was deleted, kept for its recreation
    /// (``createZone(_:settings:maxZonesPerOwner:)``); `nil` when nothing is kept: the zone was
    /// never deleted, was created again since, or was private with no grants (the defaults).
    /// A storage keeps the rules of at most ``keptDeletedZoneRulesPerOwner`` deleted zones per
    /// owner, the latest deleted.
    func deletedZoneRules(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneSettings?

    /// The zone `id`, or `nil` when there is none.
    func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo?

    /// Every zone, sorted by owner then name.
    func zones() async throws(ZoneStorageError) -> [ZoneInfo]

    /// Replaces the access rule and grants of a zone (its owner, name and epoch never change)
    /// and returns the zone as stored.
    func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo

    /// Sets the oldest app schema version the zone syncs with (1: every version) and returns the
    /// zone as stored.
    func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo

    /// Deletes a zone and its log, keeping its access and grants (``deletedZoneRules(_:)``) for
    /// a recreation. A zone later created with the same name gets a new epoch.
    func deleteZone(_ id: ZoneID) async throws(ZoneStorageError)

    /// Appends a push by `user`: transactions of one replica, in order.
    ///
    /// The rules, checked atomically with the append:
    /// - `user` may push to the zone (``ZoneInfo/canPush(_:)``: its owner, or a `readWrite` grant)
    ///   as the zone is when the push is appended, else ``ZoneStorageError/Code/forbidden`` and
    ///   nothing changes: a grant revoked after the server looked the zone up still holds.
    /// - A replica belongs to the user who first pushed it to the zone; a push of another user's
    ///   replica throws ``ZoneStorageError/Code/replicaNotYours`` and changes nothing.
    /// - Transactions the zone already holds under the same sequences are skipped when their
    ///   bytes are the same (a retry); when they differ (or their boundaries do), nothing is
    ///   appended and ``ZoneStorageError/Code/replicaForked`` names the first sequence that
    ///   differs (``ZoneStorageError/sequence``).
    /// - The first transaction not held must start right after the highest sequence held, and
    ///   each following one right after its predecessor, else nothing is appended and
    ///   ``ZoneStorageError/Code/sequenceGap`` says which sequence was expected.
    ///
    /// What remains is appended atomically (all or nothing, as one log record), one log entry per
    /// transaction, and is durable when this returns.
    ///
    /// - Returns: the zone's epoch, the position after the append (or the current end when
    ///   everything was held) and the highest sequence now held for the replica.
    func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome

    /// ``append(zone:user:replica:transactions:)`` refused whole, with
    /// ``ZoneStorageError/Code/quotaExceeded``, when the transactions it would append (counted
    /// uncompressed) would take the bytes stored for the zone's owner (``storedBytes(owner:)``)
    /// past `storedBytesLimit`; checked atomically with the append. `nil` or `0`: no limit.
    func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome

    /// ``append(zone:user:replica:transactions:storedBytesLimit:)`` into the zone's life `epoch`
    /// only (`nil`: whichever): a zone deleted and created again since the caller looked it up —
    /// while a push's body was still arriving — refuses with ``ZoneStorageError/Code/zoneReset``
    /// and appends nothing, checked atomically with the append. Without it, what a device of the
    /// zone's previous life pushed would land in the new zone.
    func append(zone: ZoneID, epoch: UInt64?, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome

    /// The bytes the zones `owner` owns occupy on disk: their logs and snapshots. Kept as a
    /// counter (rebuilt when the storage opens), so asking costs no file-system walk.
    func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64

    /// At most `limit` transactions from position `position` on.
    ///
    /// - Parameters:
    ///   - zone: the zone.
    ///   - epoch: when given, the epoch the caller's position belongs to: a zone whose epoch
    ///     differs (deleted and recreated meanwhile) throws ``ZoneStorageError/Code/zoneReset``.
    ///   - position: the first position wanted.
    ///   - limit: the most transactions to return.
    /// - Throws: ``ZoneStorageError/Code/positionRetired`` when `position` is before
    ///   ``startPosition(zone:)``, ``ZoneStorageError/Code/positionBeyondEnd`` when it is after
    ///   ``endPosition(zone:)``.
    func read(zone: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult

    /// The position after the zone's last durable transaction.
    func endPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64

    /// The first position the zone's log still holds (earlier ones were retired).
    func startPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64

    /// Every replica the zone holds events of: the user it belongs to (`nil` for history written
    /// before owners were recorded) and the highest sequence held.
    func replicas(zone: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo]

    /// The highest sequence the zone holds for `replica` (0 when none).
    func acknowledged(zone: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64

    /// Compaction: snapshots the zone's state at the position `retaining` transactions before its
    /// end and retires the history wholly below it. Clients whose change token points into
    /// retired history get `410 tokenExpired` and bootstrap from ``snapshot(zone:)``; retries of
    /// retired transactions are still checked for forks (their digests are kept). The compactor
    /// of `strata serve` calls it for every zone that holds more than its retention.
    @discardableResult
    func compact(zone: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot

    /// The zones whose history changed (an append, a merged state) by another process sharing
    /// this storage — another `strata serve` instance on the same database — so that its long
    /// polls wake here too. A storage that only one process uses has nothing to announce: the
    /// server wakes its own long polls itself (the default, a finished stream).
    func changesByOthers() -> AsyncStream<ZoneID>

    /// The token buckets of the server's rate limit and failed-authentication limit, when this
    /// storage is shared by several processes and keeps them where all of them see them (a
    /// database): N instances then allow what one allows. `nil` (the default) for a storage of
    /// one process: the server keeps its buckets in memory.
    var limitBuckets: (any LimitBuckets)? { get }

    /// Makes everything durable and releases the storage's resources; later calls fail.
    func close() async throws(ZoneStorageError)

    /// Merges a state a client uploaded into the zone (healing history the zone lost): the zone's
    /// snapshot becomes the join of its state and the upload, and the merge gets a new ID, so that
    /// the tokens handed out before expire (see ``ZoneInfo/merges``). The
    /// upload's values are merged, never its claims of which events it applied. `basis` is the
    /// position the uploader had pulled through.
    ///
    /// `state` is the upload as checked by ``StateValidation`` (as a push's transactions are by
    /// ``PushValidation``); it is never decoded whole: the merge reads it object by object and
    /// writes the merged snapshot as it goes (see `ProjectionBuilder.mergedPayload(with:…)`),
    /// holding the zone's own state, the upload's bytes and the payload it writes.
    ///
    /// `replica` is the uploader's own replica and `claim` how far a server acknowledged it to the
    /// uploader before the zone lost history: that claim is believed (as far as the state holds
    /// the replica's events: the sequences up to it count as held, and the zone's snapshot says
    /// they are applied), so that a device whose own history was compacted away pushes on from
    /// what its log still holds. Only acknowledged sequences are claimed, since a server
    /// acknowledges each (replica, sequence) to one copy of a store only: two copies never claim
    /// different events. The replica must be `user`'s or new to the zone, else
    /// ``ZoneStorageError/Code/replicaNotYours``; `user` must be able to push to the zone as it is
    /// when the state is merged, else ``ZoneStorageError/Code/forbidden``.
    func mergeState(zone: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome

    /// ``mergeState(zone:user:replica:claim:state:basis:)`` into the zone's life `epoch` only
    /// (`nil`: whichever): a zone deleted and created again since the uploader looked it up
    /// refuses with ``ZoneStorageError/Code/zoneReset`` and merges nothing, checked atomically
    /// with the merge.
    func mergeState(zone: ZoneID, epoch: UInt64?, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload,
                    basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome

    /// A fingerprint of the zone's history before `position`: a running hash folding in the
    /// digest of every transaction before it, in order (see `HistoryChain`); `nil` at position 0
    /// or where the storage keeps none (before the log's first position). Change tokens carry it
    /// (version 4), so that a token of history the server no longer has — restored from a
    /// backup, then grown past the token's position with other transactions — is told apart from
    /// a token of the history it has, even when the transaction just before it is the same.
    func fingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64?

    /// What version 3 tokens carry: 64 bits of the digest of the transaction at `position - 1`,
    /// or `nil` when there is none to take (position 0, history whose digests were not kept).
    /// Tokens handed out before version 4 are still checked against it.
    func lastTransactionFingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64?

    /// The database clock: the server life (or database) the counter belongs to, its value, and
    /// the oldest value whose removals are still kept (see ``DatabaseClock``). Every append,
    /// state merge, settings change, acceptance and deletion of a zone takes the counter's next
    /// value, in the same step that makes the change visible.
    func databaseClock() async throws(ZoneStorageError) -> DatabaseClock

    /// `user`'s zones (owned, or shared with them by a grant on a zone that is not private)
    /// stamped after `after` (`nil`: all of them) and at most `through`, the oldest stamp first, at
    /// most `limit` of them.
    func memberZones(of user: String, after: UInt64?, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [MemberZone]

    /// The zones `user` lost (a grant taken, the zone made private, left or deleted) stamped after
    /// `after` and at most `through`, the oldest first, at most `limit`. Only zones that were
    /// `user`'s (``ZoneInfo/isMember(_:)``) when they were lost.
    func removals(of user: String, after: UInt64, through: UInt64, limit: Int) async throws(ZoneStorageError) -> [ZoneRemoval]

    /// `user` accepts the share of zone `id` their grant gave them, and the zone as stored is
    /// returned. ``ZoneStorageError/Code/zoneNotFound`` when there is no such zone or `user` holds
    /// no grant on it that counts (the zone is private): nobody learns of a zone by accepting it.
    func acceptShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo

    /// `user` leaves zone `id`: their grant is removed (recorded as a removal for them) and the
    /// zone as stored is returned. ``ZoneStorageError/Code/zoneNotFound`` as for
    /// ``acceptShare(_:user:)``; the owner cannot leave their own zone
    /// (``ZoneStorageError/Code/invalidArgument``).
    func leaveShare(_ id: ZoneID, user: String) async throws(ZoneStorageError) -> ZoneInfo

    /// The position of the zone's newest snapshot; `nil` when it has none (a pull without a token
    /// then starts at the log's first position, else at the snapshot).
    func snapshotPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64?

    /// The zone's newest snapshot (its state at a position, as a projection snapshot (`StrataCore`)
    /// payload), or `nil` when it was never compacted.
    func snapshot(zone: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot?

    // MARK: The device registry (`DeviceEntry` in StrataProtocol)

    /// The zone's device registry: the last report of each device (user and replica) in the
    /// zone's current life, in no order. Deleting the zone deletes its registry.
    func devices(zone: ZoneID) async throws(ZoneStorageError) -> [DeviceEntry]

    /// Records `entry` in the zone's registry, replacing the one of the same user and replica,
    /// when the zone is still in life `epoch` (`zoneReset` otherwise). Entries are keyed by user
    /// and replica: a report under another user's replica ID is the reporter's own entry, and
    /// never replaces or blocks the other's. Of the entry's user, at most `maxPerUser` entries are
    /// kept: the least recently seen others go, so that one user's reports cannot crowd out
    /// another's.
    func recordDevice(_ entry: DeviceEntry, zone: ZoneID, epoch: UInt64, maxPerUser: Int) async throws(ZoneStorageError)

    /// How many devices the registries of all zones hold as `divergent`.
    func divergentDeviceCount() async throws(ZoneStorageError) -> Int
}

/// The bounds every storage keeps a zone's device registry within, applied when a report is
/// recorded: a device not seen for ``expiry`` is dropped (an uninstalled app's, a revoked user's:
/// a divergent one would otherwise stay counted for good), and past ``maxPerZone`` entries the
/// least recently seen go (a public zone's readers cannot grow it without end).
public enum DeviceRegistryBounds {
    public static let maxPerZone = 4_096
    /// 90 days, in milliseconds of the server's clock.
    public static let expiry: UInt64 = 90 * 86_400_000
}

/// The result of ``ZoneStorage/mergeState(zone:user:replica:claim:state:basis:)``.
public struct StateMergeOutcome: Sendable, Hashable {
    public var epoch: UInt64
    /// The ID of this merge, the zone's generation now (see ``ZoneInfo/merges``).
    public var generation: UInt64
    /// The position of the merged snapshot.
    public var position: UInt64
    /// Whether the uploader had pulled everything before the merge and nothing of its upload was
    /// credited to another replica: then its state is the merged state, and it goes on from
    /// ``position`` without downloading the snapshot.
    public var upToDate: Bool
    /// The highest sequence of the uploader's replica the zone now counts as held.
    public var acknowledged: UInt64
    /// Whether the upload changed the zone (then ``generation`` is a new merge and every token
    /// handed out before expires); `false` when it brought nothing the zone's state did not hold.
    public var merged: Bool

    public init(epoch: UInt64, generation: UInt64, position: UInt64, upToDate: Bool, acknowledged: UInt64, merged: Bool = true) {
        self.merged = merged
        self.acknowledged = acknowledged
        self.epoch = epoch
        self.generation = generation
        self.position = position
        self.upToDate = upToDate
    }
}

/// A zone's state at a log position, for clients whose change token has expired.
public struct ZoneSnapshot: Sendable, Hashable {
    public var epoch: UInt64
    /// The snapshot holds every transaction below this position.
    public var position: UInt64
    /// A projection snapshot (see `StrataCore`'s `ProjectionBuilder`, and `Store.adoptSnapshot`).
    public var payload: [UInt8]

    public init(epoch: UInt64, position: UInt64, payload: [UInt8]) {
        self.epoch = epoch
        self.position = position
        self.payload = payload
    }
}

extension ZoneStorage {
    /// ``ZoneStorageError/Code/forbidden`` unless `user` may push to the zone `info` describes.
    package static func checkPush(_ info: ZoneInfo, user: String) throws(ZoneStorageError) {
        guard info.canPush(user) else {
            throw ZoneStorageError(.forbidden, "user \(user) may not push to zone \(info.id)", zone: info.id.description)
        }
    }

    /// How many deleted zones' rules a storage keeps per owner (the latest deleted): one user
    /// deleting zone after zone cannot grow the server's catalog without bound.
    public static var keptDeletedZoneRulesPerOwner: Int { 256 }

    /// The access and grants a zone is created with: what `settings` names, the rest from the
    /// rules `kept` of the deleted zone, else the defaults (private, no grants).
    public static func rules(_ settings: ZoneSettings, keeping kept: ZoneSettings?) -> (access: ZoneAccess, grants: [String: ZoneGrant]) {
        (settings.access ?? kept?.access ?? .private, settings.grants ?? kept?.grants ?? [:])
    }

    /// A storage without a device registry (a test's): reports are refused as a failure of the
    /// storage; the registry reads as empty.
    public func devices(zone: ZoneID) async throws(ZoneStorageError) -> [DeviceEntry] { [] }
    public func recordDevice(_ entry: DeviceEntry, zone: ZoneID, epoch: UInt64, maxPerUser: Int) async throws(ZoneStorageError) {
        throw ZoneStorageError(.storageFailure, "this storage keeps no device registry", zone: zone.description)
    }
    public func divergentDeviceCount() async throws(ZoneStorageError) -> Int { 0 }

    /// A storage that keeps no rules of deleted zones: none.
    public func deletedZoneRules(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneSettings? { nil }

    /// Reads the kept rules, then creates (not atomically: storages that keep rules implement
    /// this themselves).
    public func createZone(_ id: ZoneID, settings: ZoneSettings, maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        let (access, grants) = Self.rules(settings, keeping: try await deletedZoneRules(id))
        return try await createZone(id, access: access, grants: grants, maxZonesPerOwner: maxZonesPerOwner)
    }

    /// A storage of one process: nothing to announce.
    public func changesByOthers() -> AsyncStream<ZoneID> {
        AsyncStream { $0.finish() }
    }

    /// A storage of one process: the server's limits are counted in memory.
    public var limitBuckets: (any LimitBuckets)? { nil }

    /// Creates a zone in `owner`'s namespace.
    public func createZone(name: String, owner: String, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
        try await createZone(ZoneID(owner: owner, name: name), access: access, grants: grants)
    }

    /// Counts the owner's zones, then creates (not atomically: storages implement this themselves
    /// to close the race between two creates).
    public func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant],
                           maxZonesPerOwner: Int?) async throws(ZoneStorageError) -> ZoneInfo {
        if let limit = maxZonesPerOwner, limit > 0 {
            let owned = try await zones().reduce(0) { $0 + ($1.owner == id.owner ? 1 : 0) }
            if owned >= limit { throw ZoneStorageError.zonesQuota(owner: id.owner, limit: limit, owned: owned, zone: id) }
        }
        return try await createZone(id, access: access, grants: grants)
    }

    /// A storage that does not count bytes: nothing is stored, as far as quotas go.
    public func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64 { 0 }

    /// Checks the quota, then appends (not atomically: storages that count bytes implement this
    /// themselves).
    public func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        if let limit = storedBytesLimit, limit > 0 {
            let used = try await storedBytes(owner: zone.owner)
            let adding = transactions.reduce(Int64(0)) { $0 + Int64($1.bytes.count) }
            if used + adding > limit { throw ZoneStorageError.storedBytesQuota(owner: zone.owner, limit: limit, used: used, adding: adding, zone: zone) }
        }
        return try await append(zone: zone, user: user, replica: replica, transactions: transactions)
    }

    /// Checks the epoch, then merges (not atomically: storages whose zones can be recreated while
    /// an upload is in flight implement this themselves, as both of Strata's do).
    public func mergeState(zone: ZoneID, epoch: UInt64?, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload,
                           basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        if let epoch, let now = try await self.zone(zone), now.epoch != epoch {
            throw ZoneStorageError.recreated(zone, expected: epoch, now: now.epoch, what: "state upload")
        }
        return try await mergeState(zone: zone, user: user, replica: replica, claim: claim, state: state, basis: basis)
    }

    /// Checks the epoch, then appends (not atomically: storages whose zones can be recreated
    /// while a push is in flight implement this themselves, as both of Strata's do).
    public func append(zone: ZoneID, epoch: UInt64?, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        if let epoch, let now = try await self.zone(zone), now.epoch != epoch {
            throw ZoneStorageError.recreated(zone, expected: epoch, now: now.epoch)
        }
        return try await append(zone: zone, user: user, replica: replica, transactions: transactions, storedBytesLimit: storedBytesLimit)
    }

    /// At most `limit` transactions from position `position` on, whatever the zone's epoch.
    public func read(zone: ZoneID, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        try await read(zone: zone, epoch: nil, after: position, limit: limit)
    }
}

/// One transaction of a push: its encoding (`TransactionRecord.encoded()`), the sequence
/// numbers of its first and last event, and the digest the exactly-once check compares.
public struct PushedTransaction: Sendable, Hashable {
    public let bytes: [UInt8]
    public let firstSequence: UInt64
    public let lastSequence: UInt64
    public let digest: TransactionDigest
    /// The highest sequence its removes name of each other replica's adds: the zone must hold
    /// them (rule 5 of the append plan), so that nobody cancels adds that do not exist yet.
    public let namedAdds: [ReplicaID: UInt64]
    /// The assets its fields name: the zone must hold them (``AssetStorage``) before it takes
    /// the transaction.
    public let namedAssets: Set<AssetHash>

    /// The transaction `bytes` (its removes and assets read from them; bytes that do not decode
    /// name none, and a server refuses them before they get here).
    public init(bytes: [UInt8], firstSequence: UInt64, lastSequence: UInt64) {
        let summary = try? TransactionSummary(validating: bytes)
        self.init(bytes: bytes, firstSequence: firstSequence, lastSequence: lastSequence,
                  namedAdds: summary?.namedAdds ?? [:], namedAssets: summary?.namedAssets ?? [])
    }

    package init(bytes: [UInt8], firstSequence: UInt64, lastSequence: UInt64, namedAdds: [ReplicaID: UInt64], namedAssets: Set<AssetHash> = []) {
        self.bytes = bytes
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.digest = TransactionDigest(of: bytes)
        self.namedAdds = namedAdds
        self.namedAssets = namedAssets
    }

    /// The encoding of `record` with its sequences; `nil` for a transaction without events.
    public init?(_ record: TransactionRecord) {
        guard let sequences = record.sequences else { return nil }
        self.init(bytes: record.encoded(), firstSequence: sequences.lowerBound, lastSequence: sequences.upperBound)
    }
}

/// The result of ``ZoneStorage/append(zone:user:replica:transactions:)``.
public struct AppendOutcome: Sendable, Hashable {
    /// The epoch of the zone appended to.
    public var epoch: UInt64
    /// The position after the appended transactions (the zone's end when nothing was appended).
    public var position: UInt64
    /// The highest sequence the zone now holds for the replica.
    public var acknowledged: UInt64
    /// How many transactions were appended (the rest were already there).
    public var appended: Int
    /// The fingerprint of the history before ``position`` (``ZoneStorage/fingerprint(zone:at:)``),
    /// when the storage knew it as it appended, so that the push's answer token costs no second
    /// read; `nil` when it did not (then it is asked for).
    public var fingerprint: UInt64?

    public init(epoch: UInt64, position: UInt64, acknowledged: UInt64, appended: Int, fingerprint: UInt64? = nil) {
        self.epoch = epoch
        self.position = position
        self.acknowledged = acknowledged
        self.appended = appended
        self.fingerprint = fingerprint
    }
}

/// A transaction as stored in a zone's log.
public struct ZoneEntry: Sendable, Hashable {
    /// Its position in the zone's log.
    public var position: UInt64
    /// Its encoding, as pushed.
    public var bytes: [UInt8]

    public init(position: UInt64, bytes: [UInt8]) {
        self.position = position
        self.bytes = bytes
    }
}

/// The result of ``ZoneStorage/read(zone:epoch:after:limit:)``.
public struct ReadResult: Sendable, Hashable {
    /// The zone's epoch.
    public var epoch: UInt64
    public var transactions: [ZoneEntry]
    /// The position after the last transaction returned (the requested one when none was).
    public var nextPosition: UInt64
    /// Whether the log held more transactions after ``nextPosition`` when it was read.
    public var moreComing: Bool

    public init(epoch: UInt64, transactions: [ZoneEntry], nextPosition: UInt64, moreComing: Bool) {
        self.epoch = epoch
        self.transactions = transactions
        self.nextPosition = nextPosition
        self.moreComing = moreComing
    }
}
