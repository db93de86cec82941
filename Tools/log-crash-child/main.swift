// The child of the crash test (Tests/StrataLogTests/CrashTests.swift): appends to a log in
// group-commit mode from several tasks and prints one line per acknowledged append, flushed at
// once, until it is killed with SIGKILL:
//
//     ack <writer> <sequence> <first position> <entry count>
//
// Each entry's payload is "w<writer>s<sequence>e<index>" followed by filler, so the parent can
// check that every acknowledged entry is present and intact after reopening.
import StrataLog

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

func payload(writer: Int, sequence: Int, entry: Int) -> [UInt8] {
    let tag = Array("w\(writer)s\(sequence)e\(entry)|".utf8)
    return tag + [UInt8](repeating: UInt8(truncatingIfNeeded: writer &* 31 &+ sequence), count: (sequence % 7) * 40)
}

/// Writes a line with one write(2), unbuffered, so a kill never leaves half a line or loses an
/// acknowledged one in a stdio buffer.
func emit(_ line: String) {
    _ = line.withCString { write(1, $0, strlen($0)) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: log-crash-child DIRECTORY [WRITERS] [SEGMENT_SIZE]")
    exit(2)
}
let directory = arguments[1]
let writers = arguments.count > 2 ? Int(arguments[2]) ?? 8 : 8
var options = LogOptions(durability: .groupCommit)
options.segmentSize = arguments.count > 3 ? Int(arguments[3]) ?? 65_536 : 65_536

do {
    let log = try SegmentLog.open(at: directory, options: options)
    emit("ready \(log.endPosition)\n")
    await withThrowingTaskGroup(of: Void.self) { group in
        for writer in 0..<writers {
            group.addTask {
                var sequence = 0
                while true {
                    let count = 1 + sequence % 3
                    let entries = (0..<count).map { LogEntry(payload(writer: writer, sequence: sequence, entry: $0)) }
                    let result = try await log.append(entries)
                    // One write(2) per line so that a kill never leaves half a line.
                    emit("ack \(writer) \(sequence) \(result.positions.lowerBound) \(count)\n")
                    sequence += 1
                }
            }
        }
    }
} catch {
    print("error \(error)")
    exit(1)
}
