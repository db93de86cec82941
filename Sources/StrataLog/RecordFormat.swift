/// How a record's payload is stored.
public enum RecordCodec: UInt8, Sendable, Hashable {
    /// Stored as is, because compression did not pay.
    case raw = 0
    /// One LZ4 block.
    case lz4 = 1
}

/// The fixed 48-byte header in front of every record (layout in the format article).
struct RecordHeader: Hashable, Sendable {
    static let size = 48

    /// Header plus stored payload, in bytes.
    var length: UInt32
    var checksum: UInt32
    var codec: RecordCodec
    var entryCount: UInt32
    var firstPosition: LogPosition
    var payloadLength: UInt32
    var minTimestamp: LogTimestamp
    var maxTimestamp: LogTimestamp

    var endPosition: LogPosition { firstPosition + LogPosition(entryCount) }

    /// Parses a header, or says why its fields cannot be a record's. Checked before the checksum so
    /// that garbage is rejected cheaply while searching a damaged tail.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<RecordHeader, FormatViolation> {
        var r = ByteReader(bytes)
        guard bytes.count >= size,
              let length = r.u32(), let checksum = r.u32(), let codecByte = r.u8(), let flags = r.u8(),
              let headerSize = r.u16(), let count = r.u32(), let first = r.u64(), let payloadLength = r.u32(),
              let reserved = r.u32(), let minTs = r.i64(), let maxTs = r.i64()
        else { return .failure(FormatViolation("record header truncated")) }
        if length == 0 { return .failure(FormatViolation("zero length (zero-filled bytes)")) }
        guard Int(length) >= size, Int(length) <= LogOptions.formatMaxRecordSize else {
            return .failure(FormatViolation("record length \(length) out of range"))
        }
        guard headerSize == UInt16(size) else { return .failure(FormatViolation("unexpected record header size \(headerSize)")) }
        guard let codec = RecordCodec(rawValue: codecByte) else { return .failure(FormatViolation("unknown codec \(codecByte)")) }
        guard flags == 0, reserved == 0 else { return .failure(FormatViolation("reserved header bits set")) }
        guard count > 0 else { return .failure(FormatViolation("record with no entries")) }
        guard minTs <= maxTs else { return .failure(FormatViolation("timestamp range inverted")) }
        // Its entries' positions must be numbers: a first position this close to the top would
        // wrap (found by fuzzing: the decoder trapped computing the second entry's position).
        guard first <= LogPosition.max - LogPosition(count) else {
            return .failure(FormatViolation("first position \(first) with \(count) entries runs past the last position"))
        }
        guard Int(payloadLength) <= LogOptions.formatMaxRecordSize else { return .failure(FormatViolation("payload length \(payloadLength) out of range")) }
        if codec == .raw && Int(payloadLength) != Int(length) - size {
            return .failure(FormatViolation("raw payload length \(payloadLength) disagrees with record length \(length)"))
        }
        return .success(RecordHeader(length: length, checksum: checksum, codec: codec, entryCount: count,
                                     firstPosition: first, payloadLength: payloadLength,
                                     minTimestamp: minTs, maxTimestamp: maxTs))
    }

    /// The checksum of a whole record's bytes: CRC-32C over the log ID followed by everything after
    /// the checksum field (header fields and stored payload).
    static func computeChecksum(record: UnsafeRawBufferPointer, logID: LogID) -> UInt32 {
        let seed = logID.bytes.withUnsafeBytes { CRC32C.checksum($0) }
        return CRC32C.update(seed, UnsafeRawBufferPointer(rebasing: record[8...]))
    }
}

/// A record's payload before its position is known: entries framed, then compressed when that
/// pays. Built outside the log's lock so that concurrent appenders compress in parallel. The
/// bytes start with room for the record header, so finishing the record copies nothing.
struct EncodedPayload: Sendable {
    /// Header space (zeros) followed by the stored payload.
    var bytes: [UInt8]
    var codec: RecordCodec
    var payloadLength: Int
    var entryCount: Int
    var minTimestamp: LogTimestamp
    var maxTimestamp: LogTimestamp

    var storedLength: Int { bytes.count - RecordHeader.size }

