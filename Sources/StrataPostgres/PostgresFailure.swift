import PostgresNIO
import StrataServer

/// Turns what PostgresNIO throws into a ``ZoneStorageError`` that says what failed: the
/// server's own message and SQLSTATE (PostgresNIO's description hides them), `storageFull` for a
/// full disk (SQLSTATE 53100) so that clients are answered `507` and retry.
enum PostgresFailure {
    static func map(_ error: any Error, _ doing: String, zone: ZoneID? = nil) -> ZoneStorageError {
        if let error = error as? ZoneStorageError { return error }
        let state = sqlState(error)
        let code: ZoneStorageError.Code
        if state == "53100" || state == "53200" {
            code = .storageFull
        } else if isUnavailable(error) {
            code = .storageUnavailable
        } else {
            code = .storageFailure
        }
        return ZoneStorageError(code, "PostgreSQL: \(doing) failed: \(describe(error))", zone: zone?.description)
    }

    /// Whether `error` says the database cannot be reached for now: the connection failed or was
    /// closed, or the server is shutting down, starting or out of connections (SQLSTATE classes
    /// 08 and 57P, 53300) — a call that succeeds again once it is back.
    static func isUnavailable(_ error: any Error) -> Bool {
        if let state = sqlState(error) {
            return state.hasPrefix("08") || state.hasPrefix("57P") || state == "53300"
        }
        guard let error = error as? PSQLError else { return false }
        return [PSQLError.Code.connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed].contains(error.code)
    }

    /// The SQLSTATE of a server error, `nil` for anything else.
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let info = error.serverInfo {
            let message = info[.message] ?? "error"
            let detail = info[.detail].map { " (\($0))" } ?? ""
            return "\(message)\(detail) [SQLSTATE \(info[.sqlState] ?? "?")]"
        }
        return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
    }
}
