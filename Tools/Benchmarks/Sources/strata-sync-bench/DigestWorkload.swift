import BenchSupport
import Foundation
import Strata
import StrataCore

/// Row 0b: what a store's state digests cost at the push workload's size. A device's first sync
/// of a large zone ends with a state report (`Store.digest()` of every object), so this cost is
/// part of catch-up (rows 2a/2b); `Store.stateDigests()` is what a remote state bisection
/// (row 2f) computes on each side.
enum DigestWorkload {
    static func run(_ settings: Settings, _ place: DataPlace, _ report: inout Report) async throws {
        let events = settings.events
        note("digest: building a store of \(grouped(events)) inserts…")
        let (store, _) = try await buildStore(at: place.path("digest-source"), events: events, perTransaction: settings.perTransaction)
        // Seconds a call takes, and its result.
        func timed<T>(_ body: () -> T) -> (T, Double) {
            let started = monotonicNanos()
            let result = body()
            return (result, seconds(monotonicNanos() - started))
        }
        var digestSeconds: [Double] = []
        var digest = ""
        for _ in 0..<3 {
            let run = timed { store.digest() }
            digest = run.0
            digestSeconds.append(run.1)
        }
        let (viewDigest, viewSeconds) = timed { store.read { $0.digest() } }
        let (state, stateSeconds) = timed { store.stateDigests() }
        try await store.close()
        if !settings.keep { try? FileManager.default.removeItem(atPath: place.path("digest-source")) }
        guard viewDigest == digest else { throw BenchError("a view's digest differs from the store's") }
        let best = digestSeconds.min() ?? 0
        note("  digest best \(fixed(best, 3)) s, on a view \(fixed(viewSeconds, 3)) s, state digests \(fixed(stateSeconds, 3)) s")
        report.add("0b. the state digests of a store of \(grouped(events)) objects (4 fields each): Store.digest() (the state report's), best of 3; on a view (store.read); Store.stateDigests() (a state bisection's)",
                   "digest \(fixed(best, 3)) s (runs: \(digestSeconds.map { fixed($0, 3) }.joined(separator: ", "))), \(fixed(best * 1e9 / Double(max(1, events)), 0)) ns/object; on a view \(fixed(viewSeconds, 3)) s; stateDigests \(fixed(stateSeconds, 3)) s for \(grouped(state.ids.count)) objects",
                   "— (informational: part of 2a/2b)", "—")
    }
}
