/// When an append's bytes must be on stable storage before `append` returns.
public enum Durability: Sendable, Hashable {
    /// One `fdatasync` per record, records written and synced strictly one after another. The
    /// simplest durable mode; its throughput is bounded by the device's sync latency.
    case fsyncPerRecord
    /// Concurrent appenders share one `fdatasync`: every record written while a sync is in flight
    /// is made durable by the next one. `append` still returns only when its bytes are durable.
    case groupCommit
    /// Appends return as soon as the bytes are in the operating system's page cache. A crash of
    /// the process loses nothing, but **power loss or a kernel crash loses the newest records**
    /// (everything since the last ``SegmentLog/flush()``). Recovery still never yields a partial or
    /// corrupt record.
    case buffered
}

/// Whether and how hard records are compressed. The format is the same either way: each record
/// says whether it is stored raw or as an LZ4 block.
public enum Compression: Sendable, Hashable {
    /// Records are stored raw: least CPU per append.
    case none
    /// LZ4 with this acceleration (1 is LZ4's default; higher is faster and compresses less).
    case lz4(acceleration: Int)

    public static let lz4 = Compression.lz4(acceleration: 1)
}

/// How much of the log ``SegmentLog/open(at:options:)`` checks before returning.
public enum OpenVerification: Sendable, Hashable {
    /// Every record of every segment is checksummed; a bad record anywhere fails the open. Indexes
    /// that disagree with a segment are rebuilt. The default.
    case full
    /// Only the last segment is scanned; a sealed segment whose index file is valid and matches the
    /// segment's header and size is taken on its index's word, and its records are checked when
    /// read. Opens large logs in time independent of their length.
    case tail
}

/// Whether one process or several append to a log.
public enum LogSharing: Sendable, Hashable {
    /// One ``SegmentLog`` appends, in one process; a second open anywhere fails with
    /// ``LogError/Code/locked``. The default, and the fastest: appends need no cross-process lock.
    case exclusive
    /// Several processes (an app, its widget, its share extension) open the log at once, each
    /// appending through ``SegmentLog/withTurn(appending:_:)``, which takes the log's short
    /// cross-process commit lock, shows the records the others appended since, and appends after
    /// them. An exclusive opener is refused while any of them has it open. See <doc:LogFormat>.
    case processes
}

/// Options of a ``SegmentLog``.
public struct LogOptions: Sendable, Hashable {
    /// The format's hard ceiling for one record (header and payload), so lengths fit 32 bits with
    /// room to spare.
    public static let formatMaxRecordSize = 1 << 30

    public var durability: Durability = .groupCommit
    /// Record compression. LZ4 costs about 2.5 µs per KiB of payload on a 2020s core; with a
    /// device that syncs in well under a millisecond, `.none` or a higher acceleration keeps
    /// `fsyncPerRecord` close to the device's own rate.
    public var compression: Compression = .lz4
    /// A segment is sealed and a new one started once it reaches this many bytes. A single record
    /// larger than this still goes into one segment of its own.
    public var segmentSize: Int = 64 << 20
    /// The largest entry accepted, in bytes.
    public var maxEntrySize: Int = 16 << 20
    /// The largest record accepted (header plus uncompressed payload), in bytes. At most
    /// ``formatMaxRecordSize``.
    public var maxRecordSize: Int = 64 << 20
    /// Distance in bytes between two points of the sparse per-segment index.
    public var indexInterval: Int = 64 << 10
    /// Create the directory and an empty log when none exists.
    public var create: Bool = true
    /// How much is checked on open.
    public var verification: OpenVerification = .full
    /// The ID of a newly created log; random when `nil`. Set only to make reproducible fixtures.
    public var newLogID: LogID? = nil
    /// Stamps new segment headers and snapshot files with this time instead of the clock's. Set
    /// only to make reproducible fixtures.
    public var fixedTimestamp: LogTimestamp? = nil
    /// Told of every group commit (entries per fsync, the fsync's duration); none by default.
    public var commitObserver: CommitObserver? = nil
    /// One appending process, or several (see ``LogSharing``).
    public var sharing: LogSharing = .exclusive

    /// The time to write into a new segment header or snapshot file.
    var fileTimestamp: LogTimestamp { fixedTimestamp ?? currentLogTimestamp() }

    public init(durability: Durability = .groupCommit) {
        self.durability = durability
    }

    func validated() throws -> LogOptions {
        guard segmentSize >= 4096 else {
            throw LogError(.invalidArgument, "segmentSize must be at least 4096 bytes, got \(segmentSize)")
        }
        guard maxRecordSize > RecordHeader.size, maxRecordSize <= LogOptions.formatMaxRecordSize else {
            throw LogError(.invalidArgument, "maxRecordSize must be in \(RecordHeader.size + 1)...\(LogOptions.formatMaxRecordSize), got \(maxRecordSize)")
        }
        guard maxEntrySize >= 0, maxEntrySize < maxRecordSize else {
            throw LogError(.invalidArgument, "maxEntrySize must be below maxRecordSize (\(maxRecordSize)), got \(maxEntrySize)")
        }
        guard indexInterval >= 512 else {
            throw LogError(.invalidArgument, "indexInterval must be at least 512 bytes, got \(indexInterval)")
        }
        return self
    }
}
