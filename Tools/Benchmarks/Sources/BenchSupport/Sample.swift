// What a workload measured.

/// A number of operations done in a measured time, optionally with a latency per operation.
/// `entries` (log entries, for strata-log-bench) and `events` (store events, for
/// strata-store-bench) count what the operations carried; each harness uses the one it needs.
public struct Sample: Sendable {
    public var operations: Int
    public var entries: Int
    public var events: Int
    public var nanos: UInt64
    public var latencies: [UInt64]

    public init(operations: Int = 0, entries: Int = 0, events: Int = 0, nanos: UInt64 = 0, latencies: [UInt64] = []) {
        self.operations = operations
        self.entries = entries
        self.events = events
        self.nanos = nanos
        self.latencies = latencies
    }

    public var seconds: Double { Double(nanos) / 1e9 }
    public var operationsPerSecond: Double { nanos == 0 ? 0 : Double(operations) / seconds }
    public var entriesPerSecond: Double { nanos == 0 ? 0 : Double(entries) / seconds }
    public var eventsPerSecond: Double { nanos == 0 ? 0 : Double(events) / seconds }

    public mutating func add(_ other: Sample) {
        operations += other.operations
        entries += other.entries
        events += other.events
        nanos += other.nanos
        latencies += other.latencies
    }

    public func sortedLatencies() -> [UInt64] { latencies.sorted() }
}
