/// The findings of ``SegmentLog/verify(at:progress:record:)``.
public struct VerifyReport: Sendable, Hashable {
    public var segments = 0
    public var records = 0
    public var entries = 0
    /// Bytes of all segments on disk.
    public var storedBytes: Int64 = 0
    /// Bytes of all record payloads, uncompressed.
    public var payloadBytes: Int64 = 0
    public var startPosition: LogPosition?
    public var endPosition: LogPosition?
    /// Problems that make the log unopenable or wrong, in file order; the first is the one
    /// ``SegmentLog/salvage(at:)`` truncates at.
    public var problems: [LogError] = []
    /// A damaged tail of the last segment that opening would truncate (not a problem: the
    /// interrupted append was never acknowledged).
    public var tornTail: RecoveryReport.TornTail?
    /// Index files missing or disagreeing with their segment (rebuilt on the next open).
    public var staleIndexes: [String] = []
    /// Snapshot files and whether each verified.
    public var snapshots: [(info: SnapshotInfo, problem: LogError?)] = []
    /// The log's identity, from its first segment header (`nil` when none could be read).
    public var logID: LogID?

    public init() {}

    public var isHealthy: Bool { problems.isEmpty && snapshots.allSatisfy { $0.problem == nil } }

    public static func == (a: VerifyReport, b: VerifyReport) -> Bool {
        a.segments == b.segments && a.records == b.records && a.entries == b.entries && a.problems == b.problems
            && a.tornTail == b.tornTail && a.staleIndexes == b.staleIndexes
            && a.snapshots.map(\.info) == b.snapshots.map(\.info) && a.snapshots.map(\.problem) == b.snapshots.map(\.problem)
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(records); hasher.combine(problems) }
}

/// What ``SegmentLog/salvage(at:)`` cut off.
public struct SalvageReport: Sendable, Hashable {
    /// The problem the log was cut at, or `nil` when there was nothing to salvage.
    public var problem: LogError?
    /// The segment truncated and the offset it now ends at (`nil` when a whole segment went).
    public var truncatedSegment: String?
    public var truncatedAt: Int64?
    /// Segment files removed whole.
    public var removedSegments: [String] = []
    /// Bytes cut from the log in all.
    public var droppedBytes: Int64 = 0
    /// Records after the damage that still verified and were dropped with them (their copies in
    /// ``quarantine`` are intact).
    public var droppedRecords = 0
    public var droppedEntries = 0
    /// The positions the log no longer holds: from the damaged record to the highest position any
    /// dropped record claimed.
    public var droppedPositions: Range<LogPosition> = 0..<0
    /// Where copies of everything cut were put, so nothing is destroyed.
    public var quarantine: String?
    /// The position the log now ends at.
    public var endPosition: LogPosition = 0
}

