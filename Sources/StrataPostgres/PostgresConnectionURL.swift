import Foundation
import PostgresNIO
import NIOSSL
public import StrataServer

/// A PostgreSQL connection URL, as `strata serve --postgres` takes it:
///
/// ```
/// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]
/// postgres://USER@/DATABASE?host=/run/postgresql          (a Unix socket directory)
/// ```
///
/// `postgresql://` is accepted too. The password may be left out of the URL and given in
/// `STRATA_POSTGRES_PASSWORD` (see ``init(parsing:password:)``), so that it need not appear on a
/// command line. The default port is 5432 and the default `sslmode` is `prefer` over TCP.
public struct PostgresConnectionURL: Sendable, Hashable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, Hashable {
        case disable, prefer, require
    }

    public var user: String
    public var password: String?
    /// A host name or address, or `nil` with ``socketDirectory``.
    public var host: String?
    public var port: Int
    /// The directory of the server's Unix socket (`?host=/path`).
    public var socketDirectory: String?
    public var database: String
    public var tls: TLSMode

    /// Parses `text`. `password`, when given, is used when the URL has none.
    ///
    /// - Throws: `ZoneStorageError.Code.invalidArgument` naming what is wrong.
    public init(parsing text: String, password fallback: String? = nil) throws(ZoneStorageError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme,
              scheme == "postgres" || scheme == "postgresql" else {
            throw ZoneStorageError(.invalidArgument, "not a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE): \(Self.redacted(text))")
        }
        guard let user = components.user, !user.isEmpty else {
            throw ZoneStorageError(.invalidArgument, "the PostgreSQL URL names no user: \(Self.redacted(text))")
        }
        self.user = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? fallback
        let items = components.queryItems ?? []
        socketDirectory = items.first { $0.name == "host" }?.value.flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 }
        if host == nil && socketDirectory == nil {
            throw ZoneStorageError(.invalidArgument, "the PostgreSQL URL names no host (or ?host=/socket/directory): \(Self.redacted(text))")
        }
        port = components.port ?? 5432
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? self.user : path
        let mode = items.first { $0.name == "sslmode" }?.value ?? (socketDirectory == nil ? "prefer" : "disable")
        switch mode {
        case "disable", "allow": tls = .disable
        case "prefer": tls = .prefer
        case "require", "verify-ca", "verify-full": tls = .require
        default: throw ZoneStorageError(.invalidArgument, "the PostgreSQL URL's sslmode \"\(mode)\" is not one of disable, prefer, require")
        }
    }

    /// The URL with its password masked (for logs and the printed configuration).
    public var description: String {
        let credentials = password == nil ? user : "\(user):****"
        if let socketDirectory { return "postgres://\(credentials)@/\(database)?host=\(socketDirectory)" }
        return "postgres://\(credentials)@\(host ?? ""):\(port)/\(database)?sslmode=\(tls.rawValue)"
    }

    /// A URL text with its password masked.
    static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.password != nil else { return text }
        components.password = "****"
        return components.string ?? "(unprintable)"
    }

    /// The configuration of the pool.
    func clientConfiguration(maxConnections: Int) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = PostgresClient.Configuration(unixSocketPath: socketDirectory + "/.s.PGSQL.\(port)", username: user,
                                                         password: password, database: database)
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(.makeClientConfiguration())
            case .require: tls = .require(.makeClientConfiguration())
            }
            configuration = PostgresClient.Configuration(host: host ?? "localhost", port: port, username: user, password: password,
                                                         database: database, tls: tls)
        }
        configuration.options.maximumConnections = maxConnections
        configuration.options.minimumConnections = 0
        return configuration
    }
}
