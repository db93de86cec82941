// Facts about the machine the run is on, and about the disk it writes to.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

public enum Machine {
    public static var cores: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// MemTotal from /proc/meminfo, in bytes.
    public static var memoryBytes: Double? {
        guard let text = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("MemTotal:") {
            let fields = line.split(separator: " ")
            if fields.count >= 2, let kb = Double(fields[1]) { return kb * 1024 }
        }
        return nil
    }

    /// The file system type of `path` (its mount in /proc/self/mounts) and whether it is
    /// memory-backed, so that fdatasync would cost nothing and the numbers would lie.
    public static func fileSystem(of path: String) -> (name: String, inMemory: Bool)? {
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

    /// "model name" from /proc/cpuinfo.
    public static var cpuModel: String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// Bytes available to us on the file system holding `path`.
    public static func freeBytes(at path: String) -> Double? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Double(info.f_bavail) * Double(info.f_frsize)
    }

    /// The total size of the regular files under `path`.
    public static func directorySize(_ path: String) -> Int {
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
    public static var executablePath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 { return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CommandLine.arguments[0]
    }
}
