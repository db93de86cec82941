/// An index an app declares: an entity and one or more of its attributes, under the app's names.
package struct IndexDeclaration: Sendable, Hashable {
    package var entity: String
    package var attributes: [String]

    package init(entity: String, attributes: [String]) {
        self.entity = entity
        self.attributes = attributes
    }
}

/// How a declared index finds its values in this projection's records (names resolve as they are
/// interned, and again when the schema changes).
struct IndexResolution {
    var entityID: UInt32?
    var attributes: [String] = []
    /// Interned attribute names (read straight from the records when the app's names are the
    /// stored ones).
    var keyIDs: [UInt32?] = []
    /// What an object lacking the attribute reads as (the schema's default, or null).
    var defaults: [Value] = []
    /// False when an indexed name is a relationship: a derived to-one reads from other objects,
    /// which an index of this object's values cannot follow. Such an index is never used.
    var usable = true
}

/// A declared index with its entries.
struct ProjectionIndex {
    var declaration: IndexDeclaration
    var storedEntity: String
    var resolution = IndexResolution()
    var entries = SortedIndex()
}

/// Indexes: sorted maps from attribute values to the objects of an entity that hold them, kept in
/// step with the records, so that a filter stated as data (``Filter``) is answered without a scan.
///
/// They are rebuilt from the records on open (not stored in snapshots) and brought up to date at
/// the end of every batch, from the objects the batch touched (``modify`` notes them); a schema
/// change rebuilds them, since defaults and migrations change what objects read as. While a batch
/// is open, the objects it touched are added to every lookup and checked like the rest, so a
/// transaction sees its own changes. An index only proposes candidates: every candidate is checked
/// against the filter, so an index can make a result faster, never different.
extension Projection {
    /// Declares the indexes to keep (replacing any). An open builds them with
    /// `prepareIndexes()` once it has set the schemas (each setting would rebuild them);
    /// otherwise the first read, the end of the next batch or a read view does.
    package func declareIndexes(_ declarations: [IndexDeclaration]) {
        guard indexing else { return }
        indexes = declarations.map { ProjectionIndex(declaration: $0, storedEntity: $0.entity) }
        indexedEntities = []
        indexDirty.removeAll()
        indexesStale = !indexes.isEmpty
    }

    package var indexDeclarations: [IndexDeclaration] { indexes.map(\.declaration) }

    /// Builds the declared indexes now if they wait for a build (an open does this, off the
    /// caller's thread, so that the first read does not pay for it).
    package func prepareIndexes() {
        if indexesStale && !batchOpen { rebuildIndexes() }
    }

    /// The number of entries of each index (for tests and tools).
    package var indexSizes: [Int] { indexes.map(\.entries.count) }

    /// Resolves the names again and rebuilds every index from the records.
    func rebuildIndexes() {
        indexedEntities = []
        indexDirty.removeAll()
        indexesStale = false
        for i in indexes.indices {
            let (stored, resolution) = resolve(indexes[i].declaration)
            indexes[i].storedEntity = stored
            indexes[i].resolution = resolution
            // The old entries go first, so that their storage is freed before the new is built.
            indexes[i].entries = SortedIndex()
            var entries: [SortedIndex.Entry] = []
            if let entityID = resolution.entityID, resolution.usable {
                let ids: [ObjectID]
                switch members.lookup(entityID) {
                case .scan: ids = records.keys { $0.entity == entityID }
                case .ids(let set): ids = Array(set)
                }
                entries.reserveCapacity(ids.count)
                for id in ids {
                    if let key = indexKey(id, resolution) { entries.append(SortedIndex.Entry(key: key, id: id)) }
                }
            }
            indexes[i].entries = SortedIndex(entries: entries)
        }
    }

    private func resolve(_ declaration: IndexDeclaration) -> (String, IndexResolution) {
        let stored = storedEntity(declaration.entity)
        var resolution = IndexResolution()
        resolution.entityID = nameID(stored)
        let entity = schema.entity(stored)
        let appEntity = appSchema?.entity(declaration.entity)
        resolution.attributes = declaration.attributes
        resolution.keyIDs = declaration.attributes.map { nameID($0) }
        resolution.defaults = declaration.attributes.map { entity?.attribute($0)?.defaultValue ?? .null }
        resolution.usable = declaration.attributes.allSatisfy { entity?.relationship($0) == nil && appEntity?.relationship($0) == nil }
        if let id = resolution.entityID { indexedEntities.insert(id) }
        return (stored, resolution)
    }

