/// How long ago something happened, as the dashboard and `strata zones status` print it.
public enum ElapsedText {
    /// `milliseconds` as "42 s", "5 min", "3 h" or "2 d".
    public static func age(_ milliseconds: UInt64) -> String {
        let seconds = milliseconds / 1000
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7_200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3_600) h" }
        return "\(seconds / 86_400) d"
    }

    /// The time from `then` to `now` (milliseconds), as ``age(_:)``; a `then` after `now` (a clock
    /// set back) reads as no time.
    public static func since(_ then: UInt64, now: UInt64) -> String { age(now > then ? now - then : 0) }
}
