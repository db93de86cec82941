import Foundation
import Hummingbird
public import Logging
import NIOSSL
import ServiceLifecycle
import StrataLog
import UnixSignals

/// What `strata serve` serves: the storage, users, listening address and limits, history
/// retention and TLS.
public struct ServeOptions: Sendable {
    /// Where the zones live (an ``EmbeddedZoneStorage``), unless ``storage`` is given.
    public var dataDirectory: String
    /// A storage made by the caller (a `PostgresZoneStorage` shared by several instances):
    /// served instead of an embedded storage in ``dataDirectory``, run by the server's service
    /// group (``ZoneStorage`` is a `Service`: its connection pool and schema) and closed on the
    /// way out.
    public var storage: (any ZoneStorage)?
    /// The users file (see ``UserDirectory``), reloaded on SIGHUP.
    public var usersFile: String
    /// The address, port and limits.
    public var configuration: ServerConfiguration
    /// How much history to keep (`nil`: everything, no compactor).
    public var retention: Retention?
    /// When unneeded assets are swept (`nil`: never; by default hourly, with a day's grace).
    public var assetSweep: AssetSweepSchedule?
    /// HTTPS with these files (`nil`: plain HTTP).
    public var tls: TLSFiles?
    /// The issuers whose bearer JWTs sign users in, beside the users file's static tokens (see
    /// <doc:JWTSignIn>). Their keys are read before the server starts.
    public var jwtIssuers: [JWTIssuer] = []

    public init(dataDirectory: String, usersFile: String, configuration: ServerConfiguration = ServerConfiguration(),
                retention: Retention? = nil, assetSweep: AssetSweepSchedule? = AssetSweepSchedule(), tls: TLSFiles? = nil,
                storage: (any ZoneStorage)? = nil) {
        self.dataDirectory = dataDirectory
        self.assetSweep = assetSweep
        self.storage = storage
        self.usersFile = usersFile
        self.configuration = configuration
        self.retention = retention
        self.tls = tls
    }
}

extension StrataServerApp {
    /// `strata serve`: the server over an ``EmbeddedZoneStorage`` in `dataDirectory`, with the
    /// compactor when `retention` says so, until SIGTERM or SIGINT. See
    /// ``serve(_:logger:metrics:onRunning:)``.
    public static func serve(dataDirectory: String, port: Int, usersFile: String, host: String = "127.0.0.1",
                             limits: ServerConfiguration.Limits = ServerConfiguration.Limits(),
                             retention: Retention? = nil,
                             logger: Logger = Logger(label: "strata.server"),
                             onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) async throws {
        try await serve(ServeOptions(dataDirectory: dataDirectory, usersFile: usersFile,
                                     configuration: ServerConfiguration(host: host, port: port, limits: limits), retention: retention),
                        logger: logger, onRunning: onRunning)
    }

    /// `strata serve`: runs the server as a swift-service-lifecycle `ServiceGroup` until SIGTERM or
    /// SIGINT, then shuts down gracefully, one service after the other in this order:
    ///
    /// 1. long polls are answered at once (an empty page with the same token and
    ///    `Strata-Shutting-Down: true`) and `/ready` answers `503` (``beginShutdown()``);
    /// 2. the HTTP server stops accepting connections and lets the requests in flight — pushes
    ///    included — finish;
    /// 3. the compactor stops (a compaction under way finishes);
    /// 4. the storage closes: every acknowledged push is durable when this returns.
    ///
    /// The storage is the group's first service: it runs before the others need it (a database's
    /// connection pool and schema migration) and stops last. A storage that cannot run (a
    /// database that cannot be reached, a newer schema) stops the server with its error.
    ///
    /// A service that fails (the port taken, the storage failing to close) shuts the others down
    /// in the same order, and its error is thrown. SIGHUP reloads the users file.
    ///
    /// - Parameters:
    ///   - options: what to serve and how (storage, users file, configuration, retention, TLS).
    ///   - logger: where the server logs.
    ///   - metrics: where the server counts.
    ///   - onRunning: called with the port listened on once the server accepts connections.
    public static func serve(_ options: ServeOptions, logger: Logger = Logger(label: "strata.server"),
                             metrics: ServerMetrics = ServerMetrics(),
                             onRunning: (@Sendable (_ port: Int) async -> Void)? = nil) async throws {
        let users = try UserRegistry(loading: options.usersFile)
        // The issuers' keys are read now: a server that cannot verify its users' tokens does
        // not start. Their namespaces must not hold a static user (see JWTVerifier).
        let jwt: JWTVerifier?
        do {
            jwt = options.jwtIssuers.isEmpty ? nil : try await JWTVerifier.load(options.jwtIssuers, logger: logger)
            try jwt?.checkNoClash(with: users.current)
        } catch {
            try? await options.storage?.close()
            throw error
        }
        // SIGHUP reloads the users file (a bad one is logged and the users loaded before stay).
        let hangup = users.reloadingOnHangup(logger: logger)
        defer { hangup.cancel() }
        // Checked before the storage opens, so that a bad certificate stops nothing half-started.
        let tls: TLSConfiguration?
        do {
            tls = try options.tls?.serverConfiguration()
        } catch {
            try? await options.storage?.close()
            throw error
        }
        let storage: any ZoneStorage
        if let given = options.storage {
            storage = given
        } else {
            var storageOptions = EmbeddedZoneStorage.Options()
            storageOptions.log.commitObserver = metrics.commitObserver
            storage = try EmbeddedZoneStorage(directory: options.dataDirectory, options: storageOptions, logger: logger)
        }
        let server = StrataServerApp(storage: storage, users: users, configuration: options.configuration, logger: logger, metrics: metrics,
                                     jwt: jwt)
        let application: Application<RouterResponder<StrataRequestContext>>
        do {
            application = try server.buildApplication(tls: tls, onRunning: onRunning)
        } catch {
            try? await storage.close()
            throw error
        }
        logger.info("strata server starting", metadata: [
            "host": "\(options.configuration.host)", "port": "\(options.configuration.port)",
            "storage": "\(options.storage.map { "\(type(of: $0))" } ?? options.dataDirectory)",
            "users": "\(users.current.users.count)", "tls": "\(options.tls != nil)",
            "jwtIssuers": "\(options.jwtIssuers.map(\.issuer).joined(separator: ","))",
        ])
        // The group shuts its services down in the reverse of this order.
        // The storage is the first service: it runs (a database's connection pool and schema)
        // before the others need it and closes after them.
        var services: [(name: String, service: any Service)] = [("storage", storage)]
        // Compaction and the asset sweep never run at once: with a compactor, it sweeps after a pass.
        if let retention = options.retention {
            services.append(("compactor", CompactorService(storage: storage, retention: retention, assetSweep: options.assetSweep,
                                                           logger: logger, metrics: metrics)))
        } else if let assetSweep = options.assetSweep {
            services.append(("asset sweeper", AssetSweeperService(storage: storage, schedule: assetSweep, logger: logger, metrics: metrics)))
        }
        services.append(("changes by others", ChangeFeedService(server: server)))
        services.append(("http", application))
        services.append(("shutdown", ShutdownAnnouncer(server: server)))
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map {
                // Any service ending, by success or failure, takes the others down in order.
                .init(service: $0.service, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: $0.name)
            },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        do {
            try await group.run()
        } catch {
            server.beginShutdown()
            throw error
        }
        logger.info("strata server stopped")
    }
}
