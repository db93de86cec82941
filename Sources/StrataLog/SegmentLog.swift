import Dispatch
import Synchronization

/// An append-only log of opaque entries stored as a directory of segment files.
///
/// Entries are appended in records (the unit of atomicity, compression and checksum) and read
/// back by position. The byte layout and the recovery rules are in <doc:LogFormat>.
///
/// ```swift
/// let log = try SegmentLog.open(at: "/var/lib/app/log", options: LogOptions(durability: .groupCommit))
/// let result = try await log.append([LogEntry(Array("hello".utf8))])
/// for entry in try log.entries(from: result.positions.lowerBound) { print(entry.position) }
/// try await log.close()
/// ```
///
/// Appends may come from many tasks at once; readers run concurrently with them and only ever
/// see whole records that are durable under the log's ``Durability``.
public final class SegmentLog: Sendable {
    /// The log's directory.
    public let directory: String
    /// The random identity of this log.
    public let logID: LogID
    public let options: LogOptions
    /// What recovery did on open (a torn tail truncated, indexes rebuilt).
    public let recovery: RecoveryReport

    /// Shared, quickly held state: what readers may see, the queue of durable appends.
    let state: Mutex<SharedState>
    /// The file being appended to. Held across the append's write (and, in the writer queue, its
    /// sync); always taken before `state`, never after.
    let writer: Mutex<WriterState>
    /// Runs writes and syncs of the durable modes, and flushes, off the cooperative thread pool:
    /// an fsync takes milliseconds and must not block a Swift concurrency thread.
    let writerQueue: DispatchQueue
    /// Held from open to close: one writer per log, or (shared) a writer per process among
    /// processes that all opened it with ``LogSharing/processes``.
    let lock: DirectoryLock
    /// With ``LogSharing/processes``: the cross-process lock around every append (see
    /// SegmentLog+Shared.swift). `nil` for an exclusive log.
    let commitLock: CommitLock?

    struct Segment: Sendable {
        var name: String
        var path: String
        var summary: SegmentSummary
        /// Whether every record was checksummed when the log was opened.
        var verified: Bool
    }

    struct SharedState: Sendable {
        /// Retained segments in position order; the last is the active one. Lengths and end
        /// positions are what readers may see.
        var segments: [Segment]
        /// The next position to hand out (appended, perhaps not yet durable).
        var nextPosition: LogPosition
        var pending: [PendingAppend] = []
        var draining = false
        /// Set by the first failed write or sync; appends are refused from then on.
        var failure: LogError?
        var closed = false
        /// With ``LogSharing/processes``: the completions of turns' appends (and notices) waiting
        /// for the next sync, in position order.
        var turnWaiters: [TurnWaiter] = []
        /// With ``LogSharing/processes``: the end as of the last completed sync (see
        /// ``SegmentLog/durableEndPosition``); what was there at open counts as synced (the
        /// open recovered it).
        var durableEnd: LogPosition = 0
    }

    struct PendingAppend: Sendable {
        var bytes: [UInt8]
        var positions: Range<LogPosition>
        var completion: @Sendable (Result<AppendResult, LogError>) -> Void
    }

    struct WriterState: Sendable {
        var file: FileHandle
        var summary: SegmentSummary
        var segmentName: String
        var unsynced = false
    }

    private init(directory: String, logID: LogID, options: LogOptions, recovery: RecoveryReport,
                 segments: [Segment], activeFile: FileHandle, lock: DirectoryLock, commitLock: CommitLock?) {
        self.lock = lock
        self.commitLock = commitLock
        self.directory = directory
        self.logID = logID
        self.options = options
        self.recovery = recovery
        let last = segments[segments.count - 1]
        self.state = Mutex(SharedState(segments: segments, nextPosition: last.summary.endPosition, durableEnd: last.summary.endPosition))
        self.writer = Mutex(WriterState(file: activeFile, summary: last.summary, segmentName: last.name))
        self.writerQueue = DispatchQueue(label: "strata.log.writer")
    }

