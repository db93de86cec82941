// swift-tools-version: 6.1
// libFuzzer targets for every decoder that reads bytes from disk or the network (issue 21). A
// nested package so that the fuzz build (release, coverage-instrumented, its own scratch path)
// never touches the main build. Run from the repository root:
//
//     bash Tools/scripts/fuzz.sh                   # every target, 100,000 runs each over its corpus
//     STRATA_FUZZ_RUNS=10000000 bash Tools/scripts/fuzz.sh fuzz-transaction
//
// Each target is its own product, so that building one compiles only the modules it needs: most
// need only StrataLog, Strata and StrataProtocol; the sync cursor needs StrataSync (AsyncHTTPClient)
// and the users file and state upload need StrataServer (Hummingbird). See README.md.
import PackageDescription

/// A fuzz target: one file under Sources/<name>, linked against libFuzzer's `main`.
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + dependencies,
        swiftSettings: [
            .swiftLanguageMode(.v6),
            // libFuzzer provides `main`; the file only defines LLVMFuzzerTestOneInput.
            .unsafeFlags(["-parse-as-library"]),
        ]
    )
}

let strata: [Target.Dependency] = [.product(name: "Strata", package: "Strata"), .product(name: "StrataCore", package: "Strata")]
let log: [Target.Dependency] = [.product(name: "StrataLog", package: "Strata")]
let proto: [Target.Dependency] = [.product(name: "StrataProtocol", package: "Strata")]

let package = Package(
    name: "StrataFuzz",
    platforms: [.macOS(.v15)],
    products: [
        "fuzz-log-record", "fuzz-log-segment", "fuzz-transaction", "fuzz-adoption", "fuzz-snapshot",
        "fuzz-change-token", "fuzz-push-frames", "fuzz-store-identity", "fuzz-sync-cursor",
        "fuzz-users-file", "fuzz-state-upload", "fuzz-packed-log",
    ].map { .executable(name: $0, targets: [$0]) },
    dependencies: [
        // The server, the CLI and the AsyncHTTPClient transport are behind the trait Server.
        .package(name: "Strata", path: "../..", traits: ["Server"]),
    ],
    targets: [
        // Turning the fuzzer's buffer into bytes, and writing a target's seed corpus.
        .target(name: "FuzzSupport", dependencies: log, swiftSettings: [.swiftLanguageMode(.v6)]),
        fuzzTarget("fuzz-log-record", log),
        fuzzTarget("fuzz-log-segment", log),
        fuzzTarget("fuzz-transaction", strata + log),
        fuzzTarget("fuzz-adoption", strata + log),
        fuzzTarget("fuzz-snapshot", strata + log),
        fuzzTarget("fuzz-change-token", proto),
        fuzzTarget("fuzz-push-frames", proto + strata + log),
        fuzzTarget("fuzz-store-identity", strata + log),
        fuzzTarget("fuzz-sync-cursor", [.product(name: "StrataSync", package: "Strata")] + strata + log),
        fuzzTarget("fuzz-users-file", [.product(name: "StrataServer", package: "Strata")]),
        fuzzTarget("fuzz-state-upload", [.product(name: "StrataServer", package: "Strata")] + strata + log),
        fuzzTarget("fuzz-packed-log", strata + log),
    ]
)
