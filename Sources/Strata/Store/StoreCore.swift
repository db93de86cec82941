/// The mutable heart of a store, always used under the store's lock: the identity, the
/// projection, the clock, and the next sequence number of this replica.
final class StoreCore {
    /// The replica this store authors under now (``StoreIdentity/replicaID``; a fork changes it).
    private(set) var replica: ReplicaID
    /// What `store.json` holds; changed only together with it.
    var identity: StoreIdentity {
        didSet { replica = identity.replicaID }
    }
    /// Replaced as a whole when a fork rebuilds it.
    var projection: Projection
    var clock: HybridClock
    var nextSequence: UInt64
    /// Set when a commit could not be made durable: the projection may hold changes the log does
    /// not, so the store refuses everything until it is reopened.
    var failure: StoreError?
    var closed = false
    /// What each sync engine has had acknowledged of the current replica (see `SyncPins`), and
    /// whether compaction keeps what is above it.
    var syncPins = SyncPins()
    var retainsUnpushed = true

    init(identity: StoreIdentity, projection: Projection, clock: HybridClock, nextSequence: UInt64) {
        self.identity = identity
        self.replica = identity.replicaID
        self.projection = projection
        self.clock = clock
        self.nextSequence = nextSequence
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