    /// A name was interned: an index waiting for it (an entity or attribute not seen before)
    /// now finds it. No record holds the name yet, so no entry changes.
    func indexesNoteInterned(_ name: String) {
        for i in indexes.indices where indexes[i].storedEntity == name || indexes[i].declaration.attributes.contains(name) {
            indexes[i].resolution = resolve(indexes[i].declaration).1
        }
    }

    /// The key an object has in an index, or `nil` when it is not one of the index's existing
    /// objects. It reads what a fetched snapshot holds: the visible value, else the default.
    func indexKey(_ id: ObjectID, _ resolution: IndexResolution) -> IndexKey? {
        guard let record = records[id], record.entity == resolution.entityID, exists(record) else { return nil }
        if view != nil {
            // Names or values go through migrations: read what the app reads.
            guard let snapshot = appSnapshot(id) else { return nil }
            return IndexKey(resolution.attributes.map { snapshot[$0] })
        }
        func value(_ position: Int) -> Value {
            if let key = resolution.keyIDs[position], let visible = visibleValue(record, key: key) { return visible.value }
            return resolution.defaults[position]
        }
        var key = IndexKey([value(0)])
        if resolution.keyIDs.count > 1 { key.rest = (1..<resolution.keyIDs.count).map(value) }
        return key
    }

    /// An object of an indexed entity is about to change (called before the change): the first
    /// time in a batch, its keys now are noted, to find its entries when the batch ends.
    func noteIndexed(_ object: ObjectID, existed: Bool) {
        guard !indexesStale, indexDirty[object] == nil else { return }
        indexDirty[object] = indexes.map { index in
            existed && index.resolution.usable ? indexKey(object, index.resolution) : nil
        }
    }

    /// Brings the indexes up to date with the records (the end of a batch, a read view).
    func refreshIndexes() {
        if indexesStale {
            rebuildIndexes()
            return
        }
        guard !indexDirty.isEmpty else { return }
        for i in indexes.indices where indexes[i].resolution.usable && indexes[i].resolution.entityID != nil {
            let resolution = indexes[i].resolution
            for (id, before) in indexDirty {
                let key = indexKey(id, resolution)
                indexes[i].entries.update(id, from: i < before.count ? before[i] : nil, to: key)
            }
        }
        indexDirty.removeAll(keepingCapacity: true)
    }

    // MARK: Planning

    /// The objects of the app's `entity` that may match `filter`, from its indexes; `nil` when no
    /// index narrows it (the caller scans every object). Candidates may not match (they are
    /// checked by the caller) and may no longer exist.
    package func indexCandidates(entity: String, filter: Filter) -> [ObjectID]? {
        guard !indexes.isEmpty else { return nil }
        if indexesStale {
            if batchOpen { return nil }
            rebuildIndexes()
        }
        let usable = indexes.indices.filter { indexes[$0].declaration.entity == entity && indexes[$0].resolution.usable }
        guard !usable.isEmpty, let found = candidates(filter, usable) else { return nil }
        guard batchOpen, !indexDirty.isEmpty, let entityID = indexes[usable[0]].resolution.entityID else { return found }
        // The open batch's changes are not in the indexes yet.
        var all = Set(found)
        for id in indexDirty.keys where records[id]?.entity == entityID { all.insert(id) }
        return Array(all)
    }

    private func candidates(_ filter: Filter, _ usable: [Int]) -> [ObjectID]? {
        switch filter.node {
        case .any(let filters):
            var union = Set<ObjectID>()
            for filter in filters {
                guard let found = candidates(filter, usable) else { return nil }
                union.formUnion(found)
            }
            return Array(union)
        case .all(let filters):
            let conjuncts = Self.flatten(filters)
            if let planned = plan(conjuncts, usable) { return planned }
            // A disjunction among them, each of whose branches an index answers.
            for conjunct in conjuncts {
                if case .any = conjunct.node, let found = candidates(conjunct, usable) { return found }
            }
            return nil
        case .not:
            return nil
        default:
            return plan([filter], usable)
        }
    }