extension SegmentLog {
    /// Checks a log directory without opening it for writing: every segment header, every record's
    /// checksum and decoding, position continuity, indexes and snapshots. Never modifies anything.
    ///
    /// - Parameters:
    ///   - directory: the log's directory.
    ///   - progress: called after each record with the bytes checked so far.
    ///   - record: called with each record that verified, in log order — so that tools can read a
    ///     log they must not open for writing (a copy from a device, a log in use) in the same pass
    ///     that checks it. Records after the first problem, or in a torn tail, are never handed out.
    public static func verify(at directory: String, progress: ((_ bytesDone: Int64) -> Void)? = nil,
                              record: ((LogRecord) -> Void)? = nil) throws -> VerifyReport {
        var report = VerifyReport()
        var walk = try SegmentWalk(directory: directory)
        var logID: LogID?
        var segmentName = ""
        try walk.run(decode: true, keepEntries: record != nil, progress: progress) { event in
            switch event {
            case .segment(let name, let header, let size):
                report.segments += 1
                report.storedBytes += size
                logID = header.logID
                segmentName = name
                if report.startPosition == nil { report.startPosition = header.firstPosition }
            case .record(let header, let offset, let entries):
                if let record, let entries {
                    record(LogRecord(entries: entries, firstPosition: header.firstPosition,
                                     minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp,
                                     codec: header.codec, segment: segmentName, offset: offset,
                                     storedSize: Int(header.length), payloadSize: Int(header.payloadLength)))
                }
                report.records += 1
                report.entries += Int(header.entryCount)
                report.payloadBytes += Int64(header.payloadLength)
                report.endPosition = header.endPosition
            case .segmentEnd(let name, let summary, let sealed):
                report.endPosition = summary.endPosition
                if sealed, let logID {
                    let path = FileSystem.join(directory, SegmentName.indexName(for: summary.firstPosition))
                    let segment = try? FileHandle.open(FileSystem.join(directory, name), write: false)
                    let index = SegmentSummary.load(path, logID: logID, firstPosition: summary.firstPosition)
                    if let segment, index?.agrees(with: summary, file: segment) == true {} else { report.staleIndexes.append(name) }
                }
            case .tornTail(let tail):
                report.tornTail = tail
            case .problem(let error):
                report.problems.append(error)
            }
        }
        report.logID = logID
        if let logID {
            let log = SnapshotReader(directory: directory, logID: logID)
            for info in try log.list() {
                do {
                    _ = try log.read(info)
                    report.snapshots.append((info, nil))
                } catch let error as LogError {
                    report.snapshots.append((info, error))
                }
            }
        }
        return report
    }

    /// Truncates the log at its first bad record so that it opens again, and says exactly what was
    /// dropped. The damaged segment's bytes from the bad record on, and every later segment, are
    /// first copied into a `salvaged-<time>` folder inside the log directory.
    ///
    /// - Throws: ``LogError/Code/locked`` while the log is open anywhere.
    public static func salvage(at directory: String) throws -> SalvageReport {
        let lock = try DirectoryLock(directory: directory)
        defer { lock.release() }
        let report = try verify(at: directory)
        var result = SalvageReport()
        result.endPosition = report.endPosition ?? 0
        guard let problem = report.problems.first, let file = problem.file else { return result }
        guard problem.code != .unsupportedVersion else {
            throw LogError(.unsupportedVersion, "refusing to salvage a log written by a newer format: \(problem.message)", file: file, offset: problem.offset)
        }
        result.problem = problem
        let names = try FileSystem.list(directory).compactMap(SegmentName.position(of:)).sorted().map(SegmentName.name(for:))
        guard let damagedIndex = names.firstIndex(where: { FileSystem.join(directory, $0) == file }) else {
            throw LogError(.io, "cannot locate the damaged segment to salvage", file: file)
        }
        let quarantine = FileSystem.join(directory, "salvaged-\(currentLogTimestamp())")
        try FileSystem.makeDirectory(quarantine)
        result.quarantine = quarantine

        let offset = problem.offset ?? 0
        // Damage inside a segment header takes the whole segment.
        let cut = offset < Int64(SegmentHeader.size) ? 0 : offset
        var highest = report.endPosition ?? 0
        for (i, name) in names.enumerated() where i >= damagedIndex {
            let path = FileSystem.join(directory, name)
            let source = try FileHandle.open(path, write: i == damagedIndex)
            let size = try source.size()
            let from = i == damagedIndex ? cut : 0
            let counted = try countRecords(in: source, size: size, from: max(from, Int64(SegmentHeader.size)),
                                           damagedRecordPosition: i == damagedIndex && cut > 0 ? report.endPosition ?? 0 : nil)
            result.droppedRecords += counted.records
            result.droppedEntries += counted.entries
            highest = max(highest, counted.highest)
            let bytes = try source.read(count: Int(size - from), at: from)
            try FileSystem.writeAtomically(bytes, to: FileSystem.join(quarantine, name + (from > 0 ? ".from-\(from)" : "")))
            result.droppedBytes += size - from
            if i == damagedIndex && cut > 0 {
                try source.truncate(to: cut)
                try source.sync()
                result.truncatedSegment = name
                result.truncatedAt = cut
            } else {
                try FileSystem.remove(path)
                result.removedSegments.append(name)
            }
            try FileSystem.remove(FileSystem.join(directory, SegmentName.indexName(for: SegmentName.position(of: name) ?? 0)))
        }
        if result.removedSegments.count == names.count {
            // Even the first segment's header was damaged: keep an empty log at the same position
            // and identity (taken from any header or snapshot that still verifies), so that the
            // directory stays this log rather than silently becoming a new one.
            guard let first = names.first.flatMap(SegmentName.position(of:)), let logID = try recoverLogID(directory: directory, quarantine: quarantine) else {
                throw LogError(.badSegmentHeader, "cannot salvage: no intact segment header or snapshot tells the log's identity; copies are in \(quarantine)", file: file)
            }
            try SegmentLog.createSegment(directory: directory, logID: logID, first: first, created: currentLogTimestamp())
        }
        try FileSystem.syncDirectory(directory)
        let after = try verify(at: directory)
        result.endPosition = after.endPosition ?? after.startPosition ?? 0
        result.droppedPositions = result.endPosition..<max(result.endPosition, highest)
        return result
    }

