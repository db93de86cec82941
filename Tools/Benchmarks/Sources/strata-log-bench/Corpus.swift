// The seeded corpus (BenchSupport's EventCorpus: JSON-ish application events of 100–200 bytes),
// cut into log records.
import BenchSupport
import StrataLog

struct Corpus: Sendable {
    /// The entries, all distinct, in generation order.
    let entries: [LogEntry]
    /// Records of `entriesPerRecord` consecutive entries, and the payload bytes of each.
    let records: [[LogEntry]]
    let recordPayloadBytes: [Int]
    /// Records of one entry each.
    let singles: [[LogEntry]]

    init(count: Int, entriesPerRecord: Int, seed: UInt64 = EventCorpus.seed) {
        // The same bytes as before the generator moved to BenchSupport (EventCorpus).
        let entries = EventCorpus.make(count: count, seed: seed).map { LogEntry($0.bytes, timestamp: $0.timestamp) }
        self.entries = entries
        var records: [[LogEntry]] = []
        var sizes: [Int] = []
        var at = 0
        while at + entriesPerRecord <= count {
            let record = Array(entries[at..<at + entriesPerRecord])
            records.append(record)
            sizes.append(record.reduce(0) { $0 + $1.payload.count })
            at += entriesPerRecord
        }
        self.records = records
        self.recordPayloadBytes = sizes
        self.singles = entries.map { [$0] }
    }
}
