public import Logging

/// How `strata serve` writes its log (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's plain lines on standard error.
    case text
    /// One JSON object per line on standard error (see ``JSONLogHandler``).
    case json
}

extension Logger {
    /// The server's logger in `format` at `level`, tagging every line written while answering a
    /// request with its ID (see ``RequestID``). Built explicitly rather than through
    /// `LoggingSystem.bootstrap`, which a process may call only once.
    public static func strataServer(format: LogFormat, level: Logger.Level, label: String = "strata.server") -> Logger {
        var logger = Logger(label: label) { label in
            switch format {
            case .text:
                StreamLogHandler.standardError(label: label, metadataProvider: RequestID.metadataProvider)
            case .json:
                JSONLogHandler(label: label, level: level, metadataProvider: RequestID.metadataProvider)
            }
        }
        logger.logLevel = level
        return logger
    }
}
