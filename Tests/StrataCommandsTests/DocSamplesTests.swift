import Foundation
import StrataTestSupport
import Testing

/// Every Swift code sample in README.md and in the DocC articles (`Sources/*/*.docc/*.md`) is
/// type-checked against the package's built modules, so that what the documentation shows
/// compiles. All samples go into one generated file and one `swiftc -typecheck` run (about a
/// second), not one compiler run per sample.
///
/// The convention a sample follows:
/// - The ```` ```swift ```` blocks of one document are, in order, the body of one
///   `async throws` function: a later block uses what an earlier one declared (a model, a
///   store). `import` lines are moved to the top of the file; an article in a module's catalog
///   imports that module, as well as `Strata` and `StrataSync`.
/// - The names a sample takes from its surroundings are that function's parameters (see
///   ``DocSamples/parameters``): `store`, `path` and `directory` (a store's folder), `url` and
///   `serverURL`, `token`, `auth` (an app's authentication, with `accessToken(refresh:)`,
///   `accessToken()` and `refreshedAccessToken()`); and `show(_:)` (an app's rendering) is
///   declared in ``DocSamples/prelude``.
/// - A block that cannot compile here is fenced ```` ```swift-nocompile ```` and its first line
///   is a `//` comment saying why (SwiftUI, say, exists on Apple platforms only).
///
/// Compiler errors name the document and line of the sample (`#sourceLocation`).
@Suite("Documentation samples")
struct DocSamplesTests {
    @Test("every Swift sample in README.md and the DocC articles compiles against the package")
    func samplesCompile() throws {
        let samples = try DocSamples.collect()
        #expect(samples.blockCount >= 10, "the samples were not found (\(samples.blockCount) blocks)")
        #expect(samples.problems.isEmpty, "\(samples.problems.joined(separator: "\n"))")
        let result = try DocSamples.typecheck(samples.source)
        #expect(result.status == 0, "a documentation sample does not compile:\n\(result.stderr)")
    }

    @Test("a broken sample fails the check, naming its document and line")
    func brokenSampleFails() throws {
        let source = try DocSamples.assemble([
            DocSamples.Document(name: "Broken.md", blocks: [
                .init(line: 7, lines: ["let store = try await Store.open(at: path, schema: Schema.empty)",
                                       "for await x in store.observe(Never.self) { show(x) }"]),
            ]),
        ])
        let result = try DocSamples.typecheck(source)
        #expect(result.status != 0)
        #expect(result.stderr.contains("Broken.md:8"), "\(result.stderr)")
    }
}

/// Finds, assembles and type-checks the documentation's samples.
enum DocSamples {
    struct Block {
        /// The line (1-based) of the block's first line of code in its document.
        var line: Int
        var lines: [String]
    }

    struct Document {
        /// The path relative to the package root.
        var name: String
        var blocks: [Block]
    }

    /// What collecting found: the generated source, and blocks that break the convention.
    struct Collected {
        var source: String
        var blockCount: Int
        var problems: [String]
    }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// What the samples take from their surroundings, besides ``parameters``.
    static let prelude = """
        func show<T>(_ value: T) {}
        struct SampleAuthentication: Sendable {
            func accessToken(refresh: Bool = false) async throws -> String { "" }
            func refreshedAccessToken() async throws -> String { "" }
        }
        """

    /// The parameters of every document's function: the names its samples may use undeclared
    /// (a sample may declare its own, which then shadows the parameter).
    static let parameters = "store: Store, path: String, directory: String, url: URL, serverURL: URL, token: String, auth: SampleAuthentication"

