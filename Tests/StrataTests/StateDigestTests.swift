import Foundation
import Testing
@testable import StrataCore
import StrataTestSupport

/// State digests by object ID ranges and their bisection: the objects two sides hold otherwise,
/// found by exchanging digests.
@Suite("State digests")
struct StateDigestTests {
    /// Random sides: `count` objects, some changed, some removed on either side, IDs random or
    /// clustered (consecutive, as a generator counting up would make them).
    func sides(seed: UInt64, count: Int, clustered: Bool) -> (StateDigests, StateDigests, differing: Set<ObjectID>, onlyA: Set<ObjectID>, onlyB: Set<ObjectID>) {
        var rng = SeededGenerator(seed: seed)
        let base = UInt128(rng.next()) << 64 | UInt128(rng.next())
        var a: [ObjectFingerprint] = []
        var b: [ObjectFingerprint] = []
        var differing: Set<ObjectID> = []
        var onlyA: Set<ObjectID> = []
        var onlyB: Set<ObjectID> = []
        for i in 0..<count {
            let id = ObjectID(rawValue: clustered ? base &+ UInt128(i) : UInt128(rng.next()) << 64 | UInt128(rng.next()))
            let print = Fingerprint(high: rng.next(), low: rng.next())
            switch rng.next() % 1000 {
            case 0:
                a.append(ObjectFingerprint(id: id, fingerprint: print))
                // Another random fingerprint, as another state's hash is (flipping one bit would
                // change sums by ±1, and two such changes in one range cancel out).
                b.append(ObjectFingerprint(id: id, fingerprint: Fingerprint(high: rng.next(), low: rng.next())))
                differing.insert(id)
            case 1:
                a.append(ObjectFingerprint(id: id, fingerprint: print))
                onlyA.insert(id)
            case 2:
                b.append(ObjectFingerprint(id: id, fingerprint: print))
                onlyB.insert(id)
            default:
                a.append(ObjectFingerprint(id: id, fingerprint: print))
                b.append(ObjectFingerprint(id: id, fingerprint: print))
            }
        }
        return (StateDigests(a), StateDigests(b), differing, onlyA, onlyB)
    }

    @Test("Bisection finds exactly the objects that differ or exist on one side, for random and clustered IDs (seeded)", arguments: [false, true])
    func findsExactly(clustered: Bool) throws {
        let base = UInt64.random(in: 1...UInt64.max / 2)
        for seed in base..<base + 20 {
            let count = 1 + Int(seed % 7) * 3_000
            let (a, b, differing, onlyA, onlyB) = sides(seed: seed, count: count, clustered: clustered)
            let outcome = try StateBisection.compare(a, with: b, limit: 100_000)
            let context = "seed \(seed), \(count) objects, clustered \(clustered)"
            #expect(Set(outcome.differing) == differing, "\(context)")
            #expect(Set(outcome.onlyHere) == onlyA, "\(context)")
            #expect(Set(outcome.onlyThere) == onlyB, "\(context)")
            #expect(!outcome.truncated, "\(context)")
            // From the other side, the same objects with the sides swapped.
            let back = try StateBisection.compare(b, with: a, limit: 100_000)
            #expect(Set(back.onlyHere) == onlyB && Set(back.onlyThere) == onlyA && Set(back.differing) == differing, "\(context)")
        }
    }

    @Test("One differing object among 100,000 takes a few round trips and a few kilobytes; equal sides one round; a side with nothing finds the other's objects")
    func cost() throws {
        var rng = SeededGenerator(seed: 7)
        let objects = (0..<100_000).map { _ in ObjectFingerprint(id: ObjectID(rawValue: UInt128(rng.next()) << 64 | UInt128(rng.next())), fingerprint: Fingerprint(high: rng.next(), low: rng.next())) }
        var changed = objects
        changed[65_432].fingerprint.low ^= 1
        let outcome = try StateBisection.compare(StateDigests(objects), with: StateDigests(changed))
        #expect(outcome.differing == [objects[65_432].id] && outcome.onlyHere.isEmpty && outcome.onlyThere.isEmpty)
        #expect(outcome.rounds <= 6, "rounds: \(outcome.rounds)")
        #expect(outcome.bytesExchanged < 32 * 1024, "bytes: \(outcome.bytesExchanged)")
        let same = try StateBisection.compare(StateDigests(objects), with: StateDigests(objects))
        #expect(same.isEmpty && same.rounds == 1)
        // An empty device against a zone of 3,000 objects: all of them, only there.
        let few = Array(objects.prefix(3_000))
        let empty = try StateBisection.compare(StateDigests([]), with: StateDigests(few), limit: 10_000)
        #expect(Set(empty.onlyThere) == Set(few.map(\.id)) && empty.differing.isEmpty && empty.onlyHere.isEmpty)
        // A limit lists the lowest IDs and says more may differ.
        let limited = try StateBisection.compare(StateDigests([]), with: StateDigests(few), limit: 10)
        #expect(limited.truncated && limited.onlyThere.count == 10)
    }

    @Test("An answer that does not fit the question is refused: wrong counts, wrong kinds, objects outside the ranges asked")
    func refusesBadAnswers() throws {
        let objects = (1...500).map { ObjectFingerprint(id: ObjectID(rawValue: UInt128($0) << 100), fingerprint: Fingerprint(high: 0, low: UInt64($0))) }
        var bisection = StateBisection(local: StateDigests(objects))
        let requests = bisection.nextRequests()
        guard case .digests(let ranges)? = requests.first, requests.count == 1 else {
            Issue.record("the first round is not one question for digests: \(requests)")
            return
        }
        #expect(ranges.count == 1)
        #expect(throws: StoreError.self) { try bisection.receive([.digests([])]) }
        #expect(throws: StoreError.self) { try bisection.receive([.objects([])]) }
        #expect(throws: StoreError.self) { try bisection.receive([]) }
        // A leaf answered with an object outside it: the root differs, then only the first of
        // its pieces; the other side names an object of the last piece.
        let local = StateDigests(objects)
        var leaf = StateBisection(local: local)
        _ = leaf.nextRequests()
        try leaf.receive([.digests([DigestSum(count: 500, high: 1, low: 1)])])
        guard case .digests(let pieces)? = leaf.nextRequests().first, pieces.count > 2 else {
            Issue.record("a range of 500 objects whose digest differs is not cut into pieces")
            return
        }
        try leaf.receive([.digests(pieces.enumerated().map { $0.offset == 0 ? DigestSum(count: 5, high: 1, low: 1) : local.digest($0.element) })])
        guard case .objects(let leaves)? = leaf.nextRequests().last else {
            Issue.record("a piece of few objects whose digest differs is not compared object by object")
            return
        }
        #expect(leaves == [pieces[0]])
        let outside = try #require(local.ids(in: pieces[pieces.count - 1]).first)
        #expect(throws: StoreError.self) { try leaf.receive([.objects([ObjectFingerprint(id: outside, fingerprint: Fingerprint(high: 1, low: 1))])]) }
    }
}
