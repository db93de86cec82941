// swift-tools-version: 6.1
// A nested package so that the benchmark harness (and anything it may ever depend on) stays out
// of the main build. Run from the repository root:
//
//     swift run -c release --package-path Tools/Benchmarks strata-log-bench
//     swift run -c release --package-path Tools/Benchmarks strata-store-bench
//     swift run -c release --package-path Tools/Benchmarks strata-sync-bench
//     swift run -c release --package-path Tools/Benchmarks strata-models-bench
//     swift run -c release --package-path Tools/Benchmarks strata-schema-bench [--quick]
//     swift run -c release --package-path Tools/Benchmarks strata-processes-bench [--quick]
//     swift run -c release --package-path Tools/Benchmarks strata-index-bench [--quick]
//     swift run -c release --package-path Tools/Benchmarks strata-asset-bench [--quick] [--big]
//     bash Tools/scripts/postgres-bench.sh     # strata-postgres-bench on a throwaway PostgreSQL cluster
//     bash Tools/scripts/bench-compare.sh     # strata-vs-sqlite + catch-up, into Benchmarks.md
import PackageDescription

let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The server, the CLI and the AsyncHTTPClient transport are behind the trait Server.
        .package(name: "Strata", path: "../..", traits: ["Server"]),
        // Only for strata-vs-sqlite: the SQLite side of the comparison (system libsqlite3).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        // Only for strata-postgres-bench: PostgreSQL's own rate for the same rows.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.25.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.60.0"),
    ],
    targets: [
        // What the harnesses share: clocks, formatting, the data directory, the report table.
        .target(
            name: "BenchSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "strata-log-bench",
            dependencies: ["BenchSupport", .product(name: "StrataLog", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "strata-store-bench",
            dependencies: ["BenchSupport", .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"), .product(name: "StrataLog", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Sync over loopback HTTP against the log server, which runs in a child process (this
        // executable re-run with --serve).
        // <sys/epoll.h> for strata-sync-bench's fleet load generator (Linux only).
        .target(name: "CEpoll"),
        .executableTarget(
            name: "strata-sync-bench",
            dependencies: [
                "BenchSupport",
                .target(name: "CEpoll", condition: .when(platforms: [.linux])),
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
                .product(name: "StrataServer", package: "Strata"),
                .product(name: "StrataProtocol", package: "Strata"),
                .product(name: "StrataLog", package: "Strata"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Assets over loopback HTTP: upload throughput next to an fsynced file write, memory while
        // uploading a 5 GiB asset, lazy fetch latency, and opening a store of 10,000 photos. The
        // server runs in a child process (this executable re-run with --serve).
        .executableTarget(
            name: "strata-asset-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
                .product(name: "StrataSyncAsyncHTTPClient", package: "Strata"),
                .product(name: "StrataServer", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                .product(name: "StrataProtocol", package: "Strata"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The log server on PostgreSQL: pushes through one and three instances next to
        // PostgreSQL's own rate for the same rows, catch-up next to the embedded storage, and
        // wake-ups across instances (Tools/scripts/postgres-bench.sh starts a throwaway cluster).
        .executableTarget(
            name: "strata-postgres-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
                .product(name: "StrataServer", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                .product(name: "StrataProtocol", package: "Strata"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // `strata verify`, `inspect`, `diff` and `replay` on 1 M-event stores: the release
        // executable in fresh processes under /usr/bin/time (Tools/scripts/cli-bench.sh).
        .executableTarget(
            name: "strata-cli-bench",
            dependencies: ["BenchSupport", .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"), .product(name: "StrataLog", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Typed model fetches next to GRDB's FetchableRecord, and remote apply → observed query latency.
        .executableTarget(
            name: "strata-schema-bench",
            dependencies: ["BenchSupport", .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "strata-processes-bench",
            dependencies: ["BenchSupport", .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "strata-models-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Strata next to SQLite (GRDB) on the same corpus with the same durability: durable
        // appends and cold opens (fresh child processes: this executable re-run with --open-*).
        .executableTarget(
            name: "strata-index-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "strata-vs-sqlite",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata"),
                .product(name: "StrataLog", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
