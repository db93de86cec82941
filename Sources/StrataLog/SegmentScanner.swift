/// Reads the records of one segment file in order through a read-ahead buffer, checking each
/// record's framing, checksum and position. Shared by recovery on open, reading, verification and
/// salvage, so every path applies exactly the same rules.
struct SegmentScanner: Sendable {
    /// What the scanner found at its current offset.
    enum Step {
        /// A record that passed every check; `stored` is valid until the next call.
        case record(RecordHeader, offset: Int64, stored: UnsafeRawBufferPointer)
        /// The clean end of the readable bytes.
        case end
        /// Bytes at `offset` are not a valid record, for the reason given.
        case damaged(offset: Int64, reason: String)
    }

    let file: FileHandle
    let logID: LogID
    /// Bytes beyond this are not read (the visible length for readers, the file size otherwise).
    let limit: Int64
    private(set) var offset: Int64
    private(set) var expectedPosition: LogPosition?

    private var buffer: [UInt8] = []
    private var bufferStart: Int64 = 0
    private var bufferCount = 0
    /// How much one read takes in: 1 MiB for scans of whole segments; a follower of another
    /// process's few new records asks for about what is there (the buffer is zeroed when made).
    private let readAhead: Int

    init(file: FileHandle, logID: LogID, limit: Int64, offset: Int64 = Int64(SegmentHeader.size), expectedPosition: LogPosition?,
         readAhead: Int = 1 << 20) {
        self.readAhead = readAhead
        self.file = file
        self.logID = logID
        self.limit = limit
        self.offset = offset
        self.expectedPosition = expectedPosition
    }

    /// Ensures bytes `[at, at+count)` are in the buffer; returns how many of them are (fewer only
    /// at `limit`).
    private mutating func fill(_ at: Int64, _ count: Int) throws -> Int {
        let wanted = Int(min(Int64(count), max(0, limit - at)))
        if at >= bufferStart && at + Int64(wanted) <= bufferStart + Int64(bufferCount) { return wanted }
        // No more than the segment holds past `at`: a pull of a zone's few newest records (a
        // long poll's answer) would otherwise make and zero a whole read-ahead buffer for them.
        let size = max(wanted, Int(min(Int64(readAhead), max(0, limit - at))))
        if buffer.count < size { buffer = [UInt8](repeating: 0, count: size) }
        let toRead = Int(min(Int64(size), max(0, limit - at)))
        let got = try buffer.withUnsafeMutableBytes { raw in
            try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<toRead]), at: at)
        }
        bufferStart = at
        bufferCount = got
        return min(wanted, got)
    }

    /// The next step; after `.record` the scanner has moved past the record, after `.damaged` it
    /// has not moved.
    mutating func next() throws -> Step {
        if offset >= limit { return .end }
        let start = offset
        let headerBytes = try fill(start, RecordHeader.size)
        if headerBytes < RecordHeader.size {
            return .damaged(offset: start, reason: "partial record header (\(headerBytes) bytes before end of data)")
        }
        let header: RecordHeader
        let headerStart = Int(start - bufferStart)
        switch buffer.withUnsafeBytes({ RecordHeader.parse(UnsafeRawBufferPointer(rebasing: $0[headerStart..<headerStart + RecordHeader.size])) }) {
        case .failure(let violation): return .damaged(offset: start, reason: violation.description)
        case .success(let parsed): header = parsed
        }
        let length = Int(header.length)
        if start + Int64(length) > limit {
            return .damaged(offset: start, reason: "record of \(length) bytes extends past end of data at \(limit)")
        }
        let got = try fill(start, length)
        guard got == length else {
            return .damaged(offset: start, reason: "record truncated: \(got) of \(length) bytes")
        }
        let base = Int(start - bufferStart)
        let (checksum, computed): (UInt32, UInt32) = buffer.withUnsafeBytes { raw in
            let record = UnsafeRawBufferPointer(rebasing: raw[base..<base + length])
            return (header.checksum, RecordHeader.computeChecksum(record: record, logID: logID))
        }
        guard checksum == computed else {
            return .damaged(offset: start, reason: "record checksum mismatch (stored \(hex(checksum)), computed \(hex(computed)))")
        }
        if let expected = expectedPosition, header.firstPosition != expected {
            return .damaged(offset: start, reason: "record starts at position \(header.firstPosition), expected \(expected)")
        }
        offset = start + Int64(length)
        expectedPosition = header.endPosition
        let stored = buffer.withUnsafeBytes { raw in
            UnsafeRawBufferPointer(rebasing: raw[base + RecordHeader.size..<base + length])
        }
        return .record(header, offset: start, stored: stored)
    }

    /// Whether any valid record of this log starts after `offset`: the test that tells a torn tail
    /// (nothing valid follows the damage) from corruption in the middle (something does).
    mutating func validRecordExists(after offset: Int64) throws -> Bool {
        try nextValidRecord(after: offset) != nil
    }

    /// Moves the scanner to the first valid record after damage at `offset` (any position; the
    /// position check restarts there). Returns `false`, without moving, when there is none.
    mutating func resynchronize(after offset: Int64) throws -> Bool {
        guard let found = try nextValidRecord(after: offset) else { return false }
        self.offset = found
        expectedPosition = nil
        return true
    }

    /// The offset of the first record after `offset` that passes its checksum.
    private mutating func nextValidRecord(after offset: Int64) throws -> Int64? {
        var candidate = offset + 1
        while candidate + Int64(RecordHeader.size) <= limit {
            let got = try fill(candidate, RecordHeader.size)
            if got < RecordHeader.size { return nil }
            let at = Int(candidate - bufferStart)
            let parsed = buffer.withUnsafeBytes { RecordHeader.parse(UnsafeRawBufferPointer(rebasing: $0[at..<at + RecordHeader.size])) }
            if case .success(let header) = parsed, candidate + Int64(header.length) <= limit {
                let length = Int(header.length)
                if try fill(candidate, length) == length {
                    let base = Int(candidate - bufferStart)
                    let valid = buffer.withUnsafeBytes { raw in
                        RecordHeader.computeChecksum(record: UnsafeRawBufferPointer(rebasing: raw[base..<base + length]), logID: logID) == header.checksum
                    }
                    if valid { return candidate }
                }
            }
            candidate += 1
        }
        return nil
    }
}
