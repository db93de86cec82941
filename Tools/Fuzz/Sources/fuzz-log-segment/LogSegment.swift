// A segment file as `SegmentLog.verify` (and so `strata verify`, `inspect`, `replay`) reads it:
// the fuzzed bytes become the only segment of a log directory, named by the first position its
// header claims. When the first byte is odd, the header's and each record's checksums are set
// before writing, so that the fuzzer reaches the record scanner and decoder behind them; when it
// is even, the bytes are written as they are (damaged checksums, torn tails).
import Foundation
import FuzzSupport
@testable import StrataLog

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var seeds: [[UInt8]] = []
        for name in ["log-v1/basic/00000000000000000000.seg", "log-v1/torn-tail/00000000000000000000.seg",
                     "log-v1/mid-log-corruption/00000000000000000000.seg", "log-v1/multi-segment/00000000000000000262.seg",
                     "adopted/device-d/log/00000000000000000000.seg"] {
            seeds.append([0] + (try FuzzSeeds.fixture(name)))
        }
        seeds.append([1] + (try FuzzSeeds.fixture("divergent/device-b/log/00000000000000000043.seg")))
        return seeds
    }
    return 0
}

/// The log directory the segment is written into (one per process, in memory where there is
/// /dev/shm: the file system is most of the cost of an input).
let directory: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let path = base + "/strata-fuzz-segment-\(ProcessInfo.processInfo.processIdentifier)"
    try? FileManager.default.removeItem(atPath: path)
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = fuzzBytes(data, size)
    guard let mode = input.first else { return 0 }
    input.removeFirst()
    if mode & 1 == 1 { sealChecksums(&input) }
    var first: LogPosition = 0
    if input.count >= 40 {
        var r = input.withUnsafeBytes { ByteReader(UnsafeRawBufferPointer(rebasing: $0[32..<40])) }
        first = r.u64() ?? 0
    }
    let path = directory + "/" + SegmentName.name(for: first)
    guard FileManager.default.createFile(atPath: path, contents: Data(input)) else { return 0 }
    _ = try? SegmentLog.verify(at: directory, record: { _ in })
    // The next input's segment may have another name: the directory holds one segment at a time.
    unlink(path)
    return 0
}

/// Sets the segment header's checksum and that of every record the length fields frame.
func sealChecksums(_ bytes: inout [UInt8]) {
    guard bytes.count >= SegmentHeader.size else { return }
    let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12..<SegmentHeader.size])) }
    put(crc, at: 8, in: &bytes)
    let logID = LogID(unchecked: Array(bytes[16..<32]))
    var offset = SegmentHeader.size
    while offset + RecordHeader.size <= bytes.count {
        let length = bytes.withUnsafeBytes { raw -> Int in
            var r = ByteReader(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + 4]))
            return Int(r.u32() ?? 0)
        }
        guard length >= RecordHeader.size, offset + length <= bytes.count else { return }
        let sum = bytes.withUnsafeBytes { RecordHeader.computeChecksum(record: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + length]), logID: logID) }
        put(sum, at: offset + 4, in: &bytes)
        offset += length
    }
}

func put(_ value: UInt32, at offset: Int, in bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { for i in 0..<4 { bytes[offset + i] = $0[i] } }
}
