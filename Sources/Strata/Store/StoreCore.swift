import StrataCore
/// The mutable heart of a store, always used under the store's lock: the identity, the
/// projection, the clock, and the next sequence number of this replica.
final class StoreCore {
    // `replica`, `projection`, `clock` and `nextSequence` are read on every event a transaction writes: they
    // are `@exclusivity(unchecked)` as `Projection`'s state is (see there); the store's lock
    // serialises every use of the core.
    /// The replica this store authors under now (`StoreIdentity.replicaID`; a fork changes it).
    @exclusivity(unchecked) private(set) var replica: ReplicaID
    /// What `store.json` holds; changed only together with it.
    var identity: StoreIdentity {
        didSet { replica = identity.replicaID }
    }
    /// Replaced as a whole when a fork rebuilds it (the new one keeps the declared indexes).
    @exclusivity(unchecked) var projection: Projection {
        didSet { projection.declareIndexes(indexes) }
    }
    /// The indexes the app declared (`StoreOptions.indexes`).
    var indexes: [IndexDeclaration] = [] {
        didSet { projection.declareIndexes(indexes) }
    }
    @exclusivity(unchecked) var clock: HybridClock
    @exclusivity(unchecked) var nextSequence: UInt64
    /// Set when a commit could not be made durable: the projection may hold changes the log does
    /// not, so the store refuses everything until it is reopened.
    var failure: StoreError?
    var closed = false
    /// What each sync engine has had acknowledged of the current replica (see `SyncPins`), and
    /// whether compaction keeps what is above it.
    var syncPins = SyncPins()
    /// The download masks its sync engines recorded (see `DownloadMasks`).
    var downloadMasks = DownloadMasks()
    /// Where the current replica's transactions are in the log (for the push path).
    var own: OwnTransactions
    var retainsUnpushed = true
    /// The log past the newest snapshot and the background compaction (see `AutoCompaction`).
    var autoCompaction = AutoCompactionState(policy: .disabled)

    init(identity: StoreIdentity, projection: Projection, clock: HybridClock, nextSequence: UInt64) {
        self.identity = identity
        self.replica = identity.replicaID
        self.own = OwnTransactions(replica: identity.replicaID)
        self.projection = projection
        self.clock = clock
        self.nextSequence = nextSequence
    }
}

/// What the automatic compaction policy looks at, kept under the store's lock: the history past
/// the newest snapshot (what an open replays), and the background compaction, if one runs.
struct AutoCompactionState {
    var policy: AutoCompaction
    /// Events and encoded bytes of the transactions submitted at or after the newest snapshot's
    /// position (replayed on open, counted on every submit, reduced by what a snapshot covers).
    var events = 0
    var bytes = 0
    /// After a failed compaction: the counts it failed at. The next attempt waits until as much
    /// history again has accumulated (not on every commit).
    var failedAt: (events: Int, bytes: Int)?
    /// The background compaction, while one runs.
    var task: Task<Void, Never>?

    /// Whether the history past the snapshot calls for a compaction (running or not).
    func isDue(closed: Bool, failed: Bool) -> Bool {
        guard !closed, !failed, policy.isEnabled else { return false }
        if let failedAt {
            return policy.isExceeded(events: events - failedAt.events, bytes: bytes - failedAt.bytes)
        }
        return policy.isExceeded(events: events, bytes: bytes)
    }

    /// A snapshot now covers the first `events` and `bytes` of what was counted.
    mutating func covered(events: Int, bytes: Int) {
        self.events = max(0, self.events - events)
        self.bytes = max(0, self.bytes - bytes)
        failedAt = nil
    }
}

/// Waits for a commit's durability, which the log reports from its writer queue.
final class DurabilityWaiter: Sendable {
    private enum State {
        case pending
        case done(Result<Void, StoreError>)
        case waiting(CheckedContinuation<Void, any Error>)
    }
    private let state = Mutex<State>(.pending)

    func complete(_ result: Result<Void, StoreError>) {
        let continuation = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            if case .waiting(let c) = s {
                s = .done(result)
                return c
            }
            s = .done(result)
            return nil
        }
        continuation?.resume(with: result.mapError { $0 as any Error })
    }

    func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let done = state.withLock { s -> Result<Void, StoreError>? in
                if case .done(let result) = s { return result }
                s = .waiting(continuation)
                return nil
            }
            if let done { continuation.resume(with: done.mapError { $0 as any Error }) }
        }
    }
}

import Synchronization
