/// Told of every group commit a log makes durable: how many entries one fsync covered and how
/// long the fsync took — what an operator watches to see whether the disk keeps up (a server
/// feeds its metrics from it). Called on the log's writer queue after the sync, so it must be
/// quick and must not call back into the log.
///
/// Options are values (``LogOptions`` is `Hashable`), so an observer compares by identity: two
/// options are equal only when they report to the same observer.
public final class CommitObserver: Sendable, Hashable {
    private let report: @Sendable (_ entries: Int, _ sync: Duration) -> Void

    /// - Parameter report: called with the entries made durable by one fsync and its duration.
    public init(_ report: @escaping @Sendable (_ entries: Int, _ sync: Duration) -> Void) {
        self.report = report
    }

    func committed(entries: Int, sync: Duration) {
        report(entries, sync)
    }

    public static func == (lhs: CommitObserver, rhs: CommitObserver) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
