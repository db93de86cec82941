/// An error of a ``ZoneStorage``: what went wrong, in which zone, and the numbers a caller needs
/// to recover (the sequence expected after a gap, the positions a log holds).
///
/// ```swift
/// do { _ = try await storage.append(zone: "notes", replica: replica, transactions: batch) }
/// catch where error.code == .sequenceGap { print("resend from", error.expected ?? 0) }
/// ```
public struct ZoneStorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, extensible classification.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No zone of that name.
        public static let zoneNotFound = Code("zoneNotFound")
        /// A zone of that name already exists.
        public static let zoneExists = Code("zoneExists")
        /// The zone's epoch is not the one the caller expected (it was deleted and recreated).
        public static let zoneReset = Code("zoneReset")
        /// A push skips sequence numbers; ``ZoneStorageError/expected`` says which one comes next.
        public static let sequenceGap = Code("sequenceGap")
        /// A push of a replica that belongs to another user.
        public static let replicaNotYours = Code("replicaNotYours")
        /// A push or a state upload by a user who may not push to the zone (not its owner, no
        /// `readWrite` grant), as the zone is at the moment of the append.
        public static let forbidden = Code("forbidden")
        /// A push whose transaction differs from the one the zone holds under the same replica
        /// and sequences (a copied or restored store); ``ZoneStorageError/sequence`` is the first
        /// sequence that differs.
        public static let replicaForked = Code("replicaForked")
        /// A pushed remove names an add of another replica that the zone does not hold (an add
        /// that does not exist yet, or that the zone lost); ``ZoneStorageError/sequence`` is the
        /// first sequence of the refused transaction. Nothing of the push was appended.
        public static let unheldAdd = Code("unheldAdd")
        /// A read position before the first one the log still holds.
        public static let positionRetired = Code("positionRetired")
        /// A read position after the end of the log.
        public static let positionBeyondEnd = Code("positionBeyondEnd")
        /// A push too large for the log to take as one record.
        public static let tooLarge = Code("tooLarge")
        /// An argument was invalid (zone name, empty push, limit).
        public static let invalidArgument = Code("invalidArgument")
        /// The storage itself failed (disk, damaged files, closed); the message says what and where.
        public static let storageFailure = Code("storageFailure")
        /// The disk is full (`ENOSPC`, or `EDQUOT`: the file system's quota): nothing of the call
        /// was acknowledged, and the same call succeeds once space returns.
        public static let storageFull = Code("storageFull")
        /// The storage cannot be reached for now (a database down, restarting or out of
        /// connections): nothing of the call was done, and the same call succeeds once it is back.
        public static let storageUnavailable = Code("storageUnavailable")
        /// A per-user quota would be exceeded; nothing was changed. The message names the quota,
        /// its limit and the current use.
        public static let quotaExceeded = Code("quotaExceeded")
        /// An asset chunk that is not what its manifest says (hash or length), or chunks that
        /// together are not the asset's hash; nothing of it was kept.
        public static let assetMismatch = Code("assetMismatch")
    }

    public var code: Code
    public var message: String
    /// The zone concerned, when there is one.
    public var zone: String?
    /// For ``Code/sequenceGap``: the sequence the storage expects next for the replica.
    public var expected: UInt64?
    /// For ``Code/replicaForked``: the first sequence whose transaction differs from the zone's.
    public var sequence: UInt64?

    public init(_ code: Code, _ message: String, zone: String? = nil, expected: UInt64? = nil, sequence: UInt64? = nil) {
        self.code = code
        self.message = message
        self.zone = zone
        self.expected = expected
        self.sequence = sequence
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let zone { text += " [zone \(zone)]" }
        return text
    }
}
