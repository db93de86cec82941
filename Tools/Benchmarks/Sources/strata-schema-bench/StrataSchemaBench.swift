// strata-schema-bench: what reading through migrations costs (issue 26's upcaster goal: reads of a
// store written by version 1, by an app on version 3, at ≥ 0.8× the speed of plain reads).
//
//   swift run -c release --package-path Tools/Benchmarks strata-schema-bench [--quick]
//
// One log of 100,000 people written by version 1 (`name`, `age` as a string, two more fields),
// opened twice side by side: by version 1 (no migrations anywhere: plain reads) and by version 3
// (`name` renamed `fullName`, `age` changed to an integer: every read of `age` goes through the
// conversion, and half the people were written again by version 3, so reads pick the newer of two
// representations). Each round fetches every person on both, alternated; the medians' ratio is
// the result. The open (replay) of each is timed too: the log is the same, so it should not differ.
import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore

let v1 = Schema {
    Entity("Person", attributes: [
        Attribute("name", .string), Attribute("age", .string), Attribute("city", .string), Attribute("score", .integer),
    ])
}

let v3 = Schema(version: 3, migrations: [
    .renameAttribute("Person", "name", to: "fullName", in: 2),
    .changeType("Person", "age", from: .string, to: .integer, in: 3),
]) {
    Entity("Person", attributes: [
        Attribute("fullName", .string), Attribute("age", .integer), Attribute("city", .string), Attribute("score", .integer),
    ])
}

/// Buffered, and never compacting: every open replays the whole log.
let benchOptions: StoreOptions = {
    var options = StoreOptions(durability: .buffered)
    options.autoCompaction = .disabled
    return options
}()

@main
struct StrataSchemaBench {
    static func main() async {
        await runQuickHarness("strata-schema-bench") { place, quick in try await run(place: place, quick: quick) }
    }

