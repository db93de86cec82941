// swift-tools-version: 6.1
// The smallest app package that syncs: it depends on Strata's two app libraries only, as an app
// does. The test command builds it in a folder of its own and checks that it resolves none of the
// server's, PostgreSQL's or the CLI's packages (Tests/StrataCommandsTests/MinimalAppTests.swift),
// then runs it against a real `strata serve`.
import PackageDescription

let package = Package(
    name: "MinimalApp",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "Strata", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "MinimalApp",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
            ],
            // The strictest setting an app may build with: a member is visible only when its
            // module is imported, so a type the two libraries use but do not re-export fails here.
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
    ]
)
