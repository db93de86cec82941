/// The 48-byte header at the start of every segment file (layout in the format article).
struct SegmentHeader: Hashable, Sendable {
    static let magic: [UInt8] = Array("STRATALG".utf8)
    static let size = 48
    static let formatVersion: UInt16 = 1

    var logID: LogID
    var firstPosition: LogPosition
    var created: LogTimestamp

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: SegmentHeader.size)
        w.raw(SegmentHeader.magic)
        w.u32(0)  // checksum, filled in below
        w.u16(SegmentHeader.formatVersion)
        w.u16(UInt16(SegmentHeader.size))
        w.raw(logID.bytes)
        w.u64(firstPosition)
        w.i64(created)
        let crc = w.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        w.setU32(crc, at: 8)
        return w.bytes
    }

    /// Decodes and checks a header; the error says which check failed.
    static func decode(_ bytes: UnsafeRawBufferPointer, file: String) throws -> SegmentHeader {
        func bad(_ why: String, _ offset: Int64 = 0) -> LogError {
            LogError(.badSegmentHeader, why, file: file, offset: offset)
        }
        guard bytes.count >= size else {
            throw bad("segment header truncated: \(bytes.count) of \(size) bytes")
        }
        var r = ByteReader(bytes)
        guard let magic = r.bytes(8), Array(magic) == SegmentHeader.magic else {
            throw bad("not a Strata segment (bad magic)")
        }
        guard let stored = r.u32(), let version = r.u16(), let headerSize = r.u16() else {
            throw bad("segment header truncated")
        }
        // The checksum first: a damaged version field is damage, not a newer format.
        let actual = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[12..<size]))
        guard actual == stored else {
            throw bad("segment header checksum mismatch (stored \(hex(stored)), computed \(hex(actual)))", 8)
        }
        guard version == formatVersion else {
            throw LogError(.unsupportedVersion, "segment format version \(version); this reader knows version \(formatVersion)", file: file, offset: 12)
        }
        guard headerSize == UInt16(size) else { throw bad("unexpected segment header size \(headerSize)", 14) }
        guard let id = r.bytes(16), let first = r.u64(), let created = r.i64() else {
            throw bad("segment header truncated")
        }
        return SegmentHeader(logID: LogID(unchecked: Array(id)), firstPosition: first, created: created)
    }
}

func hex(_ value: UInt32) -> String {
    let s = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 8 - s.count)) + s
}

/// Segment files are named by the position of their first entry, zero-padded to 20 digits so that
/// names sort in position order: `00000000000000001024.seg`.
enum SegmentName {
    static let suffix = ".seg"
    static let indexSuffix = ".idx"

    static func name(for first: LogPosition) -> String {
        let digits = String(first)
        return String(repeating: "0", count: 20 - digits.count) + digits + suffix
    }

    static func indexName(for first: LogPosition) -> String {
        let digits = String(first)
        return String(repeating: "0", count: 20 - digits.count) + digits + indexSuffix
    }

    /// The first position a segment file name stands for, or `nil` when the name is not a segment's.
    static func position(of name: String) -> LogPosition? {
        guard name.hasSuffix(suffix) else { return nil }
        let stem = name.dropLast(suffix.count)
        guard stem.count == 20, stem.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
        return LogPosition(stem)
    }
}