    /// The log ID from any quarantined segment header or snapshot that verifies.
    private static func recoverLogID(directory: String, quarantine: String) throws -> LogID? {
        for name in try FileSystem.list(quarantine).sorted() {
            let file = try FileHandle.open(FileSystem.join(quarantine, name), write: false)
            let bytes = try file.read(count: SegmentHeader.size, at: 0)
            if let header = try? bytes.withUnsafeBytes({ try SegmentHeader.decode($0, file: name) }) { return header.logID }
        }
        for name in try FileSystem.list(directory) where SnapshotName.position(of: name) != nil {
            let file = try FileHandle.open(FileSystem.join(directory, name), write: false)
            let bytes = try file.read(count: SnapshotFile.headerSize, at: 0)
            if bytes.count == SnapshotFile.headerSize, Array(bytes[0..<8]) == SnapshotFile.magic,
               let size = try? file.size(), let whole = try? file.read(count: Int(size), at: 0),
               CRC32C.checksum(Array(whole[12...])) == whole.withUnsafeBytes({ $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self).littleEndian }) {
                return LogID(unchecked: Array(bytes[20..<36]))
            }
        }
        return nil
    }

    /// Counts the records that still verify in `file` from `offset` on, skipping damage by
    /// searching for the next valid record. With `damagedRecordPosition` the record at `offset` is
    /// the damaged one (expected at that position) and is stepped over.
    private static func countRecords(in file: FileHandle, size: Int64, from offset: Int64, damagedRecordPosition: LogPosition?) throws -> (records: Int, entries: Int, highest: LogPosition) {
        let headerBytes = try file.read(count: SegmentHeader.size, at: 0)
        guard let header = try? headerBytes.withUnsafeBytes({ try SegmentHeader.decode($0, file: file.path) }) else {
            return (0, 0, 0)
        }
        var scanner = SegmentScanner(file: file, logID: header.logID, limit: size, offset: offset, expectedPosition: nil)
        var counted = (records: 0, entries: 0, highest: LogPosition(0))
        if let expected = damagedRecordPosition {
            // The damaged record's header may still tell how far its positions went, when it
            // plausibly belongs where it is.
            if let bytes = try? file.read(count: RecordHeader.size, at: offset),
               case .success(let damaged) = bytes.withUnsafeBytes({ RecordHeader.parse($0) }), damaged.firstPosition == expected {
                counted.highest = damaged.endPosition
            }
            guard try scanner.resynchronize(after: offset) else { return counted }
        }
        while true {
            switch try scanner.next() {
            case .record(let record, _, _):
                counted.records += 1
                counted.entries += Int(record.entryCount)
                counted.highest = max(counted.highest, record.endPosition)
            case .end:
                return counted
            case .damaged(let at, _):
                guard try scanner.resynchronize(after: at) else { return counted }
            }
        }
    }
}

