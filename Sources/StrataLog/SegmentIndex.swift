/// One point of a segment's sparse index: the record holding `position` starts at `offset`.
struct IndexPoint: Hashable, Sendable {
    var position: LogPosition
    var offset: Int64
}

/// What is known of one segment once its records have been scanned or its index trusted, and the
/// content of its index file (`<first position>.idx`).
///
/// The index is a cache: it is rebuilt whenever it is missing, damaged or disagrees with the
/// segment, and it is only trusted (with ``OpenVerification/tail``) when it matches the segment's
/// header, size and log ID.
struct SegmentSummary: Hashable, Sendable {
    static let magic: [UInt8] = Array("STRATAIX".utf8)
    static let version: UInt16 = 1

    var firstPosition: LogPosition
    var endPosition: LogPosition
    /// Bytes of valid data, header included.
    var length: Int64
    var recordCount: Int
    var points: [IndexPoint]

    init(firstPosition: LogPosition) {
        self.firstPosition = firstPosition
        self.endPosition = firstPosition
        self.length = Int64(SegmentHeader.size)
        self.recordCount = 0
        self.points = []
    }

    /// Accounts for one more record at `offset`, adding an index point when the last one lies at
    /// least `interval` bytes back.
    mutating func add(_ header: RecordHeader, at offset: Int64, interval: Int) {
        if let last = points.last {
            if offset - last.offset >= Int64(interval) {
                points.append(IndexPoint(position: header.firstPosition, offset: offset))
            }
        } else {
            points.append(IndexPoint(position: header.firstPosition, offset: offset))
        }
        endPosition = header.endPosition
        length = offset + Int64(header.length)
        recordCount += 1
    }

    /// Where to start scanning to find `position`: the offset, and the position of the record
    /// that starts there.
    func scanStart(for position: LogPosition) -> (offset: Int64, position: LogPosition) {
        var lo = 0
        var hi = points.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if points[mid].position <= position { lo = mid + 1 } else { hi = mid }
        }
        return lo == 0 ? (Int64(SegmentHeader.size), firstPosition) : (points[lo - 1].offset, points[lo - 1].position)
    }

    func encoded(logID: LogID) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + points.count * 16)
        w.raw(SegmentSummary.magic)
        w.u32(0)
        w.u16(SegmentSummary.version)
        w.u16(0)
        w.raw(logID.bytes)
        w.u64(firstPosition)
        w.u64(endPosition)
        w.u64(UInt64(length))
        w.u32(UInt32(recordCount))
        w.u32(UInt32(points.count))
        for point in points {
            w.u64(point.position)
            w.u64(UInt64(point.offset))
        }
        let crc = w.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        w.setU32(crc, at: 8)
        return w.bytes
    }

    /// Whether this index (read from disk) describes the same segment as `scanned` (from a scan)
    /// and every point is a record start: it may use another interval, but never a wrong offset.
    func agrees(with scanned: SegmentSummary, file: FileHandle) -> Bool {
        guard firstPosition == scanned.firstPosition, endPosition == scanned.endPosition,
              length == scanned.length, recordCount == scanned.recordCount else { return false }
        return pointsAreRecordStarts(file)
    }

    /// Reads the record header at every point: each must parse and start at the point's position.
    func pointsAreRecordStarts(_ file: FileHandle) -> Bool {
        var previous: IndexPoint?
        for point in points {
            if let previous, point.offset <= previous.offset || point.position <= previous.position { return false }
            guard point.offset >= Int64(SegmentHeader.size), point.offset + Int64(RecordHeader.size) <= length,
                  let bytes = try? file.read(count: RecordHeader.size, at: point.offset),
                  case .success(let header) = bytes.withUnsafeBytes({ RecordHeader.parse($0) }),
                  header.firstPosition == point.position, point.offset + Int64(header.length) <= length
            else { return false }
            previous = point
        }
        return true
    }

    /// Reads and decodes the index file at `path`; `nil` when missing, damaged or not this segment's.
    static func load(_ path: String, logID: LogID, firstPosition: LogPosition) -> SegmentSummary? {
        guard FileSystem.exists(path),
              let index = try? FileHandle.open(path, write: false),
              let size = try? index.size(), size < 64 << 20,
              let bytes = try? index.read(count: Int(size), at: 0)
        else { return nil }
        return decode(bytes, logID: logID, firstPosition: firstPosition)
    }

    /// Decodes an index file; `nil` when it is damaged or does not belong to this log and segment.
    static func decode(_ bytes: [UInt8], logID: LogID, firstPosition: LogPosition) -> SegmentSummary? {
        bytes.withUnsafeBytes { raw -> SegmentSummary? in
            var r = ByteReader(raw)
            guard raw.count >= 64, let magicBytes = r.bytes(8), Array(magicBytes) == magic,
                  let stored = r.u32(), CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[12...])) == stored,
                  r.u16() == version, r.u16() == 0,
                  let id = r.bytes(16), Array(id) == logID.bytes,
                  let first = r.u64(), first == firstPosition,
                  let end = r.u64(), end >= first, let length = r.u64(), let records = r.u32(), let count = r.u32(),
                  Int(count) * 16 == r.remaining,
                  // A file offset beyond Int64 is damage (the index is then rebuilt), not a trap.
                  let size = Int64(exactly: length)
            else { return nil }
            var summary = SegmentSummary(firstPosition: first)
            summary.endPosition = end
            summary.length = size
            summary.recordCount = Int(records)
            for _ in 0..<count {
                guard let position = r.u64(), let offset = r.u64(), let at = Int64(exactly: offset) else { return nil }
                summary.points.append(IndexPoint(position: position, offset: at))
            }
            return summary
        }
    }
}
