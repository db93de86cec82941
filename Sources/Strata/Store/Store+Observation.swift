extension Store {
    /// The committed changes from now on — local and remote — in commit order, each exactly
    /// once: the equivalent of Core Data's objects-did-change notification. The stream ends when
    /// the store is closed. A change set holds at least one object change, or a schema change
    /// (`ChangeSet.schemaChanged`: another app version's schema arrived by sync).
    public func changes() -> AsyncStream<ChangeSet> {
        let (stream, continuation) = AsyncStream<ChangeSet>.makeStream(bufferingPolicy: .unbounded)
        let id = nextObserver.add(1, ordering: .relaxed).newValue
        observers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    var hasObservers: Bool { !observers.withLock { $0.isEmpty } }

    /// Called by the log in position order, so observers see commits in commit order.
    func deliver(_ changes: ChangeSet) {
        guard !changes.changes.isEmpty || changes.schemaChanged else { return }
        for continuation in observers.withLock({ Array($0.values) }) { continuation.yield(changes) }
    }
}

import Synchronization
public import StrataCore
