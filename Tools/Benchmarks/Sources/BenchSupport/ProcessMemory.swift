// This process's resident memory.
import Foundation

public enum ProcessMemory {
    /// `VmRSS` (resident now) and `VmHWM` (peak resident) from /proc/self/status, in bytes.
    public static func current() -> (rss: Int, peak: Int) {
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
