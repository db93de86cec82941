import Foundation
import StrataCore
import Synchronization

/// One consistent state of every zone of a database (or of the zones asked for), for reads that
/// must agree: taken with every zone's lock held at once (in zone order, as a multi-zone commit
/// takes them), so a transaction across zones is seen whole or not at all.
///
/// An object is read in the zone that holds it. Should two zones both show one (two devices
/// moved it to two zones at once, or a move's source zone is not yet synced), a copy in one of
/// the user's own zones is the object, and otherwise the copy with the newest insert (see the
/// merge rule's "Zones and moves"). A reference into a zone the database does not hold reads as absent.
public final class DatabaseView {
    let views: [(zone: ZoneReference, projection: Projection)]

    init(views: [(zone: ZoneReference, projection: Projection)]) {
        self.views = views
        // References into the other zones of the view read as present.
        for (index, view) in views.enumerated() where views.count > 1 {
            view.projection.elsewhere = { id in Self.entity(of: id, in: views, outsideOf: index) }
            view.projection.sourcesElsewhere = { id, entity, relationship, toMany in
                var sources: [(ObjectID, EventStamp)] = []
                for (other, view) in views.enumerated() where other != index {
                    sources += view.projection.stampedDerivedSources(of: id, sourceEntity: entity, sourceRelationship: relationship, storedIsToMany: toMany)
                }
                return sources
            }
        }
    }

    deinit {
        // The lookups capture the views: cleared, so that the copies go with the view.
        for view in views {
            view.projection.elsewhere = nil
            view.projection.sourcesElsewhere = nil
        }
    }

    /// The entity of `id` in a zone of `views` other than the one at `index`.
    static func entity(of id: ObjectID, in views: [(zone: ZoneReference, projection: Projection)], outsideOf index: Int) -> String? {
        for (other, view) in views.enumerated() where other != index {
            if let record = view.projection.existing(id) { return view.projection.entityName(of: record) }
        }
        return nil
    }

    /// The object with this ID (its to-many relationships included), or `nil` when no zone of
    /// the view holds it.
    public func object(_ id: ObjectID) -> ObjectSnapshot? {
        Self.winner(id, in: views).flatMap { views[$0].projection.appSnapshot(id, includeToMany: true) }
    }

    /// The zone that holds the object, or `nil`.
    public func zone(of id: ObjectID) -> ZoneReference? {
        Self.winner(id, in: views).map { views[$0].zone }
    }

    /// The existing objects of `entity` in every zone (or in `zones`), filtered, sorted by `sort`
    /// then by ID, at most `limit`.
    public func fetch(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil, in zones: Set<ZoneReference>? = nil) -> [ObjectSnapshot] {
        fetchZoned(entity, where: predicate, sortedBy: sort, limit: limit, in: zones, includeToMany: false).map(\.object)
    }

    /// The existing objects of `entity` in every zone (or in `zones`) that match `filter` (each
    /// zone planned on its indexes), sorted by `sort` then by ID, at most `limit`.
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil,
                      in zones: Set<ZoneReference>? = nil) -> [ObjectSnapshot] {
        fetchZoned(entity, where: nil, filter: filter, sortedBy: sort, limit: limit, in: zones, includeToMany: false).map(\.object)
    }

    /// ``fetch(_:where:sortedBy:limit:in:)->[ObjectSnapshot]`` with the zone of each object.
    public func fetchZoned(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                           sortedBy sort: [SortKey] = [], limit: Int? = nil, in zones: Set<ZoneReference>? = nil) -> [(zone: ZoneReference, object: ObjectSnapshot)] {
        fetchZoned(entity, where: predicate, sortedBy: sort, limit: limit, in: zones, includeToMany: false)
    }

    func fetchZoned(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)?, filter: Filter? = nil, sortedBy sort: [SortKey], limit: Int?,
                    in zones: Set<ZoneReference>?, includeToMany: Bool) -> [(zone: ZoneReference, object: ObjectSnapshot)] {
        var results: [(zone: ZoneReference, object: ObjectSnapshot)] = []
        var seen: [ObjectID: Int] = [:]
        for (index, view) in views.enumerated() where zones?.contains(view.zone) ?? true {
            // Each zone's matches; the sort and the limit apply to all of them together.
            let query = Query(entity: entity, predicate: predicate, filter: filter, sort: [], limit: nil, includeToMany: includeToMany)
            for object in query.run(on: view.projection) {
                if let earlier = seen[object.id] {
                    // Held by two zones: the newest insert is the object.
                    if Self.winner(object.id, in: views) == index { results[earlier] = (view.zone, object) }
                    continue
                }
                if views.count > 1, Self.winner(object.id, in: views) != index {
                    // Another zone's copy is the object (it may not match, or be outside `zones`).
                    continue
                }
                seen[object.id] = results.count
                results.append((view.zone, object))
            }
        }
        results.sort { Query.ordered($0.object, $1.object, by: sort) }
        if let limit, results.count > limit { results.removeSubrange(limit...) }
        return results
    }

    /// The number of existing objects of `entity` in every zone (or in `zones`).
    public func count(_ entity: String, in zones: Set<ZoneReference>? = nil) -> Int {
        let asked = views.indices.filter { zones?.contains(views[$0].zone) ?? true }
        if views.count == 1, let only = asked.first {
            // One zone: its own count, without building the objects.
            return views[only].projection.appObjectIDs(of: entity).count
        }
        // Each object once, in the zone whose copy it is.
        var count = 0
        for index in asked {
            for id in views[index].projection.appObjectIDs(of: entity) where Self.winner(id, in: views) == index { count += 1 }
        }
        return count
    }

    /// The objects `id`'s relationship points at, in whatever zone each is; targets in zones the
    /// view does not hold are left out (they read as absent).
    public func related(_ id: ObjectID, _ relationship: String) -> [ObjectSnapshot] {
        guard let index = Self.winner(id, in: views) else { return [] }
        return views[index].projection.appRelated(id, relationship: relationship).compactMap(object)
    }

    /// The object as a model, or `nil`.
    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        guard let snapshot = object(id), snapshot.entity == M.entityName else { return nil }
        return try ModelCoding.model(type, from: snapshot)
    }

    /// The objects of `M`'s entity as models in every zone (or in `zones`), filtered on the
    /// model, sorted by attributes.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: ((M) -> Bool)? = nil, sortedBy sort: [SortKey] = [],
                                      limit: Int? = nil, in zones: Set<ZoneReference>? = nil) throws -> [M] {
        var result: [M] = []
        for (_, snapshot) in fetchZoned(M.entityName, where: nil, sortedBy: sort, limit: nil, in: zones, includeToMany: true) {
            let model = try ModelCoding.model(type, from: snapshot)
            if predicate?(model) ?? true { result.append(model) }
            if let limit, result.count >= limit { break }
        }
        return result
    }

    /// The index (in `views`) of the zone whose copy of `id` is the object: the one that shows
    /// it, or of several, the one with the newest insert (merge order).
    static func winner(_ id: ObjectID, in views: [(zone: ZoneReference, projection: Projection)]) -> Int? {
        var best: (index: Int, stamp: EventStamp)?
        for (index, view) in views.enumerated() {
            guard let record = view.projection.existing(id) else { continue }
            if views.count == 1 { return index }
            let stamp = view.projection.stamp(of: record.inserted)
            // A copy in one of the user's own zones comes first, whatever its stamp.
            if best == nil || Self.precedes((views[index].zone, stamp), (views[best!.index].zone, best!.stamp)) { best = (index, stamp) }
        }
        return best?.index
    }

    /// Which of two copies of an object is the object: one in the user's own zone before one in
    /// another user's (another user cannot take over an own object by inserting its ID into a zone
    /// shared with this user), else the newest insert.
    static func precedes(_ a: (zone: ZoneReference, stamp: EventStamp), _ b: (zone: ZoneReference, stamp: EventStamp)) -> Bool {
        if (a.zone.owner == nil) != (b.zone.owner == nil) { return a.zone.owner == nil }
        return a.stamp > b.stamp
    }
}

