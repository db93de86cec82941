import Foundation

/// The server's time, in one injectable value: the monotonic time its limits refill by and the
/// wall clock pushed timestamps are checked against. Tests and simulations pass their own so that
/// nothing waits for real time; a server uses ``system``.
///
/// ```swift
/// let clock = ServerClock(wallMilliseconds: { 1_700_000_000_000 })   // a fixed wall clock
/// let server = StrataServerApp(storage: storage, users: users, clock: clock)
/// ```
public struct ServerClock: Sendable {
    /// Monotonic time since any fixed origin: the refills of the rate limit and the
    /// failed-authentication limit (never the wall clock, which may jump).
    public var elapsed: @Sendable () -> Duration
    /// Wall-clock time in milliseconds since 1970: the bound on how far ahead of the server a
    /// pushed timestamp may be.
    public var wallMilliseconds: @Sendable () -> UInt64

    /// A clock with the readings given; each one left out is the system's.
    public init(elapsed: (@Sendable () -> Duration)? = nil, wallMilliseconds: (@Sendable () -> UInt64)? = nil) {
        self.elapsed = elapsed ?? Self.continuousSinceNow()
        self.wallMilliseconds = wallMilliseconds ?? Self.systemWallMilliseconds
    }

    /// The system's clocks: the continuous clock (from when this value was made) and the
    /// system's wall clock.
    public static var system: ServerClock { ServerClock() }

    /// The system's wall clock in milliseconds since 1970 (0 before 1970).
    @Sendable public static func systemWallMilliseconds() -> UInt64 {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }

    /// Monotonic time since this was called, on the continuous clock.
    static func continuousSinceNow() -> @Sendable () -> Duration {
        let clock = ContinuousClock()
        let origin = clock.now
        return { clock.now - origin }
    }
}
