public import Foundation
public import StrataCore

/// Observed queries: a fetch whose result is delivered again whenever a commit changes it.
///
/// Built on ``Store/changes()``: the subscription is registered *before* the first fetch, so a
/// commit that lands in between is either in the first result or delivered afterwards — never
/// missed. Each delivery re-runs the query against the store's current state, so a result is
/// always one the store really held; a commit that touches no object of the entity is not even
/// evaluated, and a result equal to the last one is not delivered again. A slow consumer gets
/// the newest result, not a backlog of old ones. A schema pulled from another app version
/// (`ChangeSet.schemaChanged`) evaluates every query again: objects it did not touch may read
/// differently (an attribute they lack reads as its new default).
extension Store {
    /// The objects of `entity` that match `predicate`, sorted by `sort` (then by ID), at most
    /// `limit`: first the current result, then a new one after each commit — local or pulled by
    /// sync — that changes it. Ends when the store is closed (or the task iterating it is
    /// cancelled).
    ///
    /// ```swift
    /// for await notes in store.observe("Note", sortedBy: [SortKey("title")]) {
    ///     render(notes)
    /// }
    /// ```
    public func observe(_ entity: String, where predicate: (@Sendable (ObjectSnapshot) -> Bool)? = nil,
                        sortedBy sort: [SortKey] = [], limit: Int? = nil) -> AsyncStream<[ObjectSnapshot]> {
        observed(touching: { $0.entity == entity }) { store in
            store.fetch(entity, where: predicate, sortedBy: sort, limit: limit)
        }
    }

    /// The objects of `entity` that match `filter`, sorted by `sort` (then by ID), at most `limit`:
    /// first the current result, then a new one after each commit that changes it. Each
    /// evaluation is planned on the indexes (see ``fetch(_:matching:sortedBy:limit:)->[ObjectSnapshot]``), so an
    /// observed query over a large entity costs an index lookup, not a scan, per commit.
    public func observe(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) -> AsyncStream<[ObjectSnapshot]> {
        observed(touching: { $0.entity == entity }) { store in
            store.fetch(entity, matching: filter, sortedBy: sort, limit: limit)
        }
    }

    /// The objects of `M`'s entity that match `filter` as models: the typed form of
    /// ``observe(_:matching:sortedBy:limit:)->AsyncStream<[ObjectSnapshot]>``, each evaluation planned on the indexes. An object
    /// that does not decode as `M` ends the sequence with the `StoreError`.
    public func observe<M: StrataModel & Equatable>(_ type: M.Type, matching filter: Filter,
                                                    sortedBy sort: [SortKey] = [], limit: Int? = nil) -> AsyncThrowingStream<[M], any Error> {
        observedModels(type) { store in try store.fetch(type, matching: filter, sortedBy: sort, limit: limit) }
    }

    /// One object, delivered again whenever a commit changes it; `nil` while it does not exist
    /// (deleted, or not yet pulled).
    public func observe(_ id: ObjectID) -> AsyncStream<ObjectSnapshot?> {
        observed(touching: { $0.id == id }) { store in store.object(id) }
    }

    /// The objects of `M`'s entity as models, filtered on the model, sorted by attributes: the
    /// typed form of ``observe(_:where:sortedBy:limit:)->AsyncStream<[ObjectSnapshot]>``.
    ///
    /// ```swift
    /// for try await notes in store.observe(Note.self, where: { !$0.done }) {
    ///     render(notes)
    /// }
    /// ```
    ///
    /// Schema changes of other app versions keep it running: their attributes are ignored, and
    /// an attribute an object lacks reads as its default (see `Attribute.defaultValue`). An
    /// object that does not decode as `M` — a stored value of another type than the property's,
    /// or a required property with no value and no default — ends the sequence with a
    /// `StoreError` naming the model, the entity and the object.
    public func observe<M: StrataModel & Equatable>(_ type: M.Type, where predicate: (@Sendable (M) -> Bool)? = nil,
                                                    sortedBy sort: [SortKey] = [], limit: Int? = nil) -> AsyncThrowingStream<[M], any Error> {
        observedModels(type) { store in try store.fetch(type, where: predicate, sortedBy: sort, limit: limit) }
    }

    /// A typed observed query: subscribes first, then fetches; fetches again on commits that touch
    /// `M`'s entity (or change the schema) and delivers results that differ from the last; ends
    /// with the error when a fetch throws (an object that does not decode as `M`).
    private func observedModels<M: StrataModel & Equatable>(_ type: M.Type, fetch: @escaping @Sendable (Store) throws -> [M]) -> AsyncThrowingStream<[M], any Error> {
        let changes = self.changes()
        let (stream, continuation) = AsyncThrowingStream<[M], any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task { [weak self] in
            do {
                // The store only for the time of each fetch: an observer never cancelled must
                // not keep it alive.
                guard let first = try self.map(fetch) else { return continuation.finish() }
                var last = first
                continuation.yield(first)
                for await change in changes where change.schemaChanged || change.changes.contains(where: { $0.entity == M.entityName }) {
                    guard let next = try self.map(fetch) else { break }
                    if next != last {
                        last = next
                        continuation.yield(next)
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The typed form sorted by key paths of the model (see
    /// ``Store/fetch(_:where:sortedBy:limit:)-(_,_,[KeyPathComparator<M>],_)``).
    public func observe<M: StrataModel & Equatable>(_ type: M.Type, where predicate: (@Sendable (M) -> Bool)? = nil,
                                                    sortedBy comparators: [KeyPathComparator<M>], limit: Int? = nil) -> AsyncThrowingStream<[M], any Error> {
        let sorted = observe(type, where: predicate)
        let (stream, continuation) = AsyncThrowingStream<[M], any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                var last: [M]?
                for try await models in sorted {
                    let next = Store.sorted(models, by: comparators, limit: limit)
                    if next != last {
                        last = next
                        continuation.yield(next)
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Subscribes first, then evaluates; re-evaluates on commits that hold a change `touching`
    /// selects, and delivers results that differ from the last one.
    private func observed<R: Equatable & Sendable>(touching: @escaping @Sendable (ObjectChange) -> Bool,
                                                   evaluate: @escaping @Sendable (Store) -> R) -> AsyncStream<R> {
        let changes = self.changes()
        let (stream, continuation) = AsyncStream<R>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // Weak: an observer that is never cancelled must not keep the store alive.
        let task = Task { [weak self] in
            guard let store = self else { return continuation.finish() }
            var last = evaluate(store)
            continuation.yield(last)
            for await change in changes where change.schemaChanged || change.changes.contains(where: touching) {
                guard let store = self else { break }
                let next = evaluate(store)
                if next != last {
                    last = next
                    continuation.yield(next)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
