// The log's on-disk decoders behind their checksums. The first byte chooses one:
//   0: a record (header, then its entry table, raw or LZ4) as the segment scanner decodes it;
//   1: a snapshot file (`snapshot-*.snap`: header and chunks, raw or LZ4);
//   2: a segment index (`*.idx`).
// The checksums of the snapshot file and the index are set before decoding, and their log ID and
// position are taken from the bytes, so that the fuzzer reaches what lies behind them (fuzz-log-
// segment covers the checks themselves).
import FuzzSupport
@testable import StrataLog

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var seeds: [[UInt8]] = []
        // Records: their bytes cut out of the golden segments (raw and LZ4 ones).
        var segments: [String: [UInt8]] = [:]
        var records: [[UInt8]] = []
        for (log, record) in try FuzzSeeds.records() {
            let path = log + "/" + record.segment
            if segments[path] == nil { segments[path] = try FuzzSeeds.fixture(path) }
            let bytes = segments[path] ?? []
            let start = Int(record.offset)
            records.append([0] + Array(bytes[start..<start + record.storedSize]))
        }
        seeds += FuzzSeeds.pick(records, 6)
        // Snapshot files and indexes, as they are on disk.
        seeds.append([1] + (try FuzzSeeds.fixture("log-v1/multi-segment/snapshot-00000000000000000150.snap")))
        seeds.append([1] + (try FuzzSeeds.fixture("adopted/device-d/log/snapshot-00000000000000000004.snap")))
        seeds.append([2] + (try FuzzSeeds.fixture("log-v1/multi-segment/00000000000000000086.idx")))
        seeds.append([2] + (try FuzzSeeds.fixture("log-v1/multi-segment/00000000000000000172.idx")))
        // The crash this target found (fixed in SegmentSummary.decode): an index whose first point
        // has an offset above Int64.max (the top bit of the little-endian u64 at byte 79).
        var index = try FuzzSeeds.fixture("log-v1/multi-segment/00000000000000000086.idx")
        index[64 + 15] |= 0x80
        seeds.append([2] + index)
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = fuzzBytes(data, size)
    guard let kind = input.first else { return 0 }
    input.removeFirst()
    switch kind % 3 {
    case 0:
        input.withUnsafeBytes { raw in
            guard case .success(let header) = RecordHeader.parse(raw), Int(header.length) <= raw.count else { return }
            _ = RecordDecoder.entries(header: header, stored: UnsafeRawBufferPointer(rebasing: raw[RecordHeader.size..<Int(header.length)]))
        }
    case 1:
        guard input.count >= 40 else { return 0 }
        sealChecksum(&input)
        let position = input.withUnsafeBytes { raw in
            var r = ByteReader(UnsafeRawBufferPointer(rebasing: raw[32..<40]))
            return r.u64() ?? 0
        }
        let info = SnapshotInfo(name: SnapshotName.name(for: position), path: "fuzz/" + SnapshotName.name(for: position), position: position)
        _ = try? SnapshotFile.decode(input, info: info, logID: LogID(unchecked: Array(input[16..<32])))
    default:
        guard input.count >= 40 else { return 0 }
        sealChecksum(&input)
        let first = input.withUnsafeBytes { raw in
            var r = ByteReader(UnsafeRawBufferPointer(rebasing: raw[32..<40]))
            return r.u64() ?? 0
        }
        _ = SegmentSummary.decode(input, logID: LogID(unchecked: Array(input[16..<32])), firstPosition: first)
    }
    return 0
}

/// Writes the CRC-32C of bytes 12… at bytes 8..<12 (the layout of snapshot and index headers).
func sealChecksum(_ bytes: inout [UInt8]) {
    let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12...])) }
    withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { bytes[8 + i] = $0[i] } }
}
