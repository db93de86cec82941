// swift-tools-version: 6.1
// A nested package so that the benchmark harness (and anything it may ever depend on) stays out
// of the main build. Run from the repository root:
//
//     swift run -c release --package-path Tools/Benchmarks strata-log-bench
//     swift run -c release --package-path Tools/Benchmarks strata-store-bench
//     swift run -c release --package-path Tools/Benchmarks strata-sync-bench
import PackageDescription

let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Strata", path: "../.."),
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
            dependencies: ["BenchSupport", .product(name: "Strata", package: "Strata")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Sync over loopback HTTP against the log server, which runs in a child process (this
        // executable re-run with --serve).
        .executableTarget(
            name: "strata-sync-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
                .product(name: "StrataServer", package: "Strata"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