    /// Frames `entries` as the entry table (length and timestamp delta per entry, as varints)
    /// followed by the entries' bytes, and compresses it.
    init(entries: [LogEntry], options: LogOptions) throws {
        guard !entries.isEmpty else { throw LogError(.invalidArgument, "a record needs at least one entry") }
        var minTs = LogTimestamp.max
        var maxTs = LogTimestamp.min
        var dataSize = 0
        for (i, entry) in entries.enumerated() {
            guard entry.payload.count <= options.maxEntrySize else {
                throw LogError(.entryTooLarge, "entry \(i) is \(entry.payload.count) bytes; the limit is \(options.maxEntrySize)")
            }
            minTs = min(minTs, entry.timestamp)
            maxTs = max(maxTs, entry.timestamp)
            dataSize += entry.payload.count
        }
        var tableSize = 0
        for entry in entries {
            tableSize += varintSize(UInt64(entry.payload.count)) + varintSize(UInt64(bitPattern: entry.timestamp &- minTs))
        }
        let payloadSize = tableSize + dataSize
        guard payloadSize + RecordHeader.size <= options.maxRecordSize else {
            throw LogError(.recordTooLarge, "record of \(entries.count) entries needs \(payloadSize + RecordHeader.size) bytes; the limit is \(options.maxRecordSize)")
        }
        // One allocation, one pass: header space, table, then the entries' bytes.
        var framed = [UInt8](unsafeUninitializedCapacity: RecordHeader.size + payloadSize) { buffer, count in
            let base = UnsafeMutableRawBufferPointer(buffer)
            base.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: RecordHeader.size)
            var at = RecordHeader.size
            for entry in entries {
                at = writeVarint(UInt64(entry.payload.count), into: base, at: at)
                at = writeVarint(UInt64(bitPattern: entry.timestamp &- minTs), into: base, at: at)
            }
            for entry in entries {
                entry.payload.withUnsafeBytes { source in
                    if let from = source.baseAddress, source.count > 0 {
                        (base.baseAddress! + at).copyMemory(from: from, byteCount: source.count)
                    }
                }
                at += entry.payload.count
            }
            count = at
        }
        codec = .raw
        // Compression pays only if it saves at least 1/16 of the bytes; tiny payloads are not tried.
        if case .lz4(let acceleration) = options.compression, payloadSize >= 64,
           let compressed = framed.withUnsafeBytes({ raw in
               LZ4Codec.compress(UnsafeRawBufferPointer(rebasing: raw[RecordHeader.size...]),
                                 limit: payloadSize - payloadSize / 16, acceleration: acceleration, reserving: RecordHeader.size)
           }) {
            framed = compressed
            codec = .lz4
        }
        bytes = framed
        payloadLength = payloadSize
        entryCount = entries.count
        minTimestamp = minTs
        maxTimestamp = maxTs
    }

    /// The complete record for a record starting at `firstPosition` in log `logID`: the header
    /// written into the reserved space, the checksum last.
    func record(firstPosition: LogPosition, logID: LogID) -> [UInt8] {
        var record = bytes
        record.withUnsafeMutableBytes { raw in
            func put<T: FixedWidthInteger>(_ value: T, _ offset: Int) {
                raw.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
            }
            put(UInt32(raw.count), 0)
            put(UInt32(0), 4)
            put(codec.rawValue, 8)
            put(UInt8(0), 9)
            put(UInt16(RecordHeader.size), 10)
            put(UInt32(entryCount), 12)
            put(firstPosition, 16)
            put(UInt32(payloadLength), 24)
            put(UInt32(0), 28)
            put(minTimestamp, 32)
            put(maxTimestamp, 40)
            let crc = RecordHeader.computeChecksum(record: UnsafeRawBufferPointer(raw), logID: logID)
            put(crc, 4)
        }
        return record
    }
}

private func varintSize(_ value: UInt64) -> Int {
    var v = value
    var n = 1
    while v >= 0x80 {
        v >>= 7
        n += 1
    }
    return n
}

private func writeVarint(_ value: UInt64, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
    var v = value
    var at = offset
    while v >= 0x80 {
        buffer[at] = UInt8(truncatingIfNeeded: v) | 0x80
        v >>= 7
        at += 1
    }
    buffer[at] = UInt8(v)
    return at + 1
}

/// Decodes a validated record's payload into entries. Errors here mean the bytes passed their
/// checksum but do not decode, which is corruption all the same.
enum RecordDecoder {
    static func entries(header: RecordHeader, stored: UnsafeRawBufferPointer) -> Result<[StoredEntry], FormatViolation> {
        switch header.codec {
        case .raw:
            return decodeTable(header: header, payload: stored)
        case .lz4:
            // An LZ4 block expands at most ~255 times (one length byte per 255 bytes of a match):
            // a larger claim is damage, refused before allocating (up to a gigabyte) for it.
            guard Int(header.payloadLength) <= stored.count * 256 + 64 else {
                return .failure(FormatViolation("payload length \(header.payloadLength) is more than an LZ4 block of \(stored.count) bytes can hold"))
            }
            var payload = [UInt8](repeating: 0, count: Int(header.payloadLength))
            let ok = payload.withUnsafeMutableBytes { LZ4Codec.decompress(stored, into: $0) }
            guard ok else { return .failure(FormatViolation("LZ4 block does not decompress to \(header.payloadLength) bytes")) }
            return payload.withUnsafeBytes { decodeTable(header: header, payload: $0) }
        }
    }

    private static func decodeTable(header: RecordHeader, payload: UnsafeRawBufferPointer) -> Result<[StoredEntry], FormatViolation> {
        var r = ByteReader(payload)
        let count = Int(header.entryCount)
        guard count <= payload.count else { return .failure(FormatViolation("entry count \(count) exceeds payload size")) }
        var lengths: [Int] = []
        var stamps: [LogTimestamp] = []
        lengths.reserveCapacity(count)
        stamps.reserveCapacity(count)
        var total = 0
        for i in 0..<count {
            guard let length = r.varint(), let delta = r.varint() else {
                return .failure(FormatViolation("entry table truncated at entry \(i)"))
            }
            guard length <= UInt64(payload.count) else { return .failure(FormatViolation("entry \(i) length \(length) exceeds payload")) }
            total += Int(length)
            let stamp = header.minTimestamp &+ LogTimestamp(bitPattern: delta)
            guard stamp >= header.minTimestamp, stamp <= header.maxTimestamp else {
                return .failure(FormatViolation("entry \(i) timestamp outside the record's range"))
            }
            lengths.append(Int(length))
            stamps.append(stamp)
        }
        guard total == r.remaining else {
            return .failure(FormatViolation("entry lengths sum to \(total) but \(r.remaining) bytes follow the table"))
        }
        var entries: [StoredEntry] = []
        entries.reserveCapacity(count)
        for i in 0..<count {
            guard let bytes = r.bytes(lengths[i]) else { return .failure(FormatViolation("entry \(i) truncated")) }
            entries.append(StoredEntry(position: header.firstPosition + LogPosition(i), timestamp: stamps[i], payload: Array(bytes)))
        }
        return .success(entries)
    }
}

/// Why bytes are not a valid record (reported with the file and offset by the caller).
struct FormatViolation: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
