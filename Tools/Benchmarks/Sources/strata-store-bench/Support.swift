// Clocks, statistics, a seeded random generator, number formatting and machine facts for the
// harness (the first part is copied from strata-log-bench, to keep the two targets independent).
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time in nanoseconds.
@inline(__always)
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

func seconds(_ nanos: UInt64) -> Double { Double(nanos) / 1e9 }

/// Nearest-rank percentile of an ascending array (0 when empty).
func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count - 1, max(0, rank - 1))]
}

/// SplitMix64: tiny, fast, and the same sequence on every machine for a given seed.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in `0..<bound` (the tiny modulo bias is irrelevant here).
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    mutating func inRange(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }
}

// MARK: Formatting

func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

/// 1234567 -> "1,234,567".
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (i, ch) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(ch)
    }
    return value < 0 ? "-" + out : out
}

/// A rate with an SI suffix: 1.52M, 812k, 97.
func rate(_ value: Double) -> String {
    switch value {
    case 1e9...: return fixed(value / 1e9, 2) + "G"
    case 1e6...: return fixed(value / 1e6, 2) + "M"
    case 1e4...: return fixed(value / 1e3, 1) + "k"
    default: return grouped(Int(value.rounded()))
    }
}

func bytes(_ value: Double) -> String {
    switch value {
    case 1_073_741_824...: return fixed(value / 1_073_741_824, 2) + " GiB"
    case 1_048_576...: return fixed(value / 1_048_576, 1) + " MiB"
    case 1024...: return fixed(value / 1024, 1) + " KiB"
    default: return "\(Int(value)) B"
    }
}

/// Nanoseconds as a latency: 850 µs, 1.23 ms.
func latency(_ nanos: UInt64) -> String {
    let us = Double(nanos) / 1e3
    if us < 1000 { return fixed(us, us < 10 ? 1 : 0) + " µs" }
    return fixed(us / 1000, 2) + " ms"
}

/// Progress for the person watching; stdout keeps only the report.
func note(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

// MARK: Machine

enum Machine {
    static var cores: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// MemTotal from /proc/meminfo, in bytes.
    static var memoryBytes: Double? {
        guard let text = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("MemTotal:") {
            let fields = line.split(separator: " ")
            if fields.count >= 2, let kb = Double(fields[1]) { return kb * 1024 }
        }
        return nil
    }

    /// The file system type of `path` (its mount in /proc/self/mounts) and whether it is
    /// memory-backed, so that fdatasync would cost nothing and the numbers would lie.
    static func fileSystem(of path: String) -> (name: String, inMemory: Bool)? {
        guard let resolved = realpath(path, nil) else { return nil }
        let absolute = String(cString: resolved)
        free(resolved)
        guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return nil }
        var best: (point: String, type: String)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            // Spaces and the like are octal-escaped in mount points; good enough for a prefix test.
            let point = String(fields[1]).replacingOccurrences(of: "\\040", with: " ")
            let inside = point == "/" || absolute == point || absolute.hasPrefix(point + "/")
            if inside && point.count >= (best?.point.count ?? -1) { best = (point, String(fields[2])) }
        }
        guard let best else { return nil }
        let memory = ["tmpfs", "ramfs", "devtmpfs", "hugetlbfs"].contains(best.type)
        return (best.type + " on " + best.point, memory)
    }
}

// MARK: This process and the disk

enum ProcessMemory {
    /// `VmRSS` (resident now) and `VmHWM` (peak resident) from /proc/self/status, in bytes.
    static func current() -> (rss: Int, peak: Int) {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        var rss = 0
        var peak = 0
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let kb = Int(fields[1]) else { continue }
            if fields[0] == "VmRSS:" { rss = kb * 1024 }
            if fields[0] == "VmHWM:" { peak = kb * 1024 }
        }
        return (rss, peak)
    }
}

extension Machine {
    /// "model name" from /proc/cpuinfo.
    static var cpuModel: String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// Bytes available to us on the file system holding `path`.
    static func freeBytes(at path: String) -> Double? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Double(info.f_bavail) * Double(info.f_frsize)
    }

    /// The total size of the regular files under `path`.
    static func directorySize(_ path: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total = 0
        while let relative = walker.nextObject() as? String {
            if let attributes = try? FileManager.default.attributesOfItem(atPath: path + "/" + relative),
               attributes[.type] as? FileAttributeType == .typeRegular,
               let size = attributes[.size] as? NSNumber {
                total += size.intValue
            }
        }
        return total
    }

    /// This executable, for re-running it as a fresh process.
    static var executablePath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 { return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CommandLine.arguments[0]
    }
}