    /// README.md and every DocC article, in a stable order.
    static func documentPaths() throws -> [String] {
        var paths = ["README.md"]
        let sources = packageRoot.appendingPathComponent("Sources")
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let modulePath = sources.appendingPathComponent(module)
            for catalog in (try? FileManager.default.contentsOfDirectory(atPath: modulePath.path))?.sorted() ?? [] where catalog.hasSuffix(".docc") {
                let catalogPath = modulePath.appendingPathComponent(catalog)
                for article in try FileManager.default.contentsOfDirectory(atPath: catalogPath.path).sorted() where article.hasSuffix(".md") {
                    paths.append("Sources/\(module)/\(catalog)/\(article)")
                }
            }
        }
        return paths
    }

    static func collect() throws -> Collected {
        var documents: [Document] = []
        var problems: [String] = []
        var count = 0
        for path in try documentPaths() {
            let text = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
            let (blocks, found) = extract(text, name: path)
            problems += found
            count += blocks.count
            if !blocks.isEmpty { documents.append(Document(name: path, blocks: blocks)) }
        }
        return Collected(source: try assemble(documents), blockCount: count, problems: problems)
    }

    /// The ```swift blocks of a Markdown text; ```swift-nocompile blocks are checked to say why.
    static func extract(_ text: String, name: String) -> ([Block], [String]) {
        var blocks: [Block] = []
        var problems: [String] = []
        var current: Block?
        var skipping: Int?  // the line of an open swift-nocompile block
        var inOtherFence = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var block = current {
                if trimmed == "```" {
                    blocks.append(block)
                    current = nil
                } else {
                    block.lines.append(String(line))
                    current = block
                }
            } else if let start = skipping {
                if trimmed == "```" {
                    skipping = nil
                } else if index == start + 1, !trimmed.hasPrefix("//") {
                    problems.append("\(name):\(index + 1): a swift-nocompile block must start with a // comment saying why it is not compiled")
                }
            } else if inOtherFence {
                if trimmed == "```" { inOtherFence = false }
            } else if trimmed == "```swift" {
                current = Block(line: index + 2, lines: [])
            } else if trimmed == "```swift-nocompile" {
                skipping = index
            } else if trimmed.hasPrefix("```") {
                inOtherFence = true
            }
        }
        if current != nil || skipping != nil { problems.append("\(name): a code block is not closed") }
        return (blocks, problems)
    }

    /// One file: the imports of every block, the prelude, then a function per document.
    static func assemble(_ documents: [Document]) throws -> String {
        var imports: Set<String> = ["import Foundation", "import Strata", "import StrataSync"]
        var functions = ""
        for (number, document) in documents.enumerated() {
            let parts = document.name.split(separator: "/")
            if parts.count > 2, parts[0] == "Sources", parts[2].hasSuffix(".docc") { imports.insert("import \(parts[1])") }
            functions += "\nfunc documentSample\(number)(\(parameters)) async throws {\n"
            for block in document.blocks {
                functions += "#sourceLocation(file: \"\(document.name)\", line: \(block.line))\n"
                for line in block.lines {
                    if line.hasPrefix("import ") {
                        imports.insert(line.trimmingCharacters(in: .whitespaces))
                        functions += "\n"  // keeps the lines numbered as in the document
                    } else {
                        functions += line + "\n"
                    }
                }
                functions += "#sourceLocation()\n"
            }
            functions += "}\n"
        }
        return imports.sorted().joined(separator: "\n") + "\n\n" + prelude + "\n" + functions
    }

    /// `swiftc -typecheck` of `source` against the modules `swift build --build-tests` made.
    static func typecheck(_ source: String) throws -> ChildProcess.Result {
        let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("strata-doc-samples-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let file = scratch.appendingPathComponent("DocSamples.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        let build = try buildDirectory()
        // Warnings (an unused value in a fragment) are not what this checks.
        var arguments = ["swiftc", "-typecheck", "-parse-as-library", "-swift-version", "6", "-suppress-warnings"]
        let modules = build.appendingPathComponent("Modules")
        arguments += ["-I", FileManager.default.fileExists(atPath: modules.path) ? modules.path : build.path]
        for map in try moduleMaps(build: build) { arguments += ["-Xcc", "-fmodule-map-file=" + map] }
        arguments.append(file.path)
        return try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), arguments)
    }

    /// The build products' directory: where the running test binary is (SwiftPM puts the
    /// compiled modules there, or in its `Modules` folder).
    static func buildDirectory() throws -> URL {
        let bases = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])]
            .compactMap { $0?.resolvingSymlinksInPath().deletingLastPathComponent() }
        for base in bases {
            var directory = base
            for _ in 0..<4 {
                if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Strata.swiftmodule").path)
                    || FileManager.default.fileExists(atPath: directory.appendingPathComponent("Modules/Strata.swiftmodule").path) {
                    return directory
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "no built Strata module next to the test binary (run `swift build --build-tests --traits Server`)"])
    }

    /// The module maps of the C modules the package's modules depend on: those SwiftPM generated
    /// in the build directory, and those of the package's and its dependencies' sources.
    static func moduleMaps(build: URL) throws -> [String] {
        var maps: [String] = []
        let fileManager = FileManager.default
        for entry in try fileManager.contentsOfDirectory(atPath: build.path) where entry.hasSuffix(".build") {
            let map = build.appendingPathComponent(entry).appendingPathComponent("module.modulemap")
            if fileManager.fileExists(atPath: map.path) { maps.append(map.path) }
        }
        // The dependencies' checkouts: in the scratch directory the build directory is in
        // (`<scratch>/<triple>/debug`), which is the package's `.build` unless `--scratch-path` moved it.
        let scratch = build.resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
        var roots = [packageRoot.appendingPathComponent("Sources"), scratch.appendingPathComponent("checkouts")]
        if !fileManager.fileExists(atPath: roots[1].path) { roots[1] = packageRoot.appendingPathComponent(".build/checkouts") }
        for root in roots {
            guard let walker = fileManager.enumerator(atPath: root.path) else { continue }
            while let relative = walker.nextObject() as? String {
                guard relative.hasSuffix("/module.modulemap") else { continue }
                // A dependency's own tests and examples may define modules of the same names.
                let parts = relative.split(separator: "/")
                guard root == roots[0] || parts.dropFirst().first == "Sources" else { continue }
                maps.append(root.appendingPathComponent(relative).path)
            }
        }
        return maps
    }
}
