/// Opens and recovers a log directory: checks every segment header, verifies records (all of them,
/// or the last segment's with ``OpenVerification/tail``), truncates a torn tail, rebuilds indexes.
struct LogOpener {
    let directory: String
    let options: LogOptions

    struct Opened {
        var logID: LogID
        var segments: [SegmentLog.Segment]
        var activeFile: FileHandle
        var report: RecoveryReport
    }

    func open() throws -> Opened {
        let names = try FileSystem.list(directory)
        let firsts = names.compactMap(SegmentName.position(of:)).sorted()
        var report = RecoveryReport()
        var segments: [SegmentLog.Segment] = []
        var logID: LogID?
        var previousEnd: LogPosition?

        for (i, first) in firsts.enumerated() {
            let name = SegmentName.name(for: first)
            let path = FileSystem.join(directory, name)
            let isLast = i == firsts.count - 1
            let file = try FileHandle.open(path, write: isLast)
            let header = try readHeader(file)
            guard header.firstPosition == first else {
                throw LogError(.positionMismatch, "segment header says its first position is \(header.firstPosition) but the file is named for \(first)", file: path, offset: 32)
            }
            if let logID, header.logID != logID {
                throw LogError(.badSegmentHeader, "segment belongs to another log (\(header.logID), expected \(logID))", file: path, offset: 16)
            }
            logID = header.logID
            if let previousEnd, previousEnd != first {
                throw LogError(.positionMismatch, "segment starts at position \(first) but the previous segment ends at \(previousEnd)", file: path, offset: 32)
            }

            var summary: SegmentSummary
            var verified = true
            if !isLast, options.verification == .tail, let trusted = try trustedIndex(file: file, header: header) {
                summary = trusted
                verified = false
            } else {
                summary = try scan(file: file, header: header, path: path, isLast: isLast, report: &report)
                report.verifiedSegments += 1
                if !isLast { try refreshIndex(summary, file: file, logID: header.logID, report: &report) }
            }
            previousEnd = summary.endPosition
            segments.append(SegmentLog.Segment(name: name, path: path, summary: summary, verified: verified))
            if isLast {
                return Opened(logID: header.logID, segments: segments, activeFile: file, report: report)
            }
        }
        throw LogError(.notFound, "no segment files", file: directory)
    }

    private func readHeader(_ file: FileHandle) throws -> SegmentHeader {
        let bytes = try file.read(count: SegmentHeader.size, at: 0)
        return try bytes.withUnsafeBytes { try SegmentHeader.decode($0, file: file.path) }
    }

    /// Checksums every record of a segment. A damaged record fails the open, except in the last
    /// segment when nothing valid follows it: that is a torn tail, and it is truncated away.
    private func scan(file: FileHandle, header: SegmentHeader, path: String, isLast: Bool, report: inout RecoveryReport) throws -> SegmentSummary {
        let size = try file.size()
        var scanner = SegmentScanner(file: file, logID: header.logID, limit: size, expectedPosition: header.firstPosition)
        var summary = SegmentSummary(firstPosition: header.firstPosition)
        while true {
            switch try scanner.next() {
            case .record(let record, let offset, _):
                summary.add(record, at: offset, interval: options.indexInterval)
            case .end:
                return summary
            case .damaged(let offset, let reason):
                guard isLast, !(try scanner.validRecordExists(after: offset)) else {
                    throw LogError(.corruptRecord, reason, file: path, offset: offset)
                }
                // Torn tail: the last append never completed. Cut it off durably so the next
                // append starts at a record boundary.
                try file.truncate(to: offset)
                try file.sync()
                report.tornTail = RecoveryReport.TornTail(segment: SegmentName.name(for: header.firstPosition), offset: offset,
                                                          droppedBytes: size - offset, reason: reason)
                return summary
            }
        }
    }

    /// The segment's index file when it can be trusted instead of a scan: intact, of this log and
    /// segment, recording exactly the file's size, with a record of the expected position where its
    /// last point says.
    private func trustedIndex(file: FileHandle, header: SegmentHeader) throws -> SegmentSummary? {
        let path = FileSystem.join(directory, SegmentName.indexName(for: header.firstPosition))
        guard let summary = SegmentSummary.load(path, logID: header.logID, firstPosition: header.firstPosition),
              try file.size() == summary.length, summary.pointsAreRecordStarts(file)
        else { return nil }
        return summary
    }

    /// Rewrites a sealed segment's index when the one on disk is missing or disagrees with the scan.
    private func refreshIndex(_ summary: SegmentSummary, file: FileHandle, logID: LogID, report: inout RecoveryReport) throws {
        let name = SegmentName.indexName(for: summary.firstPosition)
        let path = FileSystem.join(directory, name)
        if let existing = SegmentSummary.load(path, logID: logID, firstPosition: summary.firstPosition),
           existing.agrees(with: summary, file: file) {
            return
        }
        // The index is a cache that is rebuilt when wrong, so it needs no fsync.
        try FileSystem.writeAtomically(summary.encoded(logID: logID), to: path, durable: false)
        report.rebuiltIndexes.append(name)
    }
}
