import Foundation
import Testing
@testable import StrataLog

/// Found by the fuzz target fuzz-log-record (Tools/Fuzz): an index file whose checksum matches
/// but whose offsets do not fit a file offset trapped the process that opened the log.
@Suite("A segment index with impossible offsets")
struct IndexDamageTests {
    /// Byte offsets in an index file (layout in the format article): the segment length, and the
    /// offset of the first indexed point (after the 64-byte header and the point's position).
    static let lengthField = 48
    static let firstPointOffset = 64 + 8

    @Test("An index whose checksum matches but whose offset is beyond any file is rebuilt, and the log opens and reads",
          arguments: [lengthField, firstPointOffset])
    func impossibleOffsetIsRebuilt(field: Int) async throws {
        let dir = TemporaryDirectory()
        var options = bufferedOptions(segmentSize: 4096)
        options.indexInterval = 512
        let log = try SegmentLog.open(at: dir.path, options: options)
        for r in 0..<40 { try await log.append([LogEntry(tagged(r, 0, size: 200))]) }
        try await log.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".idx") }.sorted()
        let name = try #require(names.first)
        var index = try readFile(dir.sub(name))
        try #require(index.count >= Self.firstPointOffset + 8)
        // The top bit of a little-endian u64: a value above Int64.max. The checksum is made to
        // match, so only the decoder's range check can tell.
        index[field + 7] |= 0x80
        let crc = index.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { index[8 + i] = $0[i] } }
        try writeFile(dir.sub(name), index)

        let reopened = try SegmentLog.open(at: dir.path, options: options)
        #expect(reopened.recovery.rebuiltIndexes.contains(name))
        let entries = try allEntries(reopened)
        #expect(entries.map(\.payload) == (0..<40).map { tagged($0, 0, size: 200) })
        #expect(try SegmentLog.verify(at: dir.path).problems.isEmpty)
    }
}
