public import Foundation

/// A hybrid-logical-clock timestamp: milliseconds of wall-clock time in the high 48 bits and a
/// logical counter in the low 16, so it orders like a wall clock but never goes backwards and
/// always advances past every timestamp it has seen.
public struct HLC: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = milliseconds << 16 | UInt64(counter)
    }

    /// Milliseconds since 1970.
    public var milliseconds: UInt64 { rawValue >> 16 }
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    public static func < (a: HLC, b: HLC) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        let seconds = Double(milliseconds) / 1000
        return "\(Date(timeIntervalSince1970: seconds).formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)))+\(counter)"
    }
}

/// The total order of events: by HLC, then by replica ID. "Newer" in the merge rule means later
/// in this order.
public struct EventStamp: Hashable, Comparable, Sendable {
    public var hlc: HLC
    public var replica: ReplicaID

    public init(hlc: HLC, replica: ReplicaID) {
        self.hlc = hlc
        self.replica = replica
    }

    public static func < (a: EventStamp, b: EventStamp) -> Bool {
        a.hlc != b.hlc ? a.hlc < b.hlc : a.replica < b.replica
    }
}

/// A replica's hybrid logical clock. Time is injected, so tests and simulations are deterministic.
struct HybridClock: Sendable {
    private(set) var last: HLC
    let now: @Sendable () -> UInt64

    init(last: HLC = HLC(rawValue: 0), now: @escaping @Sendable () -> UInt64 = HybridClock.wallMilliseconds) {
        self.last = last
        self.now = now
    }

    static let wallMilliseconds: @Sendable () -> UInt64 = { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// A timestamp newer than every one issued or observed so far.
    mutating func tick() -> HLC {
        let wall = min(now(), (1 << 48) - 1)
        if wall > last.milliseconds {
            last = HLC(milliseconds: wall, counter: 0)
        } else if last.counter == .max {
            last = HLC(milliseconds: last.milliseconds + 1, counter: 0)
        } else {
            last = HLC(rawValue: last.rawValue + 1)
        }
        return last
    }

    /// Takes in a timestamp seen in a remote event, so that later local edits are newer.
    mutating func observe(_ remote: HLC) {
        if remote > last { last = remote }
    }
}
