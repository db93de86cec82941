import Synchronization
public import StrataCore

extension Database {
    /// Every zone's committed changes from now on (local and pulled), each tagged with its zone,
    /// and the zones added and removed. Within a zone in commit order; a transaction across zones
    /// arrives as one change set per zone. The stream ends when the database is closed.
    public func changes() -> AsyncStream<DatabaseChange> {
        let (stream, continuation) = AsyncStream<DatabaseChange>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { state -> UInt64? in
            if state.closed { return nil }
            state.nextObserver += 1
            state.observers[state.nextObserver] = continuation
            return state.nextObserver
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    /// The objects of `entity` in every zone (or in `zones`) matching `predicate`, sorted: the
    /// current results at once, then again after every change that alters them (a commit in any
    /// zone, a zone added or removed). Ends when the database is closed.
    public func observe(_ entity: String, where predicate: (@Sendable (ObjectSnapshot) -> Bool)? = nil,
                        sortedBy sort: [SortKey] = [], limit: Int? = nil, in zones: Set<ZoneReference>? = nil) -> AsyncStream<[ObjectSnapshot]> {
        let changes = self.changes()
        let (stream, continuation) = AsyncStream<[ObjectSnapshot]>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let evaluate: @Sendable () -> [ObjectSnapshot]? = { [weak self] in
            guard let self else { return nil }
            // A zone asked for that left the database reads as empty rather than ending the stream.
            let held = zones.map { $0.intersection(self.zones) }
            return try? self.read(in: held) { $0.fetch(entity, where: predicate, sortedBy: sort, limit: limit, in: held) }
        }
        let task = Task {
            var last = evaluate()
            if let last { continuation.yield(last) }
            for await change in changes {
                if let zones, !zones.contains(change.zone) { continue }
                if case .changes(let set) = change.kind, !set.schemaChanged, !set.changes.contains(where: { $0.entity == entity }) { continue }
                let now = evaluate()
                if let now, now != last {
                    last = now
                    continuation.yield(now)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    func deliver(_ change: DatabaseChange) {
        for continuation in state.withLock({ Array($0.observers.values) }) { continuation.yield(change) }
    }

    /// Forwards `store`'s change sets to the database's observers (subscribed before this
    /// returns, so nothing committed afterwards is missed).
    func forwardChanges(of store: Store, zone: ZoneReference) {
        let changes = store.changes()
        let task = Task { [weak self] in
            for await set in changes {
                guard let self else { return }
                self.deliver(DatabaseChange(zone: zone, kind: .changes(set)))
            }
        }
        state.withLock { $0.forwarders[zone] = task }
    }
}
