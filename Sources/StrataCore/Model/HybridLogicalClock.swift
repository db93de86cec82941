public import Foundation

/// A hybrid-logical-clock timestamp: milliseconds of wall-clock time in the high 48 bits and a
/// logical counter in the low 16, so it orders like a wall clock but never goes backwards and
/// always advances past every timestamp it has seen.
public struct HLC: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The largest representable wall-clock time: 2^48 − 1 ms (the year 10889).
    public static let maxMilliseconds: UInt64 = (1 << 48) - 1

    /// A timestamp of `milliseconds` and `counter`. Milliseconds above ``maxMilliseconds``
    /// saturate to the largest timestamp (never wrap into 1970: a wrapped HLC would make an edit
    /// older than everything); use ``init(exactly:counter:)`` to refuse them instead.
    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = milliseconds > HLC.maxMilliseconds ? .max : milliseconds << 16 | UInt64(counter)
    }

    /// A timestamp of `milliseconds` and `counter`; `nil` when `milliseconds` exceeds
    /// ``maxMilliseconds``.
    public init?(exactly milliseconds: UInt64, counter: UInt16) {
        guard milliseconds <= HLC.maxMilliseconds else { return nil }
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

/// The total order of events: by HLC, then by replica ID, then by sequence. "Newer" in the merge
/// rule means later in this order (the projection applies it to its interned references,
/// `Projection.isNewer(_:than:)`; a test holds the two to the same answers).
public struct EventStamp: Hashable, Comparable, Sendable {
    public var hlc: HLC
    public var replica: ReplicaID
    /// The event's sequence at its replica: it orders two events of one replica with the same
    /// HLC (one transaction's events share their HLC).
    public var sequence: UInt64

    public init(hlc: HLC, replica: ReplicaID, sequence: UInt64 = 0) {
        self.hlc = hlc
        self.replica = replica
        self.sequence = sequence
    }

    public static func < (a: EventStamp, b: EventStamp) -> Bool {
        (a.hlc, a.replica, a.sequence) < (b.hlc, b.replica, b.sequence)
    }
}

/// A replica's hybrid logical clock. Time is injected, so tests and simulations are deterministic.
///
/// Two bounds keep it usable forever: it never wraps (``tick()`` throws
/// ``StoreError/Code/clockOverflow`` rather than pass 2^48 − 1 ms), and one remote timestamp cannot
/// drag it arbitrarily far ahead (``observe(_:)`` takes in at most wall-clock now + `maxLead`). A
/// legacy or hostile event stamped near 2^64 would otherwise push every later local edit to the
/// end of time — and, a tick later, into the overflow. The events keep their own stamps; only the
/// clock that stamps new local edits is bounded.
package struct HybridClock: Sendable {
    package private(set) var last: HLC
    package let now: @Sendable () -> UInt64
    /// How far past wall-clock now an observed timestamp may move the clock, in milliseconds.
    package let maxLead: UInt64

    /// The default `maxLead`: an hour (`StoreOptions.maxClockLead` starts at it).
    package static let defaultMaxLead: UInt64 = 3_600_000

    package init(last: HLC = HLC(rawValue: 0), now: @escaping @Sendable () -> UInt64 = HybridClock.wallMilliseconds,
         maxLead: UInt64 = HybridClock.defaultMaxLead) {
        self.last = last
        self.now = now
        self.maxLead = maxLead
    }

    package static let wallMilliseconds: @Sendable () -> UInt64 = { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// A timestamp newer than every one issued or observed so far.
    ///
    /// - Throws: ``StoreError/Code/clockOverflow`` when that would take it past the largest HLC
    ///   (the clock is left where it was: it never goes backwards, never wraps).
    package mutating func tick() throws -> HLC {
        let wall = min(now(), HLC.maxMilliseconds)
        if wall > last.milliseconds {
            last = HLC(milliseconds: wall, counter: 0)
        } else if last.counter < .max {
            last = HLC(rawValue: last.rawValue + 1)
        } else if last.milliseconds < HLC.maxMilliseconds {
            last = HLC(milliseconds: last.milliseconds + 1, counter: 0)
        } else {
            throw StoreError(.clockOverflow, "the hybrid logical clock is at its largest value (\(last.rawValue)); no newer timestamp exists")
        }
        return last
    }

    /// The largest timestamp ``observe(_:)`` takes in now: wall-clock now + `maxLead`.
    package var observationLimit: HLC {
        let now = now()
        let limit = now > HLC.maxMilliseconds - min(maxLead, HLC.maxMilliseconds) ? HLC.maxMilliseconds : now + maxLead
        return HLC(milliseconds: limit, counter: .max)
    }

    /// Takes in a timestamp seen in a remote event, so that later local edits are newer — up to
    /// ``observationLimit``: a timestamp further ahead moves the clock only that far.
    package mutating func observe(_ remote: HLC) {
        let bounded = min(remote, observationLimit)
        if bounded > last { last = bounded }
    }

    /// Moves the clock to at least `own`, without bound: a replica's own earlier timestamps (or
    /// ones it must stay ahead of) are never undercut, however far ahead they lie.
    package mutating func advance(past own: HLC) {
        if own > last { last = own }
    }
}
