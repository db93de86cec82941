// Row 6: what a sync of one new transaction costs on a store with a long history, side by side
// with the same on an empty store, alternating, in one run. The push path should read only what
// is unpushed (the store knows where its own transactions are), so the two should cost about
// the same; peak memory during the history store's syncs is compared with its resident memory
// once open and synced.
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog
import StrataSync

struct IncrementalRun {
    var historyEvents = 0
    var emptyNanos: [UInt64] = []
    var historyNanos: [UInt64] = []
    /// Resident memory with the history store open and synced (peak reset there), and the peak
    /// during its measured syncs.
    var openRSS = 0
    var peakRSS = 0
    var pushedPerSync: [Int] = []

    static func median(_ values: [UInt64]) -> UInt64 {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}

/// Resets the process's peak resident memory (VmHWM) to its current resident memory (Linux).
private func resetPeakRSS() {
    guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return }
    handle.write(Data("5".utf8))
    try? handle.close()
}

func incrementalRun(in directory: String, server: ServerProcess, events: Int, transactions: Int, samples: Int) async throws -> IncrementalRun {
    var run = IncrementalRun(historyEvents: events)
    // The history store: `transactions` transactions of `events / transactions` inserts, synced
    // once (not measured), closed and opened again (what an app finds on launch).
    let historyPath = directory + "/history"
    var history = try await openStore(historyPath, .buffered, autoCompaction: .disabled)
    note("incremental: building \(grouped(events)) inserts in \(transactions) transactions…")
    _ = try await insertItems(into: history, events: events, perTransaction: max(1, events / transactions))
    try await history.close()
    history = try await openStore(historyPath, .groupCommit, autoCompaction: .disabled)
    let historyEngine = try SyncEngine(store: history, transport: transport(server), zone: "incremental-history")
    note("incremental: first sync of the history store…")
    _ = try await historyEngine.sync()

    let empty = try await openStore(directory + "/empty", .groupCommit, autoCompaction: .disabled)
    let emptyEngine = try SyncEngine(store: empty, transport: transport(server), zone: "incremental-empty")
    _ = try await emptyEngine.sync()

    let values = itemValues(count: samples * 2 + 2, seed: 6)
    func oneMore(_ store: Store, _ engine: SyncEngine, _ index: Int) async throws -> UInt64 {
        try await store.transaction { tx in _ = try tx.insert("Item", values[index]) }
        let start = monotonicNanos()
        let report = try await engine.sync()
        let nanos = monotonicNanos() - start
        run.pushedPerSync.append(report.pushedTransactions)
        return nanos
    }
    // One warm-up each, then the peak is reset with the history store open and synced.
    _ = try await oneMore(empty, emptyEngine, 0)
    _ = try await oneMore(history, historyEngine, 1)
    run.pushedPerSync = []
    resetPeakRSS()
    run.openRSS = ProcessMemory.current().rss
    note("incremental: \(samples) syncs of one new transaction on each store, alternating…")
    for sample in 0..<samples {
        run.emptyNanos.append(try await oneMore(empty, emptyEngine, 2 + 2 * sample))
        run.historyNanos.append(try await oneMore(history, historyEngine, 3 + 2 * sample))
    }
    run.peakRSS = ProcessMemory.current().peak
    if run.pushedPerSync.contains(where: { $0 != 1 }) {
        throw BenchError("a measured sync pushed \(run.pushedPerSync) transactions, not one each")
    }
    try await history.close()
    try await empty.close()
    return run
}

extension IncrementalRun {
    func addRows(to report: inout Report) {
        let emptyMedian = Self.median(emptyNanos)
        let historyMedian = Self.median(historyNanos)
        let ratio = Double(historyMedian) / Double(max(1, emptyMedian))
        report.add("6a. sync() of one new transaction: a store with \(grouped(historyEvents)) events of history vs an empty store (\(historyNanos.count) each, alternating)",
                   "median \(latency(historyMedian)) vs \(latency(emptyMedian)): \(fixed(ratio, 2))× (history: min \(latency(historyNanos.min() ?? 0)), max \(latency(historyNanos.max() ?? 0)); empty: min \(latency(emptyNanos.min() ?? 0)), max \(latency(emptyNanos.max() ?? 0)))",
                   "≤ 2× the empty store's",
                   verdict(2 / max(ratio, 0.001), goal: 1, unit: "× goal"))
        let growth = Double(peakRSS - openRSS)
        report.add("6b. peak resident memory during those syncs vs the history store open and synced",
                   "\(bytes(Double(peakRSS))) peak vs \(bytes(Double(openRSS))) open: +\(bytes(max(0, growth)))",
                   "≤ +50 MB",
                   growth <= 50 * 1_048_576 ? "PASS" : "**MISS**")
    }
}