/// Reads snapshots by log ID without an open log (for verification).
struct SnapshotReader {
    let directory: String
    let logID: LogID

    func list() throws -> [SnapshotInfo] {
        try FileSystem.list(directory).compactMap { name -> SnapshotInfo? in
            guard let position = SnapshotName.position(of: name) else { return nil }
            return SnapshotInfo(name: name, path: FileSystem.join(directory, name), position: position)
        }.sorted { $0.position > $1.position }
    }

    func read(_ info: SnapshotInfo) throws -> Snapshot {
        let file = try FileHandle.open(info.path, write: false)
        return try SnapshotFile.decode(try file.read(count: Int(try file.size()), at: 0), info: info, logID: logID)
    }
}

/// Walks every segment of a directory read-only, reporting headers, records and problems in file
/// order. Stops at the first problem (what follows a bad record cannot be framed reliably).
struct SegmentWalk {
    enum Event {
        case segment(name: String, header: SegmentHeader, size: Int64)
        case record(RecordHeader, offset: Int64, entries: [StoredEntry]?)
        case segmentEnd(name: String, summary: SegmentSummary, sealed: Bool)
        case tornTail(RecoveryReport.TornTail)
        case problem(LogError)
    }

    let directory: String
    let names: [String]

    init(directory: String) throws {
        guard FileSystem.isDirectory(directory) else { throw LogError(.notFound, "no log directory", file: directory) }
        self.directory = directory
        self.names = try FileSystem.list(directory).compactMap(SegmentName.position(of:)).sorted().map(SegmentName.name(for:))
        if names.isEmpty { throw LogError(.notFound, "no segment files", file: directory) }
    }

    mutating func run(decode: Bool, keepEntries: Bool = false, progress: ((Int64) -> Void)?, _ report: (Event) -> Void) throws {
        var logID: LogID?
        var expected: LogPosition?
        var done: Int64 = 0
        for (i, name) in names.enumerated() {
            let path = FileSystem.join(directory, name)
            let isLast = i == names.count - 1
            let file = try FileHandle.open(path, write: false)
            let size = try file.size()
            let header: SegmentHeader
            do {
                let bytes = try file.read(count: SegmentHeader.size, at: 0)
                header = try bytes.withUnsafeBytes { try SegmentHeader.decode($0, file: path) }
            } catch let error as LogError {
                return report(.problem(error))
            }
            if let logID, header.logID != logID {
                return report(.problem(LogError(.badSegmentHeader, "segment belongs to another log (\(header.logID), expected \(logID))", file: path, offset: 16)))
            }
            if header.firstPosition != SegmentName.position(of: name) {
                return report(.problem(LogError(.positionMismatch, "segment header says its first position is \(header.firstPosition) but the file is named \(name)", file: path, offset: 32)))
            }
            if let expected, header.firstPosition != expected {
                return report(.problem(LogError(.positionMismatch, "segment starts at position \(header.firstPosition) but the previous segment ends at \(expected)", file: path, offset: 32)))
            }
            logID = header.logID
            report(.segment(name: name, header: header, size: size))
            var scanner = SegmentScanner(file: file, logID: header.logID, limit: size, expectedPosition: header.firstPosition)
            var summary = SegmentSummary(firstPosition: header.firstPosition)
            scanning: while true {
                switch try scanner.next() {
                case .end:
                    break scanning
                case .record(let record, let offset, let stored):
                    var entries: [StoredEntry]?
                    if decode {
                        switch RecordDecoder.entries(header: record, stored: stored) {
                        case .failure(let violation):
                            return report(.problem(LogError(.corruptRecord, violation.description, file: path, offset: offset)))
                        case .success(let decoded):
                            if keepEntries { entries = decoded }
                        }
                    }
                    summary.add(record, at: offset, interval: LogOptions().indexInterval)
                    report(.record(record, offset: offset, entries: entries))
                    progress?(done + offset)
                case .damaged(let offset, let reason):
                    if isLast, !(try scanner.validRecordExists(after: offset)) {
                        report(.tornTail(RecoveryReport.TornTail(segment: name, offset: offset, droppedBytes: size - offset, reason: reason)))
                        break scanning
                    }
                    return report(.problem(LogError(.corruptRecord, reason, file: path, offset: offset)))
                }
            }
            done += size
            expected = summary.endPosition
            report(.segmentEnd(name: name, summary: summary, sealed: !isLast))
        }
    }
}

