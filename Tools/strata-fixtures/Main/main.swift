// Regenerates fixtures: `swift run strata-fixtures [Fixtures] [--divergent | --adopted]`.
//
// The golden logs pin format version 1. Regenerating them is only legitimate together with a new
// format version (and a reader kept for version 1); the golden tests fail when the writer's bytes
// change. `--divergent` rewrites only the pair of divergent device stores (Fixtures/divergent);
// `--adopted` only the store that adopted a state (Fixtures/adopted, from Fixtures/divergent/device-a).
import DivergentStores
import FixtureGenerator

let arguments = CommandLine.arguments.dropFirst()
let root = arguments.first { !$0.hasPrefix("--") } ?? "Fixtures"
if arguments.contains("--adopted") {
    let d = try await AdoptedStore.write(into: root + "/adopted", from: root + "/divergent/device-a")
    print("wrote \(d)")
} else if arguments.contains("--divergent") {
    let (a, b) = try await DivergentStores.write(into: root + "/divergent")
    print("wrote \(a) and \(b)")
} else {
    try await FixtureWriter.writeAll(into: root)
    print("wrote \(FixtureWriter.names.map { "\(root)/log-v1/\($0)" }.joined(separator: ", "))")
}
