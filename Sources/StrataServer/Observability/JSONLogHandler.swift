#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
public import Logging
import Synchronization

/// A log handler that writes one JSON object per line — for log shippers (`--log-format json`):
///
/// ```json
/// {"timestamp":"2026-11-23T20:41:07.123Z","level":"info","label":"strata.server","message":"push appended","metadata":{"request_id":"9f…","zone":"alice/notes"},"source":"StrataServer"}
/// ```
///
/// `timestamp` is UTC with milliseconds (RFC 3339); `metadata` holds the logger's metadata, the
/// metadata provider's (the request ID) and the line's own, in that order of precedence (the
/// line's wins); nested metadata stays nested (arrays, objects); an error given to the line is
/// in `error`. Keys are sorted within `metadata`, so that equal lines print equal bytes.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (String) -> Void

    /// A handler writing to standard error (standard output is the `listening on` line's).
    public init(label: String, level: Logger.Level = .info, metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(label: label, level: level, metadataProvider: metadataProvider, write: JSONLogHandler.writeStandardError)
    }

    /// A handler handing each line (with its newline) to `write` — for tests.
    public init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider?, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let own = event.metadata { merged.merge(own) { $1 } }
        var line = "{\"timestamp\":"
        Self.appendString(Self.timestamp(), to: &line)
        line += ",\"level\":"
        Self.appendString(event.level.rawValue, to: &line)
        line += ",\"label\":"
        Self.appendString(label, to: &line)
        line += ",\"message\":"
        Self.appendString(event.message.description, to: &line)
        line += ",\"metadata\":"
        Self.append(.dictionary(merged), to: &line)
        if let error = event.error {
            line += ",\"error\":"
            Self.appendString(String(describing: error), to: &line)
        }
        line += ",\"source\":"
        Self.appendString(event.source, to: &line)
        line += "}\n"
        write(line)
    }

    // MARK: Writing

    /// Lines from concurrent tasks never interleave.
    private static let outputLock = Mutex(())

    private static let writeStandardError: @Sendable (String) -> Void = { line in
        outputLock.withLock { _ in FileHandle.standardError.write(Data(line.utf8)) }
    }

    // MARK: Encoding

    static func append(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let string):
            appendString(string, to: &line)
        case .stringConvertible(let convertible):
            appendString(convertible.description, to: &line)
        case .array(let values):
            line += "["
            for (index, element) in values.enumerated() {
                if index > 0 { line += "," }
                append(element, to: &line)
            }
            line += "]"
        case .dictionary(let dictionary):
            line += "{"
            for (index, key) in dictionary.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                appendString(key, to: &line)
                line += ":"
                if let element = dictionary[key] { append(element, to: &line) }
            }
            line += "}"
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped (RFC 8259).
    static func appendString(_ string: String, to line: inout String) {
        line += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case let c where c.value < 0x20 || c.value == 0x7F || c.value == 0x2028 || c.value == 0x2029:
                let hex = String(c.value, radix: 16)
                line += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                line.unicodeScalars.append(scalar)
            }
        }
        line += "\""
    }

    /// Now, as `2026-11-23T20:41:07.123Z`.
    static func timestamp() -> String {
        // (Through Foundation, not `clock_gettime`: which module's `timespec` the compiler
        // picks on Linux depended on the order it loaded modules in.)
        let now = Date().timeIntervalSince1970
        var seconds = time_t(now.rounded(.down))
        let milliseconds = Int32(min(999, max(0, (now - now.rounded(.down)) * 1000)))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(milliseconds, 3))Z"
    }
}

