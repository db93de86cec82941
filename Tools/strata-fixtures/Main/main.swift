// Regenerates fixtures: `swift run strata-fixtures [Fixtures] [--divergent]`.
//
// The golden logs pin format version 1. Regenerating them is only legitimate together with a new
// format version (and a reader kept for version 1); the golden tests fail when the writer's bytes
// change. `--divergent` rewrites only the pair of divergent device stores (Fixtures/divergent).
import DivergentStores
import FixtureGenerator

let arguments = CommandLine.arguments.dropFirst()
let root = arguments.first { !$0.hasPrefix("--") } ?? "Fixtures"
if arguments.contains("--divergent") {
    let (a, b) = try await DivergentStores.write(into: root + "/divergent")
    print("wrote \(a) and \(b)")
} else {
    try await FixtureWriter.writeAll(into: root)
    print("wrote \(FixtureWriter.names.map { "\(root)/log-v1/\($0)" }.joined(separator: ", "))")
}
