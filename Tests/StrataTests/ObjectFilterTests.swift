import Testing
@testable import StrataCore
import StrataTestSupport

@Suite("Object filter (a partial replay's set)")
struct ObjectFilterTests {
    @Test("answers as the set does: random IDs, IDs that share their low bits, sequential IDs, none")
    func sameAsSet() {
        let seed = UInt64.random(in: 0 ... .max)
        var rng = SeededGenerator(seed: seed)
        func random() -> ObjectID { ObjectID(rawValue: UInt128(rng.next()) << 64 | UInt128(rng.next())) }
        var members = Set((0..<2_000).map { _ in random() })
        // Same low 64 bits as a member, other high bits; sequential small IDs (tests, fixtures).
        let twins = members.prefix(50).map { ObjectID(rawValue: (UInt128(rng.next()) << 64) | ($0.rawValue & UInt128(UInt64.max))) }
        members.formUnion((1...300).map { ObjectID(rawValue: UInt128($0)) })
        let filter = ObjectFilter(members)
        let probes = Array(members) + twins + (0..<20_000).map { _ in random() } + (1...2_000).map { ObjectID(rawValue: UInt128($0)) }
        for id in probes {
            #expect(filter.contains(id) == members.contains(id), "\(id), seed \(seed)")
        }
        let empty = ObjectFilter([])
        #expect(!probes.contains { empty.contains($0) })
    }
}
