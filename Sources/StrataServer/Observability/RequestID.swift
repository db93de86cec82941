public import Logging

/// The ID of the request being answered, on every log line written while answering it.
///
/// Taken from the request's `X-Request-ID` header when it is sane (1–128 characters of
/// `A-Z a-z 0-9 - _ . :`), so that a reverse proxy's or a client's ID follows the request through;
/// otherwise generated (32 hex digits). Echoed in the answer's `X-Request-ID` header.
///
/// Log lines carry it as the metadata `request_id` through ``metadataProvider``, which reads a
/// task-local value: every logger whose handler has the provider — the server's, Hummingbird's,
/// the storage's — tags the lines written by the request's task, with no logger passed around.
public enum RequestID {
    /// The header read and answered.
    public static let headerName = "X-Request-ID"
    /// The metadata key on log lines.
    public static let metadataKey = "request_id"

    /// The ID of the request the current task answers, if any.
    @TaskLocal public static var current: String?

    /// Adds `request_id` to the log lines written by a task answering a request.
    public static let metadataProvider = Logger.MetadataProvider {
        guard let id = RequestID.current else { return [:] }
        return [RequestID.metadataKey: .string(id)]
    }

    /// `incoming` when it is a sane ID, else a new one.
    static func accept(_ incoming: String?) -> String {
        if let incoming, isSane(incoming) { return incoming }
        return generate()
    }

    /// Whether an incoming ID is safe to log and echo: short, and nothing a log reader or a header
    /// could misread (no spaces, quotes, control characters or non-ASCII).
    static func isSane(_ id: String) -> Bool {
        guard (1...128).contains(id.utf8.count) else { return false }
        return id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                 UInt8(ascii: "."), UInt8(ascii: ":"):
                true
            default:
                false
            }
        }
    }

    /// 128 random bits as 32 hex digits.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64, low = generator.next() as UInt64
        return hex(high) + hex(low)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
