import Foundation

/// A copy of a log with every entry's and snapshot's payload passed through a transform: the
/// same log ID, segments, record boundaries, positions and timestamps, so that whatever reads
/// the copy (positions in a report, a replay to a time, a diff's timelines) reads the original's
/// structure. A debug bundle's redacted log is one (`strata bundle --redact`).
///
/// The copy goes to a ``LogCopySink``: a log directory (``LogCopy/DirectoryWriter``), or a
/// bundle's packed log, which is later unpacked into a directory through the same writer.
/// The directory has no index files (whoever opens the log rebuilds them) and is not synced to
/// disk (it is scratch for a bundle, not a store).
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
                             entry: @Sendable (StoredEntry) throws -> [UInt8], snapshot: (Snapshot) throws -> [UInt8]) throws -> Outcome {
        var writer = try DirectoryWriter(destination: destination)
        return try copy(from: source, into: &writer, entry: entry, snapshot: snapshot)
    }

    /// Copies the log at `source` into `sink`: each segment, then its records in position
    /// order, then the snapshots as far as the copied records go.
    ///
    /// `entry` runs on every core at once, over batches of records (a redaction's keyed hashes
    /// and re-encoding are most of a bundle's time): it must be safe to call concurrently. The
    /// sink gets the records in order, one at a time.
    package static func copy<Sink: LogCopySink>(from source: String, into sink: inout Sink,
                                                entry: @Sendable (StoredEntry) throws -> [UInt8], snapshot: (Snapshot) throws -> [UInt8]) throws -> Outcome {
        var outcome = Outcome()
        var walk = try SegmentWalk(directory: source)
        var logID: LogID?
        var end: LogPosition = 0
        var failure: (any Error)?
        var batch: [(firstPosition: LogPosition, entries: [StoredEntry])] = []
        var batchEntries = 0
        func flush() throws {
            guard !batch.isEmpty else { return }
            let transformed = try transform(batch.flatMap(\.entries), entry)
            var next = 0
            for record in batch {
                try sink.record(firstPosition: record.firstPosition, entries: Array(transformed[next..<(next + record.entries.count)]))
                next += record.entries.count
            }
            batch.removeAll(keepingCapacity: true)
            batchEntries = 0
        }
        try walk.run(decode: true, keepEntries: true, progress: nil) { event in
            guard failure == nil else { return }
            do {
                switch event {
                case .segment(_, let header, _):
                    try flush()
                    logID = header.logID
                    try sink.segment(logID: header.logID, firstPosition: header.firstPosition, created: header.created)
                    outcome.segments += 1
                case .record(let header, _, let entries):
                    guard let entries, logID != nil else { return }
                    batch.append((header.firstPosition, entries))
                    batchEntries += entries.count
                    if batchEntries >= 4096 { try flush() }
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
        try flush()
        guard let logID else { return outcome }
        // Snapshots as far as the copied log goes: one written while the log was being copied
        // may cover records the copy does not have.
        for info in try SnapshotReader(directory: source, logID: logID).list() where info.position <= end {
            guard let read = try? SnapshotReader(directory: source, logID: logID).read(info) else { continue }
            try sink.snapshot(position: info.position, created: read.created, payload: try snapshot(read))
            outcome.snapshots += 1
        }
        return outcome
    }

    /// `entry` of each of `entries`, in their order, computed on every core; the first error
    /// (in position order) is thrown.
    private static func transform(_ entries: [StoredEntry], _ entry: @Sendable (StoredEntry) throws -> [UInt8]) throws -> [LogEntry] {
        let parts = min(entries.count, 4 * ProcessInfo.processInfo.activeProcessorCount)
        guard parts > 1 else { return try entries.map { LogEntry(try entry($0), timestamp: $0.timestamp) } }
        let results = ResultSlots(count: parts)
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            let range = (entries.count * part / parts)..<(entries.count * (part + 1) / parts)
            results.set(part, Result { try entries[range].map { LogEntry(try entry($0), timestamp: $0.timestamp) } })
        }
        var out: [LogEntry] = []
        out.reserveCapacity(entries.count)
        for part in 0..<parts { out += try results.get(part).get() }
        return out
    }

    /// One result per part of a parallel transform, written from the worker threads.
    private final class ResultSlots: @unchecked Sendable {
        private let lock = NSLock()
        private var slots: [Result<[LogEntry], any Error>]
        init(count: Int) { slots = Array(repeating: .success([]), count: count) }
        func set(_ i: Int, _ value: Result<[LogEntry], any Error>) { lock.withLock { slots[i] = value } }
        func get(_ i: Int) -> Result<[LogEntry], any Error> { lock.withLock { slots[i] } }
    }

    /// Writes a copy as a log directory: segment files of records encoded as a log writes them
    /// (with the format's largest limits, so that a copy reads wherever the original does), and
    /// snapshot files.
    package struct DirectoryWriter: LogCopySink {
        package let destination: String
        private var logID: LogID?
        private var file: FileHandle?
        private var offset: Int64 = 0
        private let options: LogOptions

        /// Creates `destination` (it must not exist).
        package init(destination: String) throws {
            try FileSystem.makeDirectory(destination)
            self.destination = destination
            var options = LogOptions()
            options.maxEntrySize = LogOptions.formatMaxRecordSize - 64
            options.maxRecordSize = LogOptions.formatMaxRecordSize
            self.options = options
        }

        package mutating func segment(logID: LogID, firstPosition: LogPosition, created: LogTimestamp) throws {
            self.logID = logID
            let handle = try FileHandle.open(FileSystem.join(destination, SegmentName.name(for: firstPosition)), write: true, create: true, exclusive: true)
            let bytes = SegmentHeader(logID: logID, firstPosition: firstPosition, created: created).encoded()
            try handle.write(bytes, at: 0)
            file = handle
            offset = Int64(bytes.count)
        }

        package mutating func record(firstPosition: LogPosition, entries: [LogEntry]) throws {
            guard let file, let logID else { throw LogError(.invalidArgument, "a record before the first segment") }
            let record = try EncodedPayload(entries: entries, options: options).record(firstPosition: firstPosition, logID: logID)
            try file.write(record, at: offset)
            offset += Int64(record.count)
        }

        package mutating func snapshot(position: LogPosition, created: LogTimestamp, payload: [UInt8]) throws {
            guard let logID else { throw LogError(.invalidArgument, "a snapshot of a log without segments") }
            let bytes = SnapshotFile.encode(payload, position: position, logID: logID, created: created)
            let out = try FileHandle.open(FileSystem.join(destination, SnapshotName.name(for: position)), write: true, create: true, exclusive: true)
            try out.write(bytes, at: 0)
        }
    }
}

/// Where ``LogCopy`` puts a copied log: segments in order, each followed by its records, then the
/// snapshots.
package protocol LogCopySink {
    mutating func segment(logID: LogID, firstPosition: LogPosition, created: LogTimestamp) throws
    mutating func record(firstPosition: LogPosition, entries: [LogEntry]) throws
    mutating func snapshot(position: LogPosition, created: LogTimestamp, payload: [UInt8]) throws
}
