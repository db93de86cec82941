/// Follows a log that another process is writing, without its lock: each ``read(limit:)`` returns
/// the entries appended since the last one, as far as whole records are on disk.
///
/// A second process — a widget, a share extension, the command line tool while the app runs —
/// reads the log read-only; it never truncates or repairs anything (that is the writer's job on
/// open). Bytes past the last whole record are a record the writer has not finished: the tail
/// stops before them and tries again on the next read. Each record is checked as every reader
/// checks it (framing, CRC-32C, positions); damage before the writer's end is an error.
///
/// History the writer compacted away (segments retired since the tail last read) cannot be
/// followed: ``read(limit:)`` throws ``LogError/Code/positionOutOfRange`` and the reader starts
/// again from the newest snapshot.
///
/// Not thread-safe: one tail per reader, used by one task at a time.
public final class LogTail {
    public let directory: String
    /// The position of the next entry to return.
    public private(set) var nextPosition: LogPosition

    /// The segment being read, the offset after the last record read, and the position the next
    /// record there must start at.
    private var current: (name: String, file: FileHandle, logID: LogID, offset: Int64, expected: LogPosition)?

    /// - Parameters:
    ///   - directory: the log's directory.
    ///   - position: the first entry to return (a snapshot's position, say).
    public init(directory: String, from position: LogPosition) {
        self.directory = directory
        self.nextPosition = position
    }

    /// The entries from ``nextPosition`` on that the writer has finished, at most `limit`.
    ///
    /// - Throws: ``LogError/Code/positionOutOfRange`` when the log no longer holds
    ///   ``nextPosition`` (compacted away); ``LogError/Code/corruptRecord`` and the other format
    ///   errors, with file and offset, for damage before the writer's end.
    public func read(limit: Int = .max) throws -> [StoredEntry] {
        var entries: [StoredEntry] = []
        while entries.count < limit {
            if current == nil { guard try openSegment() else { break } }
            guard var segment = current else { break }
            let path = FileSystem.join(directory, segment.name)
            var scanner = SegmentScanner(file: segment.file, logID: segment.logID, limit: try segment.file.size(),
                                         offset: segment.offset, expectedPosition: segment.expected)
            var reachedEnd = false
            scanning: while entries.count < limit {
                switch try scanner.next() {
                case .record(let header, let offset, let stored):
                    switch RecordDecoder.entries(header: header, stored: stored) {
                    case .failure(let violation):
                        throw LogError(.corruptRecord, violation.description, file: path, offset: offset)
                    case .success(let decoded):
                        for entry in decoded where entry.position >= nextPosition { entries.append(entry) }
                    }
                    nextPosition = max(nextPosition, header.endPosition)
                    segment.offset = scanner.offset
                    segment.expected = header.endPosition
                case .end:
                    reachedEnd = true
                    break scanning
                case .damaged(let offset, let reason):
                    // The writer's record in progress, unless the writer has moved on to a later
                    // segment: then these bytes will never become a record.
                    if try laterSegment(after: segment.name) != nil {
                        throw LogError(.corruptRecord, reason, file: path, offset: offset)
                    }
                    break scanning
                }
            }
            current = segment
            guard reachedEnd, let next = try laterSegment(after: segment.name) else { break }
            // The writer rolled over: the next segment starts where this one ended.
            guard SegmentName.position(of: next) == segment.expected else {
                throw LogError(.positionMismatch, "segment \(next) does not start where \(segment.name) ends (\(segment.expected))", file: FileSystem.join(directory, next))
            }
            current = nil
        }
        return entries
    }

    /// Opens the segment that holds ``nextPosition``; `false` when none does yet (the log ends
    /// before it, or is empty).
    private func openSegment() throws -> Bool {
        let firsts = try FileSystem.list(directory).compactMap(SegmentName.position(of:)).sorted()
        guard let oldest = firsts.first else { return false }
        guard nextPosition >= oldest else {
            throw LogError(.positionOutOfRange, "position \(nextPosition) was compacted away; the log now starts at \(oldest)", file: directory)
        }
        guard let first = firsts.last(where: { $0 <= nextPosition }) else { return false }
        let name = SegmentName.name(for: first)
        let path = FileSystem.join(directory, name)
        let file = try FileHandle.open(path, write: false)
        let header = try file.read(count: SegmentHeader.size, at: 0).withUnsafeBytes { try SegmentHeader.decode($0, file: path) }
        guard header.firstPosition == first else {
            throw LogError(.positionMismatch, "segment header says its first position is \(header.firstPosition) but the file is named \(name)", file: path, offset: 32)
        }
        current = (name, file, header.logID, Int64(SegmentHeader.size), first)
        return true
    }

    /// The name of the segment after `name`, when the writer has created one.
    private func laterSegment(after name: String) throws -> String? {
        guard let position = SegmentName.position(of: name) else { return nil }
        return try FileSystem.list(directory).compactMap(SegmentName.position(of:)).filter { $0 > position }.min().map(SegmentName.name(for:))
    }
}
