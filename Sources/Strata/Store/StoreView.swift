import Synchronization
public import StrataCore

/// One consistent state of a store, for several reads that must agree with each other: every
/// read through a view sees the same committed state, whatever commits or sync apply meanwhile.
///
/// ```swift
/// let (folders, notes) = store.read { view in
///     (view.fetch("Folder"), view.fetch("Note", where: { $0["pinned"] == true }))
/// }
/// ```
///
/// A view is taken under the store's lock in O(1) and read outside it, so the closure — filters
/// included — never holds up a commit or a remote apply. The price is paid by a commit that lands
/// while a view is alive: it copies the tables it changes (O(objects)). Keep views short-lived;
/// a view is not `Sendable` and is valid only inside ``Store/read(_:)``.
public final class StoreView {
    let projection: Projection

    init(projection: Projection) {
        self.projection = projection
    }

    /// The object with this ID (its to-many relationships included), or `nil`.
    public func object(_ id: ObjectID) -> ObjectSnapshot? {
        projection.appSnapshot(id, includeToMany: true)
    }

    /// The existing objects of `entity` that match `predicate`, sorted by `sort` (then by ID), at
    /// most `limit`.
    public func fetch(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        Query(entity: entity, predicate: predicate, sort: sort, limit: limit).run(on: projection)
    }

    /// The existing objects of `entity` that match `filter` (planned on the indexes, see
    /// ``Store/fetch(_:matching:sortedBy:limit:)->[ObjectSnapshot]``), sorted by `sort` (then by ID), at most `limit`.
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        Query(entity: entity, predicate: nil, filter: filter, sort: sort, limit: limit).run(on: projection)
    }

    /// The objects of `M`'s entity that match `filter` (planned on the indexes) as models.
    public func fetch<M: StrataModel>(_ type: M.Type, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) throws -> [M] {
        try Query(entity: M.entityName, predicate: nil, filter: filter, sort: sort, limit: limit, includeToMany: true).run(on: projection)
            .map { try ModelCoding.model(type, from: $0) }
    }

    /// The number of existing objects of `entity`.
    public func count(_ entity: String) -> Int {
        projection.appObjectIDs(of: entity).count
    }

    /// The objects related to `id` through `relationship`, sorted by ID.
    public func related(_ id: ObjectID, _ relationship: String) -> [ObjectSnapshot] {
        projection.appRelated(id, relationship: relationship).compactMap { projection.appSnapshot($0) }
    }

    /// The object with this ID as a model, or `nil`.
    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        guard let snapshot = object(id), snapshot.entity == M.entityName else { return nil }
        return try ModelCoding.model(type, from: snapshot)
    }

    /// The objects of `M`'s entity as models, filtered on the model, sorted by attributes.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: ((M) -> Bool)? = nil,
                                      sortedBy sort: [SortKey] = [], limit: Int? = nil) throws -> [M] {
        var result: [M] = []
        for snapshot in Query(entity: M.entityName, predicate: nil, sort: sort, limit: nil, includeToMany: true).run(on: projection) {
            let model = try ModelCoding.model(type, from: snapshot)
            if predicate?(model) ?? true { result.append(model) }
            if let limit, result.count >= limit { break }
        }
        return result
    }

    /// The canonical digest of the state the view holds (see ``Store/digest()``).
    public func digest() -> String {
        projection.digest()
    }
}

@available(*, unavailable, message: "a view is read inside Store.read only")
extension StoreView: Sendable {}

extension Store {
    /// Runs `body` with a view of the store's current committed state: every read inside sees
    /// that one state. The store's lock is held only to take the view, never while `body` runs.
    public func read<T>(_ body: (StoreView) throws -> T) rethrows -> T {
        let view = StoreView(projection: core.withLock { $0.projection.frozenCopy() })
        return try body(view)
    }
}
