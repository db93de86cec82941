// The concurrent load every harness runs: N tasks, each calling an operation back to back until a
// deadline, every call timed from its start until it returns.

/// `tasks` tasks each call `operation(task, iteration)` — iteration 0, 1, 2, … per task — until
/// `deadline` (``monotonicNanos()``), timing every call. The sample holds every latency, the
/// number of calls as its operations and the wall time from the first start to the last end;
/// entries and events are the caller's to fill in.
public func timedTasks(_ tasks: Int, until deadline: UInt64,
                       _ operation: @escaping @Sendable (_ task: Int, _ iteration: Int) async throws -> Void) async throws -> Sample {
    let start = monotonicNanos()
    let perTask = try await withThrowingTaskGroup(of: [UInt64].self) { group in
        for task in 0..<tasks {
            group.addTask {
                var latencies: [UInt64] = []
                latencies.reserveCapacity(4096)
                var iteration = 0
                while true {
                    let t0 = monotonicNanos()
                    if t0 >= deadline { break }
                    try await operation(task, iteration)
                    latencies.append(monotonicNanos() - t0)
                    iteration += 1
                }
                return latencies
            }
        }
        var all: [[UInt64]] = []
        for try await latencies in group { all.append(latencies) }
        return all
    }
    var sample = Sample()
    sample.nanos = monotonicNanos() - start
    for latencies in perTask {
        sample.latencies += latencies
        sample.operations += latencies.count
    }
    return sample
}
