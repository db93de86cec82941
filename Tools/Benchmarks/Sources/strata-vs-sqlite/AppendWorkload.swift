// W1: durable appends. For one configuration (events per commit, committer tasks), each side gets
// a fresh store; the sides then take turns in short rounds, so that drift in the device's sync
// latency (a shared, noisy machine) hits all of them alike.
import BenchSupport
import Foundation

/// What one side did in one configuration.
struct AppendResult {
    var sample = Sample()
    /// Events committed in all, warm-up included (they are on disk too).
    var eventsWritten = 0
    var diskBytes = 0

    var bytesPerEvent: Double { Double(diskBytes) / Double(max(1, eventsWritten)) }
}

/// `writers` tasks each commit `batch` events at a time until `deadline`; every commit is timed
/// from the call until it returns durable.
func appendRound(_ appender: any Appender, batch: Int, writers: Int, until deadline: UInt64,
                 cursor: Int) async throws -> Sample {
    var sample = try await timedTasks(writers, until: deadline) { writer, iteration in
        try await appender.commit(first: cursor &+ writer &* 7919 &+ iteration &* batch &* writers, count: batch)
    }
    sample.events = sample.operations * batch
    return sample
}

/// Runs one configuration on every side: fresh stores, a warm-up each, then `rounds` turns of
/// `roundSeconds` each, side after side; closes the stores and measures their size.
func appendComparison(sides: [(name: String, make: (String) async throws -> any Appender)],
                      batch: Int, writers: Int, rounds: Int, roundSeconds: Double, warmupSeconds: Double,
                      directory: String, keep: Bool) async throws -> [AppendResult] {
    var appenders: [any Appender] = []
    var paths: [String] = []
    for (index, side) in sides.enumerated() {
        let path = directory + "/w1-\(batch)x\(writers)-\(index)"
        paths.append(path)
        appenders.append(try await side.make(path))
    }
    var results = [AppendResult](repeating: AppendResult(), count: sides.count)
    var cursors = [Int](repeating: 0, count: sides.count)
    for (index, appender) in appenders.enumerated() {
        let warm = try await appendRound(appender, batch: batch, writers: writers,
                                         until: monotonicNanos() + UInt64(warmupSeconds * 1e9), cursor: 0)
        results[index].eventsWritten += warm.events
        cursors[index] += warm.events
    }
    for _ in 0..<rounds {
        for (index, appender) in appenders.enumerated() {
            let round = try await appendRound(appender, batch: batch, writers: writers,
                                              until: monotonicNanos() + UInt64(roundSeconds * 1e9), cursor: cursors[index])
            results[index].sample.add(round)
            results[index].eventsWritten += round.events
            cursors[index] += round.events
        }
    }
    for (index, appender) in appenders.enumerated() {
        results[index].diskBytes = try await appender.close()
        if !keep { try? FileManager.default.removeItem(atPath: paths[index]) }
    }
    return results
}
