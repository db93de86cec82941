import Hummingbird
public import Logging

/// Runs the log server until the process receives SIGINT or SIGTERM: opens (creating when needed)
/// an ``EmbeddedZoneStorage`` in `dataDirectory`, loads the users file, listens on `host:port`,
/// and closes the storage (making everything durable) on the way out.
///
/// ```swift
/// try await runServer(dataDirectory: "/var/lib/strata", port: 8080, usersFile: "/etc/strata/users.json")
/// ```
///
/// - Parameters:
///   - dataDirectory: where the zones live (see ``EmbeddedZoneStorage``).
///   - port: the port to listen on (0 picks a free one).
///   - usersFile: the users and their token digests (see ``UserDirectory``).
///   - host: the address to listen on.
///   - limits: request limits.
///   - logger: where the server logs.
/// - Throws: ``UserDirectoryError`` for a bad users file, ``ZoneStorageError`` when the data
///   directory cannot be opened, or the error that stopped the HTTP server.
public func runServer(dataDirectory: String, port: Int, usersFile: String, host: String = "127.0.0.1",
                      limits: ServerConfiguration.Limits = ServerConfiguration.Limits(),
                      logger: Logger = Logger(label: "strata.server")) async throws {
    let users = try UserDirectory.load(from: usersFile)
    let storage = try EmbeddedZoneStorage(directory: dataDirectory, logger: logger)
    let server = StrataServerApp(storage: storage, users: users,
                                 configuration: ServerConfiguration(host: host, port: port, limits: limits), logger: logger)
    logger.info("strata server starting", metadata: [
        "host": "\(host)", "port": "\(port)", "dataDirectory": "\(dataDirectory)", "users": "\(users.names.count)",
    ])
    do {
        try await server.buildApplication().runService()
    } catch {
        try? await storage.close()
        throw error
    }
    try await storage.close()
    logger.info("strata server stopped")
}