/// What a log directory says about itself, read without opening it (for tools).
public struct LogIdentity: Sendable, Hashable {
    public var logID: LogID
    /// The first position the log still holds (its first segment's).
    public var startPosition: LogPosition
    /// The snapshot files present, newest (highest position) first; not yet verified (read them
    /// with ``SegmentLog/readSnapshot(_:logID:)``).
    public var snapshots: [SnapshotInfo]
}

extension SegmentLog {
    /// Reads a log directory's identity from its first segment header, and lists its snapshots.
    ///
    /// - Throws: ``LogError/Code/notFound`` when there is no log, ``LogError/Code/badSegmentHeader``
    ///   when the first segment's header does not verify.
    public static func identity(at directory: String) throws -> LogIdentity {
        let walk = try SegmentWalk(directory: directory)
        guard let first = walk.names.first else { throw LogError(.notFound, "no segment files", file: directory) }
        let path = FileSystem.join(directory, first)
        let file = try FileHandle.open(path, write: false)
        let bytes = try file.read(count: SegmentHeader.size, at: 0)
        let header = try bytes.withUnsafeBytes { try SegmentHeader.decode($0, file: path) }
        return LogIdentity(logID: header.logID, startPosition: header.firstPosition,
                           snapshots: try SnapshotReader(directory: directory, logID: header.logID).list())
    }
}

extension SegmentLog {
    /// Reads and verifies the one record at `offset` of a segment file of a log that is not open
    /// (tools that indexed a log with ``verify(at:progress:record:)`` come back for a few records
    /// without walking it again).
    ///
    /// - Throws: ``LogError/Code/corruptRecord`` with the file and offset when the bytes there are
    ///   not a valid record of this log; ``LogError/Code/io`` when the file cannot be read.
    public static func readRecord(segment path: String, offset: Int64) throws -> LogRecord {
        let file = try FileHandle.open(path, write: false)
        let headerBytes = try file.read(count: SegmentHeader.size, at: 0)
        let header = try headerBytes.withUnsafeBytes { try SegmentHeader.decode($0, file: path) }
        var scanner = SegmentScanner(file: file, logID: header.logID, limit: try file.size(), offset: offset, expectedPosition: nil)
        switch try scanner.next() {
        case .record(let record, let at, let stored):
            switch RecordDecoder.entries(header: record, stored: stored) {
            case .failure(let violation):
                throw LogError(.corruptRecord, violation.description, file: path, offset: at)
            case .success(let entries):
                return LogRecord(entries: entries, firstPosition: record.firstPosition, minTimestamp: record.minTimestamp,
                                 maxTimestamp: record.maxTimestamp, codec: record.codec, segment: FileSystem.baseName(path),
                                 offset: at, storedSize: Int(record.length), payloadSize: Int(record.payloadLength))
            }
        case .damaged(let at, let reason):
            throw LogError(.corruptRecord, reason, file: path, offset: at)
        case .end:
            throw LogError(.corruptRecord, "no record at this offset", file: path, offset: offset)
        }
    }
}
