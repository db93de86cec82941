import Foundation
@testable import StrataLog
@_exported import StrataTestSupport

/// The first segment file of a log directory.
func firstSegmentPath(_ directory: String) -> String { directory + "/00000000000000000000.seg" }

func readFile(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Copies every file of a log directory into a new one.
func copyDirectory(_ from: String, to: String) throws {
    try? FileManager.default.removeItem(atPath: to)
    try FileManager.default.createDirectory(atPath: to, withIntermediateDirectories: true)
    for name in try FileManager.default.contentsOfDirectory(atPath: from) where !name.hasPrefix(".") {
        var isDirectory: ObjCBool = false
        FileManager.default.fileExists(atPath: from + "/" + name, isDirectory: &isDirectory)
        if !isDirectory.boolValue { try FileManager.default.copyItem(atPath: from + "/" + name, toPath: to + "/" + name) }
    }
}

/// A payload that names its own record and entry, so any misplaced or damaged byte shows.
func tagged(_ record: Int, _ entry: Int, size: Int = 0) -> [UInt8] {
    let tag = Array("r\(record)e\(entry)|".utf8)
    // Filler from a multiplicative hash: varied enough that LZ4 gains little, like real data.
    return tag + (0..<max(0, size - tag.count)).map { UInt8(truncatingIfNeeded: (UInt64($0) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(record)) >> 56) }
}

func bufferedOptions(segmentSize: Int = 64 << 20) -> LogOptions {
    var options = LogOptions(durability: .buffered)
    options.segmentSize = segmentSize
    return options
}

/// Every entry of a log, read from its start.
func allEntries(_ log: SegmentLog) throws -> [StoredEntry] {
    try log.entries(from: log.startPosition)
}
