import StrataCore
/// A sort key of a fetch: an attribute name and a direction.
public struct SortKey: Sendable, Hashable {
    public var key: String
    public var ascending: Bool

    public init(_ key: String, ascending: Bool = true) {
        self.key = key
        self.ascending = ascending
    }
}

/// A fetch by entity with a filter, a sort and a limit. Ties (and unsorted fetches) are ordered by
/// object ID, so results are deterministic.
///
/// The plan: a `Filter` that an index answers reads only the index's candidates; otherwise a
/// sort with a limit whose first key leads an index walks that index in order and stops once
/// the limit is reached (and the objects tied with the last one are read); otherwise every
/// object of the entity is read. Every object read is checked against the whole filter and the
/// closure, and the final order is always the sort's, so the plan changes only the time.
struct Query {
    var entity: String
    var predicate: ((ObjectSnapshot) -> Bool)?
    var filter: Filter? = nil
    var sort: [SortKey]
    var limit: Int?
    /// Whether the snapshots hold the to-many relationships too (typed models read them).
    var includeToMany = false

    init(entity: String, predicate: ((ObjectSnapshot) -> Bool)?, filter: Filter? = nil, sort: [SortKey], limit: Int?, includeToMany: Bool = false) {
        self.entity = entity
        self.predicate = predicate
        self.filter = filter
        self.sort = sort
        self.limit = limit
        self.includeToMany = includeToMany
    }

    func run(on projection: Projection) -> [ObjectSnapshot] {
        if let limit, limit <= 0 { return [] }
        var results: [ObjectSnapshot] = []
        if let filter, let candidates = projection.indexCandidates(entity: entity, filter: filter) {
            for id in candidates where projection.isRecord(id, of: entity) { consider(id, on: projection, into: &results) }
        } else if let limit, let first = sort.first, walkInOrder(first, limit: limit, on: projection, into: &results) {
            // Read in index order up to the limit (and its ties).
        } else {
            for id in projection.appObjectIDs(of: entity) { consider(id, on: projection, into: &results) }
        }
        results.sort { Query.ordered($0, $1, by: sort) }
        if let limit, results.count > limit { results.removeSubrange(limit...) }
        return results
    }

    private func matches(_ snapshot: ObjectSnapshot) -> Bool {
        if let filter, !filter.matches(snapshot) { return false }
        if let predicate, !predicate(snapshot) { return false }
        return true
    }

    private func consider(_ id: ObjectID, on projection: Projection, into results: inout [ObjectSnapshot]) {
        guard let snapshot = projection.appSnapshot(id, includeToMany: includeToMany), matches(snapshot) else { return }
        results.append(snapshot)
    }

    /// Walks an index led by the first sort key until `limit` objects match and the next one
    /// sorts after the last of them by that key; `false` when no index leads with it.
    private func walkInOrder(_ first: SortKey, limit: Int, on projection: Projection, into results: inout [ObjectSnapshot]) -> Bool {
        var boundary: Value?
        var collected: [ObjectSnapshot] = []
        let walked = projection.walkInOrder(entity: entity, attribute: first.key, reverse: !first.ascending) { id, value in
            if let boundary, Value.precedes(boundary, value) || Value.precedes(value, boundary) { return false }
            guard projection.isRecord(id, of: entity), let snapshot = projection.appSnapshot(id, includeToMany: includeToMany), matches(snapshot) else { return true }
            collected.append(snapshot)
            if boundary == nil, collected.count >= limit { boundary = value }
            return true
        }
        if walked { results = collected }
        return walked
    }

    /// Whether `a` comes before `b` under `sort`, then by ID (a fetch's order, also across a
    /// database's zones). Values compare in the total order indexes keep (`Value` kinds
    /// apart, a number's kind not counting, NaN after every number).
    static func ordered(_ a: ObjectSnapshot, _ b: ObjectSnapshot, by sort: [SortKey]) -> Bool {
        for key in sort {
            let x = a[key.key]
            let y = b[key.key]
            if Value.precedes(x, y) { return key.ascending }
            if Value.precedes(y, x) { return !key.ascending }
        }
        return a.id < b.id
    }
}
