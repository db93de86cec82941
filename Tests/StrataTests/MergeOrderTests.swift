@testable import Strata
import StrataTestSupport
import Testing
@testable import StrataCore

/// The merge order is stated twice for speed — ``EventStamp``'s `<` for apps and tools, and the
/// projection's `isNewer` on interned references — and must be one order.
@Suite("The merge order")
struct MergeOrderTests {
    @Test("the projection's isNewer and EventStamp's < agree on random events, HLC and replica ties included")
    func oneOrder() throws {
        let seed = UInt64.random(in: 0 ... .max)
        var random = SeededGenerator(seed: seed)
        let projection = Projection()
        let replicas = (0..<4).map { _ in ReplicaID.random() }
        let indices = try replicas.map { try projection.internReplica($0) }
        func event() -> (Ref, EventStamp) {
            let hlc = UInt64.random(in: 1...3, using: &random)
            let which = Int.random(in: 0..<replicas.count, using: &random)
            let sequence = UInt64.random(in: 1...3, using: &random)
            return (Ref(hlc: hlc, sequence: sequence, replica: indices[which]),
                    EventStamp(hlc: HLC(rawValue: hlc), replica: replicas[which], sequence: sequence))
        }
        for _ in 0..<5_000 {
            let (refA, stampA) = event()
            let (refB, stampB) = event()
            #expect(projection.isNewer(refA, than: refB) == (stampB < stampA), "seed \(seed): \(stampA) vs \(stampB)")
        }
    }
}
