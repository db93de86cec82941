public import StrataLog

/// An error of the store: what went wrong and where (entity, object, attribute, log position).
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        public static let invalidSchema = Code("invalidSchema")
        /// The app's schema changes the recorded one in a way that is not additive.
        public static let incompatibleSchema = Code("incompatibleSchema")
        public static let unknownEntity = Code("unknownEntity")
        public static let unknownAttribute = Code("unknownAttribute")
        public static let typeMismatch = Code("typeMismatch")
        public static let missingRequiredValue = Code("missingRequiredValue")
        /// An insert of an ID that already exists.
        public static let objectExists = Code("objectExists")
        public static let objectNotFound = Code("objectNotFound")
        /// A to-one reference (or to-many member) whose target does not exist or is of the wrong entity.
        public static let invalidReference = Code("invalidReference")
        /// A delete refused by a relationship with the deny rule.
        public static let deleteDenied = Code("deleteDenied")
        /// An event in the log does not decode.
        public static let corruptEvent = Code("corruptEvent")
        /// A snapshot of the projection does not decode.
        public static let corruptSnapshot = Code("corruptSnapshot")
        /// The log refused a commit; the store must be reopened (see the underlying log error).
        public static let storeFailed = Code("storeFailed")
        /// An error of the segment log (see ``StoreError/logError``).
        public static let log = Code("log")
        /// A model value could not be converted.
        public static let encoding = Code("encoding")
        public static let invalidArgument = Code("invalidArgument")
        /// An operation that rewrites what every process of the store relies on (a fork, an
        /// adopted snapshot) on a store opened for several processes (`StoreSharing.processes`):
        /// open it exclusively for that.
        public static let exclusiveAccessRequired = Code("exclusiveAccessRequired")
        /// `store.json` (the store's identity) is damaged, undecodable or of an unknown format:
        /// the store is not opened rather than given a silently different replica ID.
        public static let corruptIdentity = Code("corruptIdentity")
        /// The hybrid logical clock is at its largest value; nothing was written.
        public static let clockOverflow = Code("clockOverflow")
        /// An asset's bytes or manifest in the store's `assets/` directory (or from a server) do
        /// not match its hash.
        public static let corruptAsset = Code("corruptAsset")
        /// An asset the store does not hold and could not fetch: no sync engine is attached, or
        /// the server has no asset by that hash that this user may read.
        public static let assetUnavailable = Code("assetUnavailable")
        /// A fork cannot re-author what it must: the abandoned transactions were retired from the
        /// log by compaction (nothing was changed).
        public static let historyRetired = Code("historyRetired")
        /// A zone the database does not hold (never added, or removed when access to it was lost).
        public static let unknownZone = Code("unknownZone")
        /// `database.json` (the list of a database's zones) is damaged, undecodable or of an
        /// unknown format: the database is not opened rather than opened without some zones.
        public static let corruptDatabase = Code("corruptDatabase")
        /// A debug bundle (`DebugBundle`) that is not one, or is damaged: the message says where.
        public static let corruptBundle = Code("corruptBundle")
    }

    public var code: Code
    public var message: String
    public var entity: String?
    public var object: ObjectID?
    public var attribute: String?
    /// The log position concerned, when there is one.
    public var position: UInt64?
    /// The underlying log error, for ``Code/log`` and ``Code/storeFailed``.
    public var logError: LogError?

    public init(_ code: Code, _ message: String, entity: String? = nil, object: ObjectID? = nil, attribute: String? = nil,
                position: UInt64? = nil, logError: LogError? = nil) {
        self.code = code
        self.message = message
        self.entity = entity
        self.object = object
        self.attribute = attribute
        self.position = position
        self.logError = logError
    }

    package init(_ error: LogError) {
        self.init(.log, error.description, logError: error)
    }

    public var description: String {
        var where_: [String] = []
        if let entity { where_.append(attribute.map { "\(entity).\($0)" } ?? entity) } else if let attribute { where_.append(attribute) }
        if let object { where_.append("object \(object)") }
        if let position { where_.append("position \(position)") }
        return "\(code): \(message)" + (where_.isEmpty ? "" : " [\(where_.joined(separator: ", "))]")
    }
}
