public import Strata

/// Where zones and their logs live. The HTTP endpoints talk only to this protocol, so that a
/// backend other than ``EmbeddedZoneStorage`` (a PostgreSQL one, say) can be added without
/// touching them.
///
/// Positions count transactions in a zone's log from 0; the position *after* the last one is the
/// log's end. Every method that names a zone throws ``ZoneStorageError/Code/zoneNotFound`` when
/// there is no such zone.
///
/// An implementation must be safe to call from many tasks at once, and must keep the
/// exactly-once rule of ``append(zone:replica:transactions:)`` atomic: two concurrent pushes of
/// the same batch append it once.
public protocol ZoneStorage: Sendable {
    /// Creates a zone with a fresh random epoch and an empty log.
    ///
    /// - Throws: ``ZoneStorageError/Code/zoneExists`` when the name is taken,
    ///   ``ZoneStorageError/Code/invalidArgument`` for an invalid name.
    func createZone(name: String, owner: String, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo

    /// The zone named `name`, or `nil` when there is none.
    func zone(named name: String) async throws(ZoneStorageError) -> ZoneInfo?

    /// Every zone, sorted by name.
    func zones() async throws(ZoneStorageError) -> [ZoneInfo]

    /// Replaces the access rule and grants of the zone named `name` (its owner and epoch never
    /// change) and returns the zone as stored.
    func updateZone(named name: String, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo

    /// Deletes a zone and its log. A zone later created with the same name gets a new epoch.
    func deleteZone(named name: String) async throws(ZoneStorageError)

    /// Appends a push: transactions of one replica, in order.
    ///
    /// Transactions whose last sequence is at most what the storage already holds for the replica
    /// (`acknowledged`) are skipped; the first one not skipped must start at `acknowledged + 1`
    /// and each following one right after its predecessor, else nothing is appended and
    /// ``ZoneStorageError/Code/sequenceGap`` says which sequence was expected. What remains is
    /// appended atomically (all or nothing, as one log record), one log entry per transaction.
    ///
    /// - Returns: the zone's epoch, the position after the append (or the current end when
    ///   everything was skipped) and the highest sequence now held for the replica.
    func append(zone: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome

    /// At most `limit` transactions from position `position` on.
    ///
    /// - Parameters:
    ///   - epoch: when given, the epoch the caller's position belongs to: a zone whose epoch
    ///     differs (deleted and recreated meanwhile) throws ``ZoneStorageError/Code/zoneReset``.
    /// - Throws: ``ZoneStorageError/Code/positionRetired`` when `position` is before
    ///   ``startPosition(zone:)``, ``ZoneStorageError/Code/positionBeyondEnd`` when it is after
    ///   ``endPosition(zone:)``.
    func read(zone: String, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult

    /// The position after the zone's last durable transaction.
    func endPosition(zone: String) async throws(ZoneStorageError) -> UInt64

    /// The first position the zone's log still holds (earlier ones were retired).
    func startPosition(zone: String) async throws(ZoneStorageError) -> UInt64

    /// Makes everything durable and releases the storage's resources; later calls fail.
    func close() async throws(ZoneStorageError)

    /// The zone's newest snapshot (its state at a position, as a `Strata` projection snapshot
    /// payload), or `nil` when it was never compacted.
    func snapshot(zone: String) async throws(ZoneStorageError) -> ZoneSnapshot?
}

/// A zone's state at a log position, for clients whose change token has expired.
public struct ZoneSnapshot: Sendable, Hashable {
    public var epoch: UInt64
    /// The snapshot holds every transaction below this position.
    public var position: UInt64
    /// A `Strata` projection snapshot (see `ProjectionBuilder` and `Store.adoptSnapshot`).
    public var payload: [UInt8]

    public init(epoch: UInt64, position: UInt64, payload: [UInt8]) {
        self.epoch = epoch
        self.position = position
        self.payload = payload
    }
}

extension ZoneStorage {
    /// At most `limit` transactions from position `position` on, whatever the zone's epoch.
    public func read(zone: String, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        try await read(zone: zone, epoch: nil, after: position, limit: limit)
    }
}

/// One transaction of a push: its encoding (``TransactionRecord/encoded()``) and the sequence
/// numbers of its first and last event.
public struct PushedTransaction: Sendable, Hashable {
    public var bytes: [UInt8]
    public var firstSequence: UInt64
    public var lastSequence: UInt64

    public init(bytes: [UInt8], firstSequence: UInt64, lastSequence: UInt64) {
        self.bytes = bytes
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
    }

    /// The encoding of `record` with its sequences; `nil` for a transaction without events.
    public init?(_ record: TransactionRecord) {
        guard let sequences = record.sequences else { return nil }
        self.init(bytes: record.encoded(), firstSequence: sequences.lowerBound, lastSequence: sequences.upperBound)
    }
}

/// The result of ``ZoneStorage/append(zone:replica:transactions:)``.
public struct AppendOutcome: Sendable, Hashable {
    /// The epoch of the zone appended to.
    public var epoch: UInt64
    /// The position after the appended transactions (the zone's end when nothing was appended).
    public var position: UInt64
    /// The highest sequence the zone now holds for the replica.
    public var acknowledged: UInt64
    /// How many transactions were appended (the rest were already there).
    public var appended: Int

    public init(epoch: UInt64, position: UInt64, acknowledged: UInt64, appended: Int) {
        self.epoch = epoch
        self.position = position
        self.acknowledged = acknowledged
        self.appended = appended
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
