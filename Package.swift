// swift-tools-version: 6.1
import PackageDescription

/// A product only the server, the CLI, the tools and the tests use (trait `Server`).
func server(_ name: String, _ package: String) -> Target.Dependency {
    .product(name: name, package: package, condition: .when(traits: ["Server"]))
}

/// A product only the AsyncHTTPClient transport uses (trait `AsyncHTTPClient`, which `Server` enables).
func nio(_ name: String, _ package: String) -> Target.Dependency {
    .product(name: name, package: package, condition: .when(traits: ["AsyncHTTPClient"]))
}

let package = Package(
    name: "Strata",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2), .macCatalyst(.v18)],
    products: [
        .library(name: "StrataLog", targets: ["StrataLog"]),
        .library(name: "StrataCore", targets: ["StrataCore"]),
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataProtocol", targets: ["StrataProtocol"]),
        .library(name: "StrataSync", targets: ["StrataSync"]),
        .library(name: "StrataServer", targets: ["StrataServer"]),
        .library(name: "StrataPostgres", targets: ["StrataPostgres"]),
        // The sync transport over AsyncHTTPClient, for apps that run on SwiftNIO (trait
        // `AsyncHTTPClient`); StrataSync's own transport is URLSession, with no dependency.
        .library(name: "StrataSyncAsyncHTTPClient", targets: ["StrataSyncAsyncHTTPClient"]),
        .executable(name: "strata", targets: ["strata"]),
    ],
    // An app that depends on Strata and StrataSync resolves and builds neither the server's, nor
    // PostgreSQL's, nor the CLI's packages: every dependency they bring is guarded by a trait an
    // app leaves off (SwiftPM leaves a package unresolved when all its uses are behind disabled
    // traits). This repository's own commands enable `Server` (`--traits Server`; see README.md).
    traits: [
        .trait(
            name: "Server",
            description: "The log server (StrataServer, StrataPostgres), the strata CLI, its tools and the tests.",
            enabledTraits: ["AsyncHTTPClient"]
        ),
        .trait(
            name: "AsyncHTTPClient",
            description: "StrataSyncAsyncHTTPClient: the sync protocol over AsyncHTTPClient (SwiftNIO) instead of URLSession."
        ),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.1.0"),
        // Sign-in with JWTs (ES256, RS256, JWKS): the server verifies bearer tokens from configured issuers.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.20.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.60.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.20.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.25.0"),
    ],
    targets: [
        // The system liblz4 (no vendored C source). Only LZ4Codec.swift imports it.
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .brew(["lz4"])]
        ),
        // CRC-32C with the CPU's instruction where there is one (our own few lines of C: Swift
        // cannot reach the instruction); StrataLog falls back to tables elsewhere.
        .target(name: "CCRC32C"),
        // The kernel's CSPRNG for identifiers, declared through a C header (getrandom on Linux,
        // glibc and musl; arc4random_buf on Apple platforms).
        .target(name: "CSystemRandom"),
        // SHA-256 blocks with the CPU's SHA extensions where there are some (x86-64); StrataCore
        // falls back to its portable Swift version elsewhere. Assets are hashed byte by byte on
        // every device and on the server: this sets how fast a video goes in.
        .target(name: "CSHA256"),
        // The on-disk format: segments, records, checksums, recovery, index, snapshot files.
        // LZ4 through liblz4 on Linux, through the Compression framework on Apple platforms.
        .target(name: "StrataLog", dependencies: [.target(name: "CLZ4", condition: .when(platforms: [.linux])), "CCRC32C"]),
        // What the app library, the sync engine and the server share: identifiers, the hybrid
        // logical clock, values, the event codec, the merge rule, the projection and its snapshot
        // codec, the schema. The server depends on it, not on the app library; the app library
        // re-exports the part of it an app names (Sources/Strata/Exports.swift).
        .target(name: "StrataCore", dependencies: ["StrataLog", "CSystemRandom", "CSHA256"]),
        // The app-facing library: the store, transactions, queries, observation, snapshots,
        // history. No networking.
        .target(
            name: "Strata",
            dependencies: [
                "StrataCore", "StrataLog",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The sync protocol, shared by client and server: body framing, change tokens, wire
        // types, headers and error codes.
        .target(name: "StrataProtocol", dependencies: ["StrataCore"]),
        // The client sync engine and its HTTP transport over URLSession (Foundation's, so no
        // dependency: on Linux through FoundationNetworking).
        .target(
            name: "StrataSync",
            dependencies: [
                "Strata",
                "StrataCore",
                "StrataLog",
                "StrataProtocol",
                .product(name: "Logging", package: "swift-log"),
                // The engine runs as a service of a ServiceGroup.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The sync transport over AsyncHTTPClient, for apps on SwiftNIO and for the CLI (a private
        // CA with `strata sync --ca-file`).
        .target(
            name: "StrataSyncAsyncHTTPClient",
            dependencies: [
                "StrataSync",
                "StrataProtocol",
                nio("AsyncHTTPClient", "async-http-client"),
                nio("NIOCore", "swift-nio"),
                nio("NIOHTTP1", "swift-nio"),
                // To tell a failed TLS handshake (not retried) from a network failure.
                nio("NIOSSL", "swift-nio-ssl"),
            ]
        ),
        // The log server: zones, change tokens, auth, push and pull over HTTP, storage backends.
        .target(
            name: "StrataServer",
            dependencies: [
                "StrataCore",
                "StrataLog",
                "StrataProtocol",
                server("Hummingbird", "hummingbird"),
                server("HummingbirdTLS", "hummingbird"),
                // The connection bounds (Limits/) are channel handlers on Hummingbird's HTTP/1 channel.
                server("HummingbirdCore", "hummingbird"),
                server("NIOHTTPTypes", "swift-nio-extras"),
                server("NIOCore", "swift-nio"),
                // The JWKS fetch of JWT issuers (Auth/JWKSFetch): an HTTP/1.1 client on NIO.
                server("NIOPosix", "swift-nio"),
                server("NIOHTTP1", "swift-nio"),
                server("NIOSSL", "swift-nio-ssl"),
                server("Crypto", "swift-crypto"),
                // Bearer JWTs verified against configured issuers' keys (Auth/JWT*).
                server("JWTKit", "jwt-kit"),
                server("Logging", "swift-log"),
                server("Metrics", "swift-metrics"),
                server("Prometheus", "swift-prometheus"),
                server("ServiceLifecycle", "swift-service-lifecycle"),
                server("UnixSignals", "swift-service-lifecycle"),
            ]
        ),
        // Zones on PostgreSQL: the ZoneStorage of several `strata serve` instances sharing one
        // database (its own module, so that a server on embedded storage never links PostgresNIO).
        .target(
            name: "StrataPostgres",
            dependencies: [
                "StrataCore",
                "StrataProtocol",
                "StrataServer",
                server("PostgresNIO", "postgres-nio"),
                server("NIOCore", "swift-nio"),
                server("NIOSSL", "swift-nio-ssl"),
                server("Logging", "swift-log"),
            ]
        ),

        // The CLI: every command, its output and its exit code live in a library that tests call;
        // the executable only runs it.
        .target(
            name: "StrataCommands",
            dependencies: [
                "Strata",
                "StrataCore",
                "StrataLog",
                "StrataSync",
                "StrataSyncAsyncHTTPClient",
                "StrataServer",
                "StrataPostgres",
                server("ArgumentParser", "swift-argument-parser"),
                // `strata sync --ca-file`: a client trusting a private CA.
                server("AsyncHTTPClient", "async-http-client"),
                server("NIOSSL", "swift-nio-ssl"),
                server("Logging", "swift-log"),
            ],
            path: "Tools/strata/Commands"
        ),
        .executableTarget(name: "strata", dependencies: ["StrataCommands"], path: "Tools/strata/Main"),
        // Writes the golden logs and snapshot under Fixtures/ (see Fixtures/README.md). The recipe is a
        // library so the golden tests can regenerate the fixtures and compare bytes.
        .target(name: "FixtureGenerator", dependencies: ["StrataLog"], path: "Tools/strata-fixtures/Generator"),
        // A pair of device stores that diverged (same history up to a point, then each missing
        // some of the other's events), for the diff, replay and verify tests.
        .target(name: "DivergentStores", dependencies: ["Strata"], path: "Tools/strata-fixtures/DivergentStores"),
        .executableTarget(name: "strata-fixtures", dependencies: ["FixtureGenerator", "DivergentStores"], path: "Tools/strata-fixtures/Main"),
        // The getting-started example (Examples/Notes): the tests run it and check what it prints.
        .executableTarget(
            name: "strata-example-notes",
            dependencies: ["Strata", "StrataSync", "StrataServer", server("Logging", "swift-log")],
            path: "Examples/Notes"
        ),
        // Child processes for the crash tests: they append (commit) and report what was acknowledged
        // until they are killed.
        .executableTarget(name: "log-crash-child", dependencies: ["StrataLog"], path: "Tools/log-crash-child"),
        .executableTarget(name: "store-crash-child", dependencies: ["Strata"], path: "Tools/store-crash-child"),
        // The processes of the multi-process writer test: each commits to a store they share.
        .executableTarget(name: "store-writers-child", dependencies: ["Strata"], path: "Tools/store-writers-child"),
        // The second process of the multi-process reader test: follows a store another process writes.
        .executableTarget(name: "store-reader-child", dependencies: ["Strata"], path: "Tools/store-reader-child"),

        // Helpers shared by the test targets: temporary directories, seeded randomness, child processes.
        .target(name: "StrataTestSupport", path: "Tests/StrataTestSupport"),
        .testTarget(
            name: "StrataLogTests",
            dependencies: ["StrataLog", "StrataTestSupport", "FixtureGenerator", "log-crash-child"]
        ),
        .testTarget(
            name: "StrataTests",
            dependencies: [
                "Strata", "StrataCore", "StrataTestSupport", "store-crash-child", "store-reader-child", "store-writers-child",
                // Strata's own SHA-256 is checked against swift-crypto's.
                server("Crypto", "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "StrataServerTests",
            dependencies: [
                "StrataServer", "StrataPostgres", "StrataProtocol", "StrataCore", "StrataLog", "StrataTestSupport",
                server("HummingbirdTesting", "hummingbird"),
                server("Prometheus", "swift-prometheus"),
                // The test issuer signs tokens with keys the tests generate.
                server("JWTKit", "jwt-kit"),
                server("Crypto", "swift-crypto"),
                server("Logging", "swift-log"),
                // A channel for a request context made outside a server.
                server("NIOEmbedded", "swift-nio"),
            ]
        ),
        .testTarget(
            name: "StrataCommandsTests",
            dependencies: [
                "StrataCommands", "StrataSync", "StrataSyncAsyncHTTPClient", "StrataServer", "StrataPostgres", "StrataProtocol", "StrataCore", "StrataLog", "DivergentStores", "StrataTestSupport", "strata",
                "strata-example-notes",
                // The TLS tests sync over HTTPS with a client trusting a test CA.
                server("AsyncHTTPClient", "async-http-client"),
                server("NIOCore", "swift-nio"),
                server("NIOHTTP1", "swift-nio"),
                server("NIOSSL", "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "StrataSyncTests",
            dependencies: [
                "StrataSync", "StrataSyncAsyncHTTPClient", "StrataServer", "StrataPostgres", "StrataProtocol", "StrataCore", "StrataLog", "StrataTestSupport",
                // The tools' own verification and replay, run on every simulated device's store.
                "StrataCommands",
                server("HummingbirdTesting", "hummingbird"),
                // A live server that misbehaves on purpose (URLSessionExchangeBoundsTests).
                server("Hummingbird", "hummingbird"),
                server("NIOCore", "swift-nio"),
                server("ServiceLifecycle", "swift-service-lifecycle"),
                server("AsyncHTTPClient", "async-http-client"),
                server("NIOHTTP1", "swift-nio"),
            ]
        ),
    ]
)

for target in package.targets where target.type != .system && target.name != "CCRC32C" && target.name != "CSystemRandom" && target.name != "CSHA256" {
    var settings = target.swiftSettings ?? []
    settings.append(contentsOf: [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
    ])
    target.swiftSettings = settings
}

// `swift package generate-documentation` (Tools/scripts/docs.sh sets STRATA_DOCC_PLUGIN=1): a plugin,
// nothing of it is linked, and an app never resolves it.
if Context.environment["STRATA_DOCC_PLUGIN"] == "1" {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"))
}
