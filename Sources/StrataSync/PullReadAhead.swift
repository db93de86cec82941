import StrataCore
import StrataProtocol
import Synchronization

/// The next page of a catch-up, requested while the store applies the current one.
///
/// Downloading a page (the server reading it, the bytes crossing the network) and applying one
/// (decoding, the merge, the log's append) use different resources, so a catch-up of many pages
/// runs at the slower of the two rather than at their sum. Only one page is read ahead, so at
/// most two pages are held at once; and only a page that continues the current one (asked
/// after the token the current page ends at) is read ahead — never a long poll.
///
/// The request is the one the engine would send next, sent early: the answer is used only by
/// the pull that asks for the same token, through the same ``SyncEngine/ask(_:_:)`` as any
/// answer — a refusal is retried or redirected exactly as if it had come then. An answer nobody
/// takes (the apply failed, the sync was cancelled or ran out of time) is cancelled, waited for
/// and dropped: a pull changes nothing on the server, and no request outlives its sync.
///
/// It costs the memory of a second page (``SyncOptions/pullReadAhead`` turns it off where that
/// matters more than the speed, in an app extension).
final class PullReadAhead: Sendable {
    /// The token the page was asked after, for which replica (the server masks the others'
    /// attributes) and with which download mask.
    private let token: String?
    private let replica: ReplicaID
    private let mask: DownloadMask
    private let task: Task<PullResult, any Error>
    private let taken = Atomic<Bool>(false)

    /// Starts the request now. It runs under the caller's time budget (a task inherits the
    /// task-local ``SyncBudget``): a page read ahead never outlives the sync's deadline.
    init(after token: String?, replica: ReplicaID, mask: DownloadMask, _ fetch: @escaping @Sendable () async throws -> PullResult) {
        self.token = token
        self.replica = replica
        self.mask = mask
        task = Task { try await SyncBudget.bounding(fetch) }
    }

    /// Whether this is the request a pull after `token` for `replica` with `mask` would send.
    func continues(after token: String?, replica: ReplicaID, mask: DownloadMask) -> Bool {
        self.token == token && self.replica == replica && self.mask == mask
    }

    /// The page (or what its request threw), the first time it is asked for; `nil` after that,
    /// so that a retry sends the request again. Cancelling the caller cancels the request.
    func take() async throws -> PullResult? {
        guard !taken.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        let task = self.task
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }

    /// Drops the page: its request is cancelled if still in flight, and waited for, so that it
    /// is over when this returns (a transport that does not heed cancellation is waited for to
    /// the end of its request, as the pull itself would have been).
    func drop() async {
        task.cancel()
        _ = try? await task.value
    }
}
