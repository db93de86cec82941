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
struct Query {
    var entity: String
    var predicate: ((ObjectSnapshot) -> Bool)?
    var sort: [SortKey]
    var limit: Int?
    /// Whether the snapshots hold the to-many relationships too (typed models read them).
    var includeToMany = false

    func run(on projection: Projection) -> [ObjectSnapshot] {
        var results: [ObjectSnapshot] = []
        for id in projection.appObjectIDs(of: entity) {
            guard let snapshot = projection.appSnapshot(id, includeToMany: includeToMany) else { continue }
            if let predicate, !predicate(snapshot) { continue }
            results.append(snapshot)
        }
        results.sort { Query.ordered($0, $1, by: sort) }
        if let limit, results.count > limit { results.removeSubrange(limit...) }
        return results
    }

    /// Whether `a` comes before `b` under `sort`, then by ID (a fetch's order, also across a
    /// database's zones).
    static func ordered(_ a: ObjectSnapshot, _ b: ObjectSnapshot, by sort: [SortKey]) -> Bool {
        for key in sort {
            let x = a[key.key]
            let y = b[key.key]
            if x == y { continue }
            return key.ascending ? Value.ordered(x, y) : Value.ordered(y, x)
        }
        return a.id < b.id
    }
}
