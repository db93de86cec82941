/// An error from the segment log: what went wrong and where (file and byte offset when it concerns
/// bytes on disk).
///
/// ```swift
/// do { _ = try SegmentLog.open(at: url) }
/// catch let error as LogError where error.code == .corruptRecord {
///     print("damaged at \(error.file ?? "?") offset \(error.offset ?? -1)")
/// }
/// ```
public struct LogError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, extensible classification of log errors.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A record outside the torn tail failed validation (checksum, length, framing).
        public static let corruptRecord = Code("corruptRecord")
        /// A segment file's header is missing, damaged, from another log or of an unknown version.
        public static let badSegmentHeader = Code("badSegmentHeader")
        /// Positions are not contiguous between records or segments, or a segment's name disagrees
        /// with its header.
        public static let positionMismatch = Code("positionMismatch")
        /// An entry is larger than ``LogOptions/maxEntrySize``.
        public static let entryTooLarge = Code("entryTooLarge")
        /// A record is larger than ``LogOptions/maxRecordSize``.
        public static let recordTooLarge = Code("recordTooLarge")
        /// An earlier fsync or write failed; the appender refuses appends until the log is reopened.
        public static let appenderFailed = Code("appenderFailed")
        /// The log was closed.
        public static let closed = Code("closed")
        /// A system call failed (see ``LogError/errno``).
        public static let io = Code("io")
        /// The requested position is not in the log (retired by a snapshot, or past the end).
        public static let positionOutOfRange = Code("positionOutOfRange")
        /// A snapshot file is damaged, truncated, or from another log.
        public static let badSnapshot = Code("badSnapshot")
        /// The directory holds no log and `create` was not requested.
        public static let notFound = Code("notFound")
        /// A file of a newer format version than this reader knows; nothing is wrong with it.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// Another ``SegmentLog`` (in this or another process) has the log open.
        public static let locked = Code("locked")
        /// An argument was invalid (empty record, bad option).
        public static let invalidArgument = Code("invalidArgument")
    }

    public var code: Code
    /// What happened, in words.
    public var message: String
    /// The file concerned, when there is one.
    public var file: String?
    /// The byte offset within ``file`` where the problem starts, when known.
    public var offset: Int64?
    /// The `errno` of a failed system call, when the error is ``Code/io`` or ``Code/appenderFailed``.
    public var errno: Int32?

    public init(_ code: Code, _ message: String, file: String? = nil, offset: Int64? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.offset = offset
        self.errno = errno
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let file { text += " [\(file)" + (offset.map { " @ byte \($0)" } ?? "") + "]" }
        if let errno { text += " (errno \(errno))" }
        return text
    }
}