@available(*, unavailable, message: "a view is read inside Database.read only")
extension DatabaseView: Sendable {}

extension Database {
    /// Runs `body` with one consistent state of every zone (or of `zones`): the zones' locks
    /// are held only to take the view, never while `body` runs.
    ///
    /// - Throws: what `body` throws; `StoreError` (`unknownZone`) for a zone the database does
    ///   not hold.
    public func read<T>(in zones: Set<ZoneReference>? = nil, _ body: (DatabaseView) throws -> T) throws -> T {
        let stores = try self.stores(zones)
        let views = Self.frozen(stores[...])
        return try body(DatabaseView(views: views))
    }

    /// Copies of the stores' projections, taken with all their locks held at once (nested, in
    /// zone order).
    static func frozen(_ stores: ArraySlice<(zone: ZoneReference, store: Store)>) -> [(zone: ZoneReference, projection: Projection)] {
        guard let first = stores.first else { return [] }
        return first.store.core.withLock { core -> [(zone: ZoneReference, projection: Projection)] in
            let mine = core.projection.frozenCopy()
            return [(first.zone, mine)] + frozen(stores.dropFirst())
        }
    }

    /// The object with this ID in whatever zone holds it, or `nil`.
    public func object(_ id: ObjectID) -> ObjectSnapshot? { (try? read { $0.object(id) }) ?? nil }

    /// The zone that holds the object, or `nil`.
    public func zone(of id: ObjectID) -> ZoneReference? { (try? read { $0.zone(of: id) }) ?? nil }

    /// The existing objects of `entity` in every zone (or in `zones`), filtered, sorted, at most
    /// `limit`.
    ///
    /// - Throws: `StoreError` (`unknownZone`) for a zone the database does not hold.
    public func fetch(_ entity: String, where predicate: (@Sendable (ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil, in zones: Set<ZoneReference>? = nil) throws -> [ObjectSnapshot] {
        try read(in: zones) { $0.fetch(entity, where: predicate, sortedBy: sort, limit: limit, in: zones) }
    }

    /// The existing objects of `entity` in every zone (or in `zones`) that match `filter`, each
    /// zone planned on its indexes (see `StoreOptions.indexes`).
    ///
    /// - Throws: `StoreError` (`unknownZone`) for a zone the database does not hold.
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil,
                      in zones: Set<ZoneReference>? = nil) throws -> [ObjectSnapshot] {
        try read(in: zones) { $0.fetch(entity, matching: filter, sortedBy: sort, limit: limit, in: zones) }
    }

    /// The objects of `M`'s entity as models in every zone (or in `zones`).
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: (@Sendable (M) -> Bool)? = nil, sortedBy sort: [SortKey] = [],
                                      limit: Int? = nil, in zones: Set<ZoneReference>? = nil) throws -> [M] {
        try read(in: zones) { try $0.fetch(type, where: predicate, sortedBy: sort, limit: limit, in: zones) }
    }

    /// The object as a model, or `nil`.
    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        try read { try $0.object(type, id) }
    }
}
