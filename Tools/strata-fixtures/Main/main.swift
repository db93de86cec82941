// Regenerates the golden fixtures: `swift run strata-fixtures [Fixtures]`.
//
// The fixtures pin format version 1. Regenerating them is only legitimate together with a new
// format version (and a reader kept for version 1); the golden tests fail when the writer's bytes
// change.
import FixtureGenerator

let root = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "Fixtures"
try await FixtureWriter.writeAll(into: root)
print("wrote \(FixtureWriter.names.map { "\(root)/log-v1/\($0)" }.joined(separator: ", "))")
