// Number, size, latency and date formatting for the reports and the progress notes.
import Foundation

public func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

/// 1234567 -> "1,234,567".
public func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (i, ch) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(ch)
    }
    return value < 0 ? "-" + out : out
}

/// A rate with an SI suffix: 1.52M, 812k, 97.
public func rate(_ value: Double) -> String {
    switch value {
    case 1e9...: return fixed(value / 1e9, 2) + "G"
    case 1e6...: return fixed(value / 1e6, 2) + "M"
    case 1e4...: return fixed(value / 1e3, 1) + "k"
    default: return grouped(Int(value.rounded()))
    }
}

public func bytes(_ value: Double) -> String {
    switch value {
    case 1_073_741_824...: return fixed(value / 1_073_741_824, 2) + " GiB"
    case 1_048_576...: return fixed(value / 1_048_576, 1) + " MiB"
    case 1024...: return fixed(value / 1024, 1) + " KiB"
    default: return "\(Int(value)) B"
    }
}

/// Nanoseconds as a latency: 850 µs, 1.23 ms.
public func latency(_ nanos: UInt64) -> String {
    let us = Double(nanos) / 1e3
    if us < 1000 { return fixed(us, us < 10 ? 1 : 0) + " µs" }
    return fixed(us / 1000, 2) + " ms"
}

/// When the run started, for the report's machine line: "2024-11-22 09:30:00 UTC".
public func timestamp(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss 'UTC'"
    return formatter.string(from: date)
}
