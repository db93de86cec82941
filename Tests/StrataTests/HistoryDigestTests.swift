import Foundation
import Testing
@testable import StrataCore
import StrataTestSupport

@Suite("History digests")
struct HistoryDigestTests {
    let replica = ReplicaID(rawValue: 0xA11CE)

    private func insert(_ sequence: UInt64, title: String, extra: [String: Value] = [:]) -> Event {
        var fields: [String: Value] = ["title": .string(title), "done": .bool(false), "rank": .integer(Int64(sequence))]
        fields.merge(extra) { _, new in new }
        return Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_000 + sequence, counter: 0),
                     change: .insert(entity: "Task", object: ObjectID(rawValue: UInt128(sequence)), fields: fields))
    }

    private func fingerprints(_ transactions: [TransactionRecord]) throws -> [UInt64: Fingerprint] {
        var result: [UInt64: Fingerprint] = [:]
        for transaction in transactions {
            for pair in try EventCodec.decodeRaw(EventCodec.encode(transaction), position: nil).fingerprints() {
                result[pair.sequence] = pair.fingerprint
            }
        }
        return result
    }

    @Test("An event's fingerprint is the same however its transaction groups and names it, and changes with any value")
    func canonical() throws {
        let events = [insert(5, title: "a"), insert(6, title: "b"), insert(7, title: "c")]
        let together = try fingerprints([TransactionRecord(replica: replica, events: events)])
        let apart = try fingerprints(events.map { TransactionRecord(replica: replica, events: [$0]) })
        #expect(together.count == 3)
        #expect(together == apart)
        // A transaction whose first event names other fields first: the name table is numbered
        // differently, the fingerprints are not.
        let renamed = [
            Event(id: EventID(replica: replica, sequence: 4), hlc: HLC(milliseconds: 1_004, counter: 0),
                  change: .update(entity: "Note", object: ObjectID(rawValue: 99), fields: ["zeta": .integer(1), "rank": .integer(2)])),
        ] + events
        let shifted = try fingerprints([TransactionRecord(replica: replica, events: renamed)])
        #expect(shifted[5] == together[5] && shifted[6] == together[6] && shifted[7] == together[7])
        let changed = try fingerprints([TransactionRecord(replica: replica, events: [insert(5, title: "a", extra: ["done": .bool(true)])])])
        #expect(changed[5] != together[5])
        let restamped = Event(id: events[0].id, hlc: HLC(milliseconds: 2_000, counter: 0), change: events[0].change)
        #expect(try fingerprints([TransactionRecord(replica: replica, events: [restamped])])[5] != together[5])
    }

    @Test("The fingerprint's canonical encoding is the one the event format article documents (pinned)")
    func documentedEncoding() throws {
        let object = ObjectID(rawValue: 0x0102_0304_0506_0708_090A_0B0C_0D0E_0F10)
        let event = Event(id: EventID(replica: replica, sequence: 9), hlc: HLC(rawValue: 0x1234),
                          change: .insert(entity: "Task", object: object, fields: ["title": .string("hi"), "done": .bool(true)]))
        let computed = try fingerprints([TransactionRecord(replica: replica, events: [event])])[9]
        // By the table: version, replica (big-endian), sequence and HLC (little-endian), kind,
        // entity, object, field count, fields in name order ("done" < "title").
        var bytes: [UInt8] = [1]
        bytes += withUnsafeBytes(of: UInt64(0).bigEndian, Array.init) + withUnsafeBytes(of: UInt64(0xA11CE).bigEndian, Array.init)
        bytes += withUnsafeBytes(of: UInt64(9).littleEndian, Array.init) + withUnsafeBytes(of: UInt64(0x1234).littleEndian, Array.init)
        bytes += [1, 4] + Array("Task".utf8)
        bytes += (1...16).map(UInt8.init)
        bytes += [2]
        bytes += [4] + Array("done".utf8) + [5]  // tag boolTrue
        bytes += [5] + Array("title".utf8) + [1, 2] + Array("hi".utf8)  // tag string, length, UTF-8
        #expect(computed == Fingerprint(of: bytes))
        // The format is forever: this value (checked with Python's hashlib) never changes for version 1.
        #expect(computed?.description == "55629822e7c6bfec80a578309f8dc9fd")
    }

    /// Two sides' fingerprints, mostly equal: some changed, some held by one side only.
    private struct Pair {
        var a: [ReplicaID: [UInt64: Fingerprint]] = [:]
        var b: [ReplicaID: [UInt64: Fingerprint]] = [:]

        func digests(_ side: [ReplicaID: [UInt64: Fingerprint]]) -> HistoryDigests {
            HistoryDigests(replicas: side.mapValues { SequenceDigests($0.map { ($0.key, $0.value) }) })
        }

        /// What a full comparison finds: sequences both hold whose fingerprints differ.
        var expected: [EventID] {
            a.flatMap { replica, own in
                own.compactMap { sequence, fingerprint -> EventID? in
                    guard let other = b[replica]?[sequence], other != fingerprint else { return nil }
                    return EventID(replica: replica, sequence: sequence)
                }
            }.sorted()
        }
    }

    private func randomPair(_ rng: inout SeededGenerator) -> Pair {
        var pair = Pair()
        for r in 0..<Int.random(in: 1...4, using: &rng) {
            let replica = ReplicaID(rawValue: UInt128(r + 1) << 64 | UInt128(rng.next() & 0xFFFF))
            var sequence = UInt64.random(in: 0...3, using: &rng)
            var held: [UInt64: Fingerprint] = [:]
            for _ in 0..<Int.random(in: 1...3_000, using: &rng) {
                held[sequence] = Fingerprint(high: rng.next(), low: rng.next())
                sequence += Int.random(in: 0..<20, using: &rng) == 0 ? UInt64.random(in: 2...40, using: &rng) : 1
            }
            var other = held
            let keys = held.keys.sorted()
            // Changed content (a fork, a flipped value), then ranges one side holds without
            // content (a snapshot, an adopted state), then events only one side has.
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                if let key = keys.randomElement(using: &rng) { other[key] = Fingerprint(high: rng.next(), low: rng.next()) }
            }
            var a = held
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                guard let start = keys.randomElement(using: &rng) else { continue }
                let length = UInt64.random(in: 1...200, using: &rng)
                for s in start..<start + length {
                    if Bool.random(using: &rng) { a[s] = nil } else { other[s] = nil }
                }
            }
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                other[sequence + UInt64.random(in: 0...50, using: &rng)] = Fingerprint(high: rng.next(), low: rng.next())
            }
            pair.a[replica] = a
            pair.b[replica] = other
        }
        return pair
    }

    @Test("Bisection finds exactly the events whose content differs, for random histories (seeded)")
    func bisectionEqualsFullComparison() throws {
        for seed in propertySeeds() {
            var rng = SeededGenerator(seed: seed)
            let pair = randomPair(&rng)
            let a = pair.digests(pair.a)
            let b = pair.digests(pair.b)
            let fanOut = [2, 4, 16].randomElement(using: &rng) ?? 16
            let leafSize = [1, 8, 64].randomElement(using: &rng) ?? 64
            let outcome = try DigestBisection.compare(a, with: b, fanOut: fanOut, leafSize: leafSize, limit: 10_000)
            #expect(outcome.differing == pair.expected, "seed \(seed), fan-out \(fanOut), leaf \(leafSize)")
            #expect(!outcome.truncated, "seed \(seed)")
            // Either way round, the same events.
            let reverse = try DigestBisection.compare(b, with: a, fanOut: fanOut, leafSize: leafSize, limit: 10_000)
            #expect(reverse.differing == pair.expected, "seed \(seed), reversed")
            // A limit of one names each replica's earliest differing event.
            let first = try DigestBisection.compare(a, with: b, limit: 1)
            let earliest = Dictionary(grouping: pair.expected, by: \.replica).values.compactMap { $0.min() }.sorted()
            #expect(first.differing == earliest, "seed \(seed), limit 1")
            // (It may say so when the pieces it left hold nothing: it cannot know without asking.)
            if pair.expected.count > earliest.count { #expect(first.truncated, "seed \(seed), limit 1") }
        }
    }

    @Test("One differing event among 200,000 takes a few round trips and a few kilobytes")
    func bisectionIsSmall() throws {
        var rng = SeededGenerator(seed: 7)
        let pairs = (0..<200_000).map { (sequence: UInt64($0 + 1), fingerprint: Fingerprint(high: rng.next(), low: rng.next())) }
        var changed = pairs
        changed[123_457].fingerprint.low ^= 1
        let a = HistoryDigests(replicas: [replica: SequenceDigests(pairs)])
        let b = HistoryDigests(replicas: [replica: SequenceDigests(changed)])
        let outcome = try DigestBisection.compare(a, with: b)
        #expect(outcome.differing == [EventID(replica: replica, sequence: 123_458)])
        #expect(outcome.rounds <= 6, "rounds: \(outcome.rounds)")
        #expect(outcome.bytesExchanged < 4 * 1024, "bytes: \(outcome.bytesExchanged)")
        // Several replicas are bisected side by side: four replicas take no more rounds than one.
        let four = (0..<4).map { ReplicaID(rawValue: UInt128($0 + 1)) }
        let fourA = HistoryDigests(replicas: Dictionary(uniqueKeysWithValues: four.map { ($0, SequenceDigests(pairs)) }))
        let fourB = HistoryDigests(replicas: Dictionary(uniqueKeysWithValues: four.map { ($0, SequenceDigests(changed)) }))
        let parallel = try DigestBisection.compare(fourA, with: fourB)
        #expect(parallel.differing == four.map { EventID(replica: $0, sequence: 123_458) })
        #expect(parallel.rounds == outcome.rounds)
        // Equal sides: one round for the held ranges, one for the root digest.
        let same = try DigestBisection.compare(a, with: a)
        #expect(same.differing.isEmpty && same.rounds == 2)
    }

    @Test("A digest answer that does not fit the question is refused")
    func refusesBadAnswers() throws {
        let a = HistoryDigests(replicas: [replica: SequenceDigests((1...500).map { (UInt64($0), Fingerprint(high: 0, low: UInt64($0))) })])
        var bisection = DigestBisection(local: a, remoteRanges: [replica: [1..<501]])
        let requests = bisection.nextRequests()
        guard case .digests(_, let pieces)? = requests.first, requests.count == 1 else {
            Issue.record("the first round is not one question for digests: \(requests)")
            return
        }
        #expect(pieces.count == 1)
        #expect(throws: StoreError.self) { try bisection.receive([.digests([])]) }
        #expect(throws: StoreError.self) { try bisection.receive([.fingerprints([])]) }
        #expect(throws: StoreError.self) { try bisection.receive([]) }
    }
}
