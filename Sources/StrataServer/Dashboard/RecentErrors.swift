import Synchronization

/// The errors this server instance answered lately, for the operator's dashboard: counts by code
/// over the last hour (per minute, so that old ones fall out) and the newest few with where they
/// came from. In memory, per instance: a restart forgets them, and instances sharing a
/// PostgreSQL storage each keep their own.
final class RecentErrors: Sendable {
    struct Entry: Sendable, Hashable {
        /// Milliseconds since 1970, by the server's clock.
        var at: UInt64
        var code: String
        var status: Int
        var method: String
        var path: String
        var user: String?
    }

    private struct State {
        /// Per minute since 1970: counts by code.
        var minutes: [UInt64: [String: Int]] = [:]
        var newest: [Entry] = []
    }

    /// How many of the newest errors are kept.
    static let kept = 50
    private let state = Mutex(State())

    func record(_ entry: Entry) {
        state.withLock { state in
            let minute = entry.at / 60_000
            state.minutes[minute, default: [:]][entry.code, default: 0] += 1
            for old in state.minutes.keys where old + 60 <= minute { state.minutes[old] = nil }
            state.newest.append(entry)
            if state.newest.count > Self.kept { state.newest.removeFirst(state.newest.count - Self.kept) }
        }
    }

    /// Counts by code over the hour before `now`, and the newest errors, newest first.
    func snapshot(now: UInt64) -> (counts: [(code: String, count: Int)], newest: [Entry]) {
        state.withLock { state in
            let minute = now / 60_000
            var counts: [String: Int] = [:]
            for (at, byCode) in state.minutes where at + 60 > minute {
                for (code, count) in byCode { counts[code, default: 0] += count }
            }
            return (counts.map { ($0.key, $0.value) }.sorted { ($0.count, $1.code) > ($1.count, $0.code) }, state.newest.reversed())
        }
    }
}

/// Transactions appended to each zone through this instance lately: the zone's growth on the
/// dashboard (per minute over the last hour; in memory, per instance).
final class ZoneActivity: Sendable {
    private let minutes = Mutex<[ZoneID: [UInt64: Int]]>([:])

    func record(_ zone: ZoneID, transactions: Int, at now: UInt64) {
        guard transactions > 0 else { return }
        minutes.withLock { all in
            let minute = now / 60_000
            all[zone, default: [:]][minute, default: 0] += transactions
            if let kept = all[zone], kept.count > 60 {
                all[zone] = kept.filter { $0.key + 60 > minute }
            }
        }
    }

    /// Transactions appended to each zone in the hour before `now`.
    func lastHour(now: UInt64) -> [ZoneID: Int] {
        minutes.withLock { all in
            let minute = now / 60_000
            return all.mapValues { $0.filter { $0.key + 60 > minute }.values.reduce(0, +) }
        }
    }

    func forget(_ zone: ZoneID) { _ = minutes.withLock { $0.removeValue(forKey: zone) } }
}
