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