    /// Opens the log in `directory`, creating it if needed (``LogOptions/create``), and recovers it:
    /// a torn tail of the last segment is truncated to the last complete record; a bad record
    /// anywhere else fails the open with ``LogError/Code/corruptRecord`` naming the file and byte
    /// offset (see ``salvage(at:)``).
    ///
    /// - Throws: ``LogError``.
    public static func open(at directory: String, options: LogOptions = LogOptions()) throws -> SegmentLog {
        let options = try options.validated()
        if !FileSystem.isDirectory(directory) {
            guard options.create else { throw LogError(.notFound, "no log directory", file: directory) }
            try FileSystem.makeDirectory(directory)
        }
        let shared = options.sharing == .processes
        let lock = try DirectoryLock(directory: directory, shared: shared)
        guard shared else {
            let opened = try recover(directory: directory, options: options)
            return SegmentLog(directory: directory, logID: opened.logID, options: options, recovery: opened.report,
                              segments: opened.segments, activeFile: opened.activeFile, lock: lock, commitLock: nil)
        }
        // Shared: recovered under the commit lock, so that no other process is appending (its
        // torn tail, if it died mid-append, is cut off here) or writing a temporary file.
        let commitLock = try CommitLock(directory: directory)
        let opened = try commitLock.withLock { try recover(directory: directory, options: options) }
        return SegmentLog(directory: directory, logID: opened.logID, options: options, recovery: opened.report,
                          segments: opened.segments, activeFile: opened.activeFile, lock: lock, commitLock: commitLock)
    }

    /// Creates the first segment when there is none, removes temporary and orphaned files, and
    /// recovers the segments (see ``LogOpener``).
    private static func recover(directory: String, options: LogOptions) throws -> LogOpener.Opened {
        let names = try FileSystem.list(directory)
        for name in names where name.hasSuffix(".tmp") {
            try FileSystem.remove(FileSystem.join(directory, name))
        }
        let firsts = names.compactMap(SegmentName.position(of:)).sorted()
        // An index whose segment is gone (a crash during retirement) is an orphan.
        for name in names where name.hasSuffix(SegmentName.indexSuffix) {
            let segment = String(name.dropLast(SegmentName.indexSuffix.count)) + SegmentName.suffix
            if SegmentName.position(of: segment) != nil && !names.contains(segment) {
                try FileSystem.remove(FileSystem.join(directory, name))
            }
        }
        if firsts.isEmpty {
            guard options.create else { throw LogError(.notFound, "no segment files", file: directory) }
            if names.contains(where: { SnapshotName.position(of: $0) != nil }) {
                throw LogError(.notFound, "the directory holds snapshots but no segments", file: directory)
            }
            let logID = options.newLogID ?? LogID.random()
            try createSegment(directory: directory, logID: logID, first: 0, created: options.fileTimestamp)
        }
        return try LogOpener(directory: directory, options: options).open()
    }

    /// Writes a new segment's header atomically (temporary file, fsync, rename, fsync of the
    /// directory), so that a segment file never exists with a torn header.
    @discardableResult
    static func createSegment(directory: String, logID: LogID, first: LogPosition, created: LogTimestamp) throws -> String {
        let name = SegmentName.name(for: first)
        let header = SegmentHeader(logID: logID, firstPosition: first, created: created)
        try FileSystem.writeAtomically(header.encoded(), to: FileSystem.join(directory, name))
        return name
    }

    // MARK: Positions and segments

    /// The first position still held (earlier ones were retired after a snapshot).
    public var startPosition: LogPosition {
        state.withLock { $0.segments[0].summary.firstPosition }
    }

    /// The position after the last entry readers can see (durable, under the log's durability).
    public var endPosition: LogPosition {
        state.withLock { $0.segments[$0.segments.count - 1].summary.endPosition }
    }

    /// The position the next append will get (beyond ``endPosition`` while appends are in flight).
    public var nextPosition: LogPosition {
        state.withLock { $0.nextPosition }
    }

    /// The segments held, oldest first.
    public func segments() -> [SegmentInfo] {
        state.withLock { s in
            s.segments.enumerated().map { i, segment in
                SegmentInfo(name: segment.name, firstPosition: segment.summary.firstPosition,
                            endPosition: segment.summary.endPosition, byteSize: segment.summary.length,
                            recordCount: segment.summary.recordCount, isActive: i == s.segments.count - 1)
            }
        }
    }
}

/// A segment as reported to callers (inspection, tools).
public struct SegmentInfo: Sendable, Hashable {
    public var name: String
    public var firstPosition: LogPosition
    public var endPosition: LogPosition
    public var byteSize: Int64
    public var recordCount: Int
    /// The segment being appended to.
    public var isActive: Bool
}

/// What ``SegmentLog/open(at:options:)`` repaired or rebuilt.
public struct RecoveryReport: Sendable, Hashable {
    /// The last segment's torn tail, if one was truncated.
    public struct TornTail: Sendable, Hashable {
        public var segment: String
        /// Where the log now ends in that segment.
        public var offset: Int64
        public var droppedBytes: Int64
        public var reason: String
    }
    public var tornTail: TornTail?
    /// Index files that were missing, damaged or stale and were rebuilt.
    public var rebuiltIndexes: [String] = []
    /// Segments whose records were all checksummed during the open.
    public var verifiedSegments: Int = 0
}