    static func run(place: DataPlace, quick: Bool) async throws {
        let count = quick ? 20_000 : 100_000
        let rounds = quick ? 3 : 9
        var rng = SplitMix64(seed: 26)
        note("writing \(grouped(count)) people with version 1, then half of them again with version 3")
        // Version 1 writes everyone; a copy of its log is then opened by version 3, which rewrites
        // half the ages (its own representation), and that log is what both read.
        let written = place.path("written")
        var store = try await Store.open(at: written, schema: v1, options: benchOptions)
        var ids: [ObjectID] = []
        try await store.transaction { tx in
            for i in 0..<count {
                ids.append(try tx.insert("Person", ["name": .string("person \(i)"), "age": .string(String(rng.next() % 100)),
                                                    "city": .string("city \(rng.next() % 500)"), "score": .integer(Int64(rng.next() % 10_000))]))
            }
        }
        try await store.close()
        store = try await Store.open(at: written, schema: v3, options: benchOptions)
        let rewritten = ids.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        try await store.transaction { tx in
            for id in rewritten { try tx.update(id, ["age": .integer(Int64(rng.next() % 100))]) }
        }
        try await store.close()
        // The same log for both (a copy, so that each has its own directory and lock).
        try FileManager.default.copyItem(atPath: written, toPath: place.path("plain"))
        try FileManager.default.copyItem(atPath: written, toPath: place.path("versioned"))

        var start = monotonicNanos()
        let plain = try await Store.open(at: place.path("plain"), schema: v1, options: benchOptions)
        let plainOpen = monotonicNanos() - start
        start = monotonicNanos()
        let versioned = try await Store.open(at: place.path("versioned"), schema: v3, options: benchOptions)
        let versionedOpen = monotonicNanos() - start

        // Version 1 of a store that holds version 3's migrations reads through them too: the
        // plain side is a store without migrations, read by version 1 before version 3 wrote.
        let baseline = place.path("baseline")
        var baselineStore = try await Store.open(at: baseline, schema: v1, options: benchOptions)
        var rng2 = SplitMix64(seed: 26)
        try await baselineStore.transaction { tx in
            for i in 0..<count {
                _ = try tx.insert("Person", ["name": .string("person \(i)"), "age": .string(String(rng2.next() % 100)),
                                             "city": .string("city \(rng2.next() % 500)"), "score": .integer(Int64(rng2.next() % 10_000))])
            }
        }
        try await baselineStore.close()
        baselineStore = try await Store.open(at: baseline, schema: v1, options: benchOptions)

        var baselineNanos: [UInt64] = [], versionedNanos: [UInt64] = [], oldNanos: [UInt64] = []
        var checksum = 0
        for _ in 0..<rounds {
            start = monotonicNanos()
            let a = baselineStore.fetch("Person")
            baselineNanos.append(monotonicNanos() - start)
            start = monotonicNanos()
            let b = versioned.fetch("Person")
            versionedNanos.append(monotonicNanos() - start)
            start = monotonicNanos()
            let c = plain.fetch("Person")
            oldNanos.append(monotonicNanos() - start)
            guard a.count == count, b.count == count, c.count == count else { throw BenchError("fetched \(a.count), \(b.count), \(c.count) of \(count)") }
            // Every version-3 read is an integer age; every version-1 read a string.
            guard b.allSatisfy({ $0["age"].attributeType == .integer }), c.allSatisfy({ $0["age"].attributeType == .string }) else {
                throw BenchError("an age did not convert")
            }
            checksum &+= b.count &+ c.count
        }
        baselineNanos.sort(); versionedNanos.sort(); oldNanos.sort()
        let base = percentile(baselineNanos, 0.5), newer = percentile(versionedNanos, 0.5), older = percentile(oldNanos, 0.5)
        try await plain.close(); try await versioned.close(); try await baselineStore.close()

        // Replay: the log without migrations opened by version 1, next to the log with them
        // opened by version 3, alternated; events per second of each (the logs differ in length).
        var baselineRates: [Double] = [], versionedRates: [Double] = []
        for _ in 0..<(quick ? 2 : 5) {
            start = monotonicNanos()
            let a = try await Store.open(at: baseline, schema: v1, options: benchOptions)
            baselineRates.append(Double(a.openReport.replayedEvents) / seconds(monotonicNanos() - start))
            try await a.close()
            start = monotonicNanos()
            let b = try await Store.open(at: place.path("versioned"), schema: v3, options: benchOptions)
            versionedRates.append(Double(b.openReport.replayedEvents) / seconds(monotonicNanos() - start))
            try await b.close()
        }
        baselineRates.sort(); versionedRates.sort()
        let baselineRate = baselineRates[baselineRates.count / 2], versionedRate = versionedRates[versionedRates.count / 2]

        print("| row | what | result |")
        print("| --- | --- | --- |")
        print("| 1a | version 1 fetches \(grouped(count)) people of a store without migrations (plain reads), median of \(rounds) | \(latency(base)) |")
        print("| 1b | version 3 fetches them from the log version 1 and version 3 wrote (rename, and `age` from the newer of two representations, converted) | \(latency(newer)) |")
        print("| 1c | version 1 fetches them from that same log (version 3's integer ages converted back) | \(latency(older)) |")
        print("| 1 | read speed through migrations, plain / version 3 (goal ≥ 0.8×) | \(fixed(Double(base) / Double(max(1, newer)), 2))× (version 1 on the same log: \(fixed(Double(base) / Double(max(1, older)), 2))×) |")
        print("| 2a | replay of the log without migrations (version 1's), opened by version 1, median | \(rate(baselineRate)) events/s |")
        print("| 2b | replay of the log with migrations (versions 1 and 3), opened by version 3, median | \(rate(versionedRate)) events/s |")
        print("| 2 | replay through migrations, 2b / 2a (goal ≥ 0.8×) | \(fixed(versionedRate / max(1, baselineRate), 2))× (first opens: version 1 \(latency(plainOpen)), version 3 \(latency(versionedOpen))) |")
        note("checksum \(checksum)")
    }
}
