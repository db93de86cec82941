import Foundation
import Testing
@testable import StrataLog

/// Found by the fuzz targets fuzz-log-record and fuzz-log-segment (Tools/Fuzz): a record of a few
/// bytes claiming an LZ4 payload of up to a gigabyte made the decoder allocate and zero that much
/// before finding the block does not decompress.
@Suite("LZ4 records whose claimed payload no block can hold")
struct RecordDamageTests {
    @Test("A record claiming more than an LZ4 block of its size can expand to is refused before anything is allocated")
    func impossiblePayloadLength() {
        let stored = [UInt8](repeating: 0x11, count: 100)
        let header = RecordHeader(length: UInt32(RecordHeader.size + stored.count), checksum: 0, codec: .lz4, entryCount: 1,
                                  firstPosition: 0, payloadLength: 1 << 29, minTimestamp: 0, maxTimestamp: 0)
        let result = stored.withUnsafeBytes { RecordDecoder.entries(header: header, stored: $0) }
        guard case .failure(let violation) = result else {
            Issue.record("a 100-byte block claiming 512 MiB decoded")
            return
        }
        #expect(violation.description.contains("more than an LZ4 block of 100 bytes can hold"))
    }

    @Test("A record whose entries' positions would run past the last position is refused, not trapped on (found by fuzzing)")
    func positionsPastTheEnd() {
        func header(first: UInt64, count: UInt32) -> Result<RecordHeader, FormatViolation> {
            var w = ByteWriter()
            w.u32(UInt32(RecordHeader.size + 8))  // length
            w.u32(0)  // checksum
            w.u8(RecordCodec.raw.rawValue)
            w.u8(0)  // flags
            w.u16(UInt16(RecordHeader.size))
            w.u32(count)
            w.u64(first)
            w.u32(8)  // payload length
            w.u32(0)  // reserved
            w.i64(0)
            w.i64(0)
            return w.bytes.withUnsafeBytes { RecordHeader.parse($0) }
        }
        guard case .failure(let violation) = header(first: UInt64.max - 1, count: 3) else {
            Issue.record("a record whose third entry would be at position 2^64 parsed")
            return
        }
        #expect(violation.description.contains("runs past the last position"))
        // The last positions that are numbers are still a record's.
        guard case .success(let last) = header(first: UInt64.max - 3, count: 3) else {
            Issue.record("a record ending just below the top was refused")
            return
        }
        #expect(last.endPosition == UInt64.max)
    }

    @Test("The most compressible payloads (a megabyte of one byte) still round-trip through LZ4 records")
    func mostCompressibleRoundTrips() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        let payload = [UInt8](repeating: 0, count: 1 << 20)
        try await log.append([LogEntry(payload)])
        try await log.close()
        let reopened = try SegmentLog.open(at: dir.path, options: bufferedOptions())
        var cursor = try reopened.records(from: 0)
        let record = try #require(try cursor.next())
        #expect(record.codec == .lz4)
        #expect(record.entries.map(\.payload) == [payload])
        #expect(try SegmentLog.verify(at: dir.path).problems.isEmpty)
    }
}
