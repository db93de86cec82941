// The seeded corpus: JSON-ish application events of 100–200 bytes. Field names and most values
// repeat (so LZ4 finds matches), ids, numbers and message words vary (so it is not trivially
// compressible).
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

    static let levels = ["debug", "info", "info", "info", "info", "warn", "error"]
    static let services = ["checkout", "search", "auth", "billing", "inventory", "gateway", "notifications", "recommendations"]
    static let events = ["order.created", "order.paid", "cart.updated", "user.login", "user.logout", "search.query",
                         "payment.failed", "item.viewed", "session.start", "cache.miss", "email.sent", "stock.reserved"]
    static let regions = ["eu-west-1", "us-east-1", "us-west-2", "ap-south-1", "sa-east-1"]
    static let words = ["request", "completed", "for", "user", "cart", "item", "payment", "retry", "after", "timeout",
                        "upstream", "cache", "hit", "miss", "queued", "processed", "ok", "failed", "latency", "budget",
                        "shard", "replica", "token", "refresh", "session", "validated", "the", "in", "with", "order"]

    init(count: Int, entriesPerRecord: Int, seed: UInt64 = 0x5354_5241_5441) {
        var rng = SplitMix64(seed: seed)
        var timestamp: Int64 = 1_732_230_000_000_000  // µs, a fixed instant so runs are identical
        var entries: [LogEntry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            timestamp += Int64(rng.inRange(1...400))
            entries.append(LogEntry(Corpus.event(&rng, timestamp: timestamp), timestamp: timestamp))
        }
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

    /// One event of exactly 100–200 bytes (uniform), e.g.
    /// `{"ts":1732230000123,"level":"info","svc":"auth","event":"user.login","user_id":48213,…,"msg":"…"}`.
    static func event(_ rng: inout SplitMix64, timestamp: Int64) -> [UInt8] {
        let target = rng.inRange(100...200)
        var s = "{\"ts\":\(timestamp / 1000),\"level\":\"\(rng.pick(levels))\",\"svc\":\"\(rng.pick(services))\",\"event\":\"\(rng.pick(events))\""
        let hex = String(rng.next(), radix: 16)
        let optional = [
            ",\"user_id\":\(rng.below(1_000_000))",
            ",\"req\":\"\(String(repeating: "0", count: 16 - hex.count) + hex)\"",
            ",\"latency_ms\":\(rng.below(rng.below(10) == 0 ? 5000 : 120))",
            ",\"region\":\"\(rng.pick(regions))\"",
            ",\"status\":\(rng.pick([200, 200, 200, 201, 204, 400, 404, 500]))",
        ]
        for field in optional where rng.below(4) != 0 && s.utf8.count + field.utf8.count + 12 <= target {
            s += field
        }
        s += ",\"msg\":\""
        let room = target - s.utf8.count - 2
        var message = ""
        while message.utf8.count < room {
            if !message.isEmpty { message += " " }
            message += rng.below(8) == 0 ? String(rng.below(100_000)) : rng.pick(words)
        }
        var out = Array(s.utf8) + Array(message.utf8.prefix(room))
        out += Array("\"}".utf8)
        precondition((100...200).contains(out.count), "corpus entry of \(out.count) bytes")
        return out
    }
}
