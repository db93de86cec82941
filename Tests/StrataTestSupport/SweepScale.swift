import Foundation

/// How much of the long randomized sweeps (simulations, property tests) a run does.
///
/// The full sweeps — the seed counts each test names — took the test command's long round 1,404 s
/// on a 2-core machine (418 s at the default scale), past what a test command run before every
/// change can spend. `STRATA_SIM_SCALE` scales
/// them: the default (for the test command and a plain `swift test` alike), 0.2, runs a fifth of each (still hundreds of seeds for the
/// main simulations, each with a fresh random base, so runs over time cover far more); `1` runs
/// the full counts (a release, a change to the merge rule or the protocol). Exact counts, past the
/// scale: `STRATA_SIM_SEEDS` (every simulation at once) and `STRATA_TX_PROPERTY_SEEDS`.
public enum SweepScale {
    /// The scale: `STRATA_SIM_SCALE` when it is a positive number, 0.2 otherwise.
    public static var factor: Double {
        guard let text = ProcessInfo.processInfo.environment["STRATA_SIM_SCALE"],
              let value = Double(text), value > 0, value.isFinite else { return 0.2 }
        // Past a thousand times the full sweeps a run would not end anyway; and no count overflows.
        return min(value, 1_000)
    }

    /// `count` scaled, never under `minimum` (a test whose checks need that many seeds to mean
    /// anything) nor under 1.
    public static func scaled(_ count: Int, minimum: Int = 1) -> Int {
        max(minimum, 1, Int((Double(count) * factor).rounded()))
    }
}
