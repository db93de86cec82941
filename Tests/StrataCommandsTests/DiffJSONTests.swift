import Foundation
@testable import StrataCommands
import StrataTestSupport
import Testing

/// `diff --json` encodes its members at once and joins them; the bytes must be the encoder's own
/// for the whole value — whatever the members hold (empty lists, absent optionals, nesting).
@Suite("diff --json: joined members = the whole value encoded")
struct DiffJSONTests {
    @Test("the committed divergent pair, a store against itself, and each way round")
    func fixtures() throws {
        let copy = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: FixturePaths.deviceB, toPath: copy.sub("b"))
        let diffs = [
            try StoreDiff.run(FixturePaths.deviceA, FixturePaths.deviceB, progress: nil),
            try StoreDiff.run(FixturePaths.deviceB, FixturePaths.deviceA, limit: 1, progress: nil),
            try StoreDiff.run(FixturePaths.deviceB, copy.sub("b"), progress: nil),
        ]
        #expect(diffs[2].equal && diffs[2].objects.isEmpty && diffs[2].firstDivergent == nil)
        for (i, diff) in diffs.enumerated() {
            #expect(try diff.json == JSONOutput.string(diff), "diff \(i)")
        }
    }

    @Test("members of every shape: empty arrays and objects, nested ones, strings with breaks and escapes")
    func shapes() throws {
        struct Inner: Codable, Sendable { var list: [Int] = []; var map: [String: [Int]] = ["z": [], "a": [1, 2]]; var text = "a\nb/\"c\"\u{1} é" }
        struct Outer: Codable, Sendable { var b: Inner? = Inner(); var a: [Inner] = [Inner(), Inner(list: [3])]; var c: Inner? = nil; var d = 1.5e-7; var e: [String] = [] }
        let value = Outer()
        let joined = try JSONOutput.prettyObject([("b", value.b), ("a", value.a), ("c", value.c), ("d", value.d), ("e", value.e)])
        #expect(joined == (try JSONOutput.string(value)))
    }
}
