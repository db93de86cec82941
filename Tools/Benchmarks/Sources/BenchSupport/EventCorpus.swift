// The seeded corpus of application events: JSON-ish documents of 100–200 bytes. Field names and
// most values repeat (so LZ4 finds matches), ids, numbers and message words vary (so it is not
// trivially compressible). strata-log-bench and strata-vs-sqlite both draw from it.

public enum EventCorpus {
    /// The default seed: every run, every side, the same bytes.
    public static let seed: UInt64 = 0x5354_5241_5441
    /// The first µs timestamp; each event adds 1–400 µs.
    public static let firstTimestamp: Int64 = 1_732_230_000_000_000

    static let levels = ["debug", "info", "info", "info", "info", "warn", "error"]
    static let services = ["checkout", "search", "auth", "billing", "inventory", "gateway", "notifications", "recommendations"]
    static let events = ["order.created", "order.paid", "cart.updated", "user.login", "user.logout", "search.query",
                         "payment.failed", "item.viewed", "session.start", "cache.miss", "email.sent", "stock.reserved"]
    static let regions = ["eu-west-1", "us-east-1", "us-west-2", "ap-south-1", "sa-east-1"]
    static let words = ["request", "completed", "for", "user", "cart", "item", "payment", "retry", "after", "timeout",
                        "upstream", "cache", "hit", "miss", "queued", "processed", "ok", "failed", "latency", "budget",
                        "shard", "replica", "token", "refresh", "session", "validated", "the", "in", "with", "order"]

    /// `count` events with their µs timestamps, in generation order (all distinct).
    public static func make(count: Int, seed: UInt64 = EventCorpus.seed) -> [(timestamp: Int64, bytes: [UInt8])] {
        var rng = SplitMix64(seed: seed)
        var timestamp = firstTimestamp  // a fixed instant so runs are identical
        var out: [(timestamp: Int64, bytes: [UInt8])] = []
        out.reserveCapacity(count)
        for _ in 0..<count {
            timestamp += Int64(rng.inRange(1...400))
            out.append((timestamp, event(&rng, timestamp: timestamp)))
        }
        return out
    }

    /// One event of exactly 100–200 bytes (uniform), e.g.
    /// `{"ts":1732230000123,"level":"info","svc":"auth","event":"user.login","user_id":48213,…,"msg":"…"}`.
    public static func event(_ rng: inout SplitMix64, timestamp: Int64) -> [UInt8] {
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
