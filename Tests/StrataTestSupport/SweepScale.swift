import Foundation

/// How much of the long randomized sweeps (simulations, property tests) a run does.
///
/// The full sweeps — the seed counts each test names — take most of an hour on a 2-core machine,
/// far past what a test command run before every change can spend. `STRATA_SIM_SCALE` scales
/// them: the default (for the test command and a plain `swift test` alike), 0.2, runs a fifth of each (still hundreds of seeds for the
/// main simulations, each with a fresh random base, so runs over time cover far more); `1` runs
/// the full counts (a release, a change to the merge rule or the protocol). An exact count for
/// one test is still its own variable (`STRATA_SIM_SEEDS`, `STRATA_TX_PROPERTY_SEEDS`).
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
