#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Positions count entries from 0 and only grow.
public typealias LogPosition = UInt64

/// Microseconds since 1970-01-01T00:00:00Z.
public typealias LogTimestamp = Int64

/// The current wall-clock time as a ``LogTimestamp``.
public func currentLogTimestamp() -> LogTimestamp {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return LogTimestamp(ts.tv_sec) * 1_000_000 + LogTimestamp(ts.tv_nsec / 1000)
}

/// An entry to append: opaque bytes and the time it stands for.
public struct LogEntry: Sendable, Hashable {
    public var payload: [UInt8]
    public var timestamp: LogTimestamp

    public init(_ payload: [UInt8], timestamp: LogTimestamp = currentLogTimestamp()) {
        self.payload = payload
        self.timestamp = timestamp
    }
}

/// An entry read back from the log, with its position.
public struct StoredEntry: Sendable, Hashable {
    public var position: LogPosition
    public var timestamp: LogTimestamp
    public var payload: [UInt8]
}

/// One record read back: the entries appended together, and where they lie on disk.
public struct LogRecord: Sendable, Hashable {
    public var entries: [StoredEntry]
    public var firstPosition: LogPosition
    public var minTimestamp: LogTimestamp
    public var maxTimestamp: LogTimestamp
    /// The codec the payload was stored with.
    public var codec: RecordCodec
    /// The segment file name and the byte offset of the record's header in it.
    public var segment: String
    public var offset: Int64
    /// Bytes the record occupies on disk (header included).
    public var storedSize: Int
    /// Bytes of the uncompressed payload.
    public var payloadSize: Int

    /// The position after the record's last entry.
    public var endPosition: LogPosition { firstPosition + LogPosition(entries.count) }
}

/// The result of an append.
public struct AppendResult: Sendable, Hashable {
    /// The positions given to the appended entries, in order.
    public var positions: Range<LogPosition>
    /// Bytes the record occupies on disk.
    public var storedSize: Int
}