    private static func flatten(_ filters: [Filter]) -> [Filter] {
        filters.flatMap { filter -> [Filter] in
            if case .all(let inner) = filter.node { return flatten(inner) }
            return [filter]
        }
    }

    /// The best index for a conjunction: the one whose leading attributes the most equalities
    /// fix, then a range; `nil` when none fits. `[]` when a condition can match nothing.
    private func plan(_ conjuncts: [Filter], _ usable: [Int]) -> [ObjectID]? {
        var best: (score: Int, ranges: [(lower: [IndexBound], upper: [IndexBound])], index: Int)?
        for i in usable {
            guard let planned = Self.ranges(for: indexes[i].declaration.attributes, conjuncts) else { return [] }
            if planned.score > 0, planned.score > best?.score ?? 0 { best = (planned.score, planned.ranges, i) }
        }
        guard let best else { return nil }
        var found: [ObjectID] = []
        for range in best.ranges {
            indexes[best.index].entries.walk(from: range.lower, to: range.upper) { entry in
                found.append(entry.id)
                return true
            }
        }
        if best.ranges.count > 1 { found = Array(Set(found)) }
        return found
    }

    /// The key ranges of an index over `attributes` that hold every object matching all
    /// `conjuncts`, with a score (2 per attribute fixed by an equality, 1 for a range after
    /// them); `nil` when a condition matches nothing (a comparison with null or NaN).
    private static func ranges(for attributes: [String], _ conjuncts: [Filter]) -> (score: Int, ranges: [(lower: [IndexBound], upper: [IndexBound])])? {
        var ranges: [(lower: [IndexBound], upper: [IndexBound])] = [([], [])]
        var score = 0
        attributes: for attribute in attributes {
            var equals: [Value]?
            var lower: IndexBound?
            var upper: IndexBound?
            for conjunct in conjuncts {
                switch conjunct.node {
                case .equal(let key, let value) where key == attribute:
                    if equals == nil { equals = [value] }
                case .oneOf(let key, let values) where key == attribute:
                    if equals == nil { equals = values }
                case .less(let key, let bound) where key == attribute, .lessOrEqual(let key, let bound) where key == attribute:
                    guard Value.compare(bound, bound) != nil else { return nil }
                    upper = .value(bound)
                    if lower == nil { lower = .kindStart(bound.rank) }
                case .greater(let key, let bound) where key == attribute, .greaterOrEqual(let key, let bound) where key == attribute:
                    guard Value.compare(bound, bound) != nil else { return nil }
                    lower = .value(bound)
                    if upper == nil { upper = .kindEnd(bound.rank) }
                case .between(let key, let low, let high) where key == attribute:
                    guard Value.compare(low, low) != nil, Value.compare(high, high) != nil else { return nil }
                    (lower, upper) = (.value(low), .value(high))
                default:
                    continue
                }
            }
            if let values = equals {
                let matchable = values.filter { Value.same($0, $0) }
                guard !matchable.isEmpty else { return nil }
                guard ranges.count * matchable.count <= 64 else { break attributes }
                ranges = ranges.flatMap { range in
                    matchable.map { (range.lower + [.value($0)], range.upper + [.value($0)]) }
                }
                score += 2
                continue
            }
            if let lower, let upper {
                ranges = ranges.map { ($0.lower + [lower], $0.upper + [upper]) }
                score += 1
            }
            break
        }
        return (score, ranges)
    }

    // MARK: Ordered walks

    /// Walks the existing objects of the app's `entity` in the order of `attribute`, through an
    /// index that leads with it; `false` when there is none (or it cannot be trusted now: a
    /// batch's changes are not in it yet).
    package func walkInOrder(entity: String, attribute: String, reverse: Bool, _ body: (ObjectID, Value) -> Bool) -> Bool {
        guard !indexes.isEmpty else { return false }
        if batchOpen && (indexesStale || !indexDirty.isEmpty) { return false }
        if indexesStale { rebuildIndexes() }
        guard let i = indexes.indices.first(where: {
            indexes[$0].declaration.entity == entity && indexes[$0].declaration.attributes.first == attribute && indexes[$0].resolution.usable
        }) else { return false }
        indexes[i].entries.walk(from: [], to: [], reverse: reverse) { body($0.id, $0.key.first) }
        return true
    }
}
