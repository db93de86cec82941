/// A copy of a log with every entry's and snapshot's payload passed through a transform: the
/// same log ID, segments, record boundaries, positions and timestamps, so that whatever reads
/// the copy (positions in a report, a replay to a time, a diff's timelines) reads the original's
/// structure. A debug bundle's redacted log is one (`strata bundle --redact`).
///
/// The copy has no index files (whoever opens the log rebuilds them) and is not synced to disk
/// (it is scratch for a bundle, not a store).
package enum LogCopy {
    package struct Outcome: Sendable {
        package var segments = 0
        package var records = 0
        package var entries = 0
        package var snapshots = 0
        /// A torn tail of the last segment that was left out, as opening the log would cut it.
        package var tornTail: String?
    }

    /// Copies the log at `source` into the directory `destination` (created; must not exist).
    ///
    /// - Parameters:
    ///   - entry: the payload to store for each entry, in position order.
    ///   - snapshot: the payload to store for each snapshot that verifies (one that does not is
    ///     left out, as readers skip it).
    /// - Throws: ``LogError`` for a log that does not verify (other than a torn tail), for a
    ///   transformed entry too large for a record, or for a write that fails.
    package static func copy(from source: String, to destination: String,
                             entry: (StoredEntry) throws -> [UInt8], snapshot: (Snapshot) throws -> [UInt8]) throws -> Outcome {
        try FileSystem.makeDirectory(destination)
        var outcome = Outcome()
        var walk = try SegmentWalk(directory: source)
        var logID: LogID?
        var file: FileHandle?
        var offset: Int64 = 0
        var end: LogPosition = 0
        var failure: (any Error)?
        // Records are re-encoded with the log's own limits, so a copy reads where the original does.
        var options = LogOptions()
        options.maxEntrySize = LogOptions.formatMaxRecordSize - 64
        options.maxRecordSize = LogOptions.formatMaxRecordSize
        try walk.run(decode: true, keepEntries: true, progress: nil) { event in
            guard failure == nil else { return }
            do {
                switch event {
                case .segment(let name, let header, _):
                    logID = header.logID
                    let created = try FileHandle.open(FileSystem.join(destination, name), write: true, create: true, exclusive: true)
                    let bytes = header.encoded()
                    try created.write(bytes, at: 0)
                    file = created
                    offset = Int64(bytes.count)
                    outcome.segments += 1
                case .record(let header, _, let entries):
                    guard let entries, let file, let logID else { return }
                    let transformed = try entries.map { LogEntry(try entry($0), timestamp: $0.timestamp) }
                    let record = try EncodedPayload(entries: transformed, options: options).record(firstPosition: header.firstPosition, logID: logID)
                    try file.write(record, at: offset)
                    offset += Int64(record.count)
                    outcome.records += 1
                    end = header.endPosition
                    outcome.entries += entries.count
                case .segmentEnd:
                    break
                case .tornTail(let torn):
                    outcome.tornTail = "\(torn.segment) at byte \(torn.offset): \(torn.reason)"
                case .problem(let error):
                    throw error
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        guard let logID else { return outcome }
        // Snapshots as far as the copied log goes: one written while the log was being copied
        // may cover records the copy does not have.
        for info in try SnapshotReader(directory: source, logID: logID).list() where info.position <= end {
            guard let read = try? SnapshotReader(directory: source, logID: logID).read(info) else { continue }
            let bytes = SnapshotFile.encode(try snapshot(read), position: info.position, logID: logID, created: read.created)
            let out = try FileHandle.open(FileSystem.join(destination, info.name), write: true, create: true, exclusive: true)
            try out.write(bytes, at: 0)
            outcome.snapshots += 1
        }
        return outcome
    }
}
