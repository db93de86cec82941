#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Strata
import StrataCore

/// How the commands write IDs, times and sizes for people (JSON output keeps them whole).
enum Format {
    /// The first 8 hex digits of an ID: enough to tell a handful of replicas apart.
    static func short(_ id: some Identifier128) -> String { String(id.description.prefix(8)) }

    /// An event as `replica:sequence` with the short replica.
    static func event(_ id: EventID) -> String { "\(short(id.replica)):\(id.sequence)" }

    /// Microseconds since 1970 as ISO 8601 UTC with milliseconds.
    static func time(microseconds: Int64) -> String {
        var seconds = time_t(microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000)
        let millis = Int((microseconds - Int64(seconds) * 1_000_000) / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }

    /// An HLC's physical part as a time.
    static func time(_ hlc: HLC) -> String { time(microseconds: Int64(hlc.milliseconds) * 1000) }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func value(_ value: Value) -> String {
        switch value {
        case .reference(let id): "→\(short(id))"
        case .date(let micros): time(microseconds: micros)
        default: value.description
        }
    }

    /// `width` columns, padded on the left.
    static func right(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    /// `width` columns, padded on the right.
    static func left(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

/// Parses the times the commands accept: ISO 8601 (`2026-11-21T10:15:00Z`, with or without
/// fractional seconds — kept to the microsecond — or an offset) or `@` followed by microseconds
/// since 1970.
enum TimeArgument {
    static func microseconds(_ text: String) -> Int64? {
        if text.hasPrefix("@") { return Int64(text.dropFirst()) }
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        // Foundation's fractional seconds stop at milliseconds: read the digits here instead.
        guard let dot = text.firstIndex(of: ".") else {
            return plain.date(from: text).map { Int64($0.timeIntervalSince1970) * 1_000_000 }
        }
        let afterDot = text[text.index(after: dot)...]
        let digits = afterDot.prefix { $0.isNumber }
        guard !digits.isEmpty, digits.count <= 9 else { return nil }
        guard let whole = plain.date(from: String(text[..<dot]) + afterDot.dropFirst(digits.count)) else { return nil }
        let fraction = Int64(String(digits.prefix(6)).padding(toLength: 6, withPad: "0", startingAt: 0)) ?? 0
        return Int64(whole.timeIntervalSince1970) * 1_000_000 + fraction
    }
}

/// A file's size in bytes (0 when it cannot be read).
enum FileSize {
    static func of(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
    }

    /// Bytes of the regular files under `path`, recursively.
    static func directory(_ path: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total: Int64 = 0
        while let name = walker.nextObject() as? String { total += of(path + "/" + name) }
        return total
    }
}
