import Dispatch
import Synchronization

extension SegmentLog {
    /// A cursor over the records that hold positions `position` and later, up to the end visible
    /// now. The first record may start before `position` (records are read whole).
    ///
    /// - Throws: ``LogError/Code/positionOutOfRange`` when `position` was retired or lies past the
    ///   end, ``LogError/Code/closed``.
    public func records(from position: LogPosition) throws -> LogCursor {
        let segments = try state.withLock { s -> [Segment] in
            if s.closed { throw LogError(.closed, "the log is closed", file: directory) }
            return s.segments
        }
        let start = segments[0].summary.firstPosition
        let end = segments[segments.count - 1].summary.endPosition
        guard position >= start else {
            throw LogError(.positionOutOfRange, "position \(position) was retired; the log starts at \(start)", file: directory)
        }
        guard position <= end else {
            throw LogError(.positionOutOfRange, "position \(position) is past the end of the log (\(end))", file: directory)
        }
        return LogCursor(logID: logID, segments: segments, from: position)
    }

    /// The entries at positions `position` and later (at most `limit` of them), up to the end
    /// visible now.
    public func entries(from position: LogPosition, limit: Int = .max) throws -> [StoredEntry] {
        var cursor = try records(from: position)
        var result: [StoredEntry] = []
        while result.count < limit, let record = try cursor.next() {
            for entry in record.entries where entry.position >= position {
                result.append(entry)
                if result.count == limit { break }
            }
        }
        return result
    }
}

/// Reads records in position order from a fixed view of the log (the segments and lengths visible
/// when the cursor was made), so that it never sees a partial record even while appends go on.
///
/// ```swift
/// var cursor = try log.records(from: 0)
/// while let record = try cursor.next() { … }
/// ```
public struct LogCursor: Sendable {
    private let logID: LogID
    private let segments: [SegmentLog.Segment]
    private let from: LogPosition
    private var segmentIndex: Int
    private var scanner: SegmentScanner?

    init(logID: LogID, segments: [SegmentLog.Segment], from: LogPosition) {
        self.logID = logID
        self.segments = segments
        self.from = from
        // The segment holding `from`: the last one whose first position is at or before it.
        var index = 0
        for (i, segment) in segments.enumerated() where segment.summary.firstPosition <= from { index = i }
        self.segmentIndex = index
    }

    /// The next record, or `nil` at the end of the view.
    ///
    /// - Throws: ``LogError/Code/corruptRecord`` with the segment file and byte offset when a record
    ///   fails its checks; ``LogError/Code/io`` when a file cannot be read (for instance, retired
    ///   while the cursor was open).
    public mutating func next() throws -> LogRecord? {
        while segmentIndex < segments.count {
            let segment = segments[segmentIndex]
            if scanner == nil {
                if segment.summary.endPosition <= from || segment.summary.recordCount == 0 {
                    segmentIndex += 1
                    continue
                }
                let file = try FileHandle.open(segment.path, write: false)
                let start = segment.summary.scanStart(for: from)
                scanner = SegmentScanner(file: file, logID: logID, limit: segment.summary.length, offset: start.offset, expectedPosition: start.position)
            }
            switch try scanner!.next() {
            case .end:
                scanner = nil
                segmentIndex += 1
            case .damaged(let offset, let reason):
                throw LogError(.corruptRecord, reason, file: segment.path, offset: offset)
            case .record(let header, let offset, let stored):
                if header.endPosition <= from { continue }
                switch RecordDecoder.entries(header: header, stored: stored) {
                case .failure(let violation):
                    throw LogError(.corruptRecord, violation.description, file: segment.path, offset: offset)
                case .success(let entries):
                    return LogRecord(entries: entries, firstPosition: header.firstPosition,
                                     minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp,
                                     codec: header.codec, segment: segment.name, offset: offset,
                                     storedSize: Int(header.length), payloadSize: Int(header.payloadLength))
                }
            }
        }
        return nil
    }
}
