import Foundation

/// How one app version sees the store once any version of its fleet has declared migrations: its
/// entity and field names mapped to the stored ones (for writes), and each attribute read from
/// every representation the fleet has stored it in (for reads).
///
/// Reading an attribute whose representation changed (a type change, a split, a merge, made by
/// this version or by any other one recorded in the log): of its own field and of the fields
/// related to it by a ``SchemaTransform`` — older ones converted forward, newer ones converted
/// back, through as many steps as it takes — the most recently written wins, by the merge order
/// of the events that wrote them. So a version-1 device that writes `age` as `"42"` and a
/// version-3 device that writes it as `41` later both read the version-3 write, each in its own
/// type. A newest value that does not convert reads as the attribute's default, and nothing
/// stored is changed by a read.
///
/// Writes go to this version's own fields only, so nothing another version wrote is dropped or
/// rewritten: it stays in the log and is pushed on as it is.
package struct SchemaView: Sendable {
    package let version: Int
    private let lineage: SchemaLineage
    /// By stored entity name.
    private var plans: [String: EntityPlan] = [:]
    private var storedEntityNames: [String: String] = [:]
    /// Transforms by each field they touch.
    private var transformsByField: [StoredField: [SchemaTransform]] = [:]

    struct EntityPlan: Sendable {
        var appName: String
        /// The entity as this version writes it: its attributes and relationships under their
        /// stored names, with this version's types, options and defaults.
        var writeEntity: Entity
        var appToStored: [String: String]
        /// Attributes: app name, stored key, and whether other representations exist.
        var attributes: [(app: String, key: String, related: Bool)]
        var relationships: [(app: String, key: String)]
        /// Every stored key this version reads under a name of its own (its fields and the
        /// representations related to them), and that name: not shown again as an unknown field.
        var claimed: [String: String]
        /// For reads, worked out once: fields this version reads under another name than their
        /// stored key (stored key, app name), the attributes read from several representations,
        /// and the stored keys to leave out (claimed, and no name of this version).
        var renamed: [(key: String, app: String)] = []
        var related: [(app: String, key: String)] = []
        var hidden: [String] = []
    }

    /// The view of `app` (the app's schema, under its own names) given the steps `recorded`
    /// holds (the store's merged schema, migrations of every version seen); `nil` when neither
    /// declares a step, where names and stored names are the same and reads need no mapping.
    package init?(app: Schema, recorded: Schema) {
        guard !app.migrations.isEmpty || recorded.migrations.contains(where: { $0.version > app.version }) else { return nil }
        version = app.version
        // This version's own steps up to its version, then the fleet's newer ones: every version
        // works out its own names from its own steps.
        lineage = SchemaLineage(app.migrations.filter { $0.version <= app.version } + recorded.migrations.filter { $0.version > app.version })
        let position = lineage.position(of: app.version)
        for transform in lineage.transforms {
            for field in transform.olds + transform.news { transformsByField[field, default: []].append(transform) }
        }
        let stored = app.stored
        for (entity, storedEntity) in zip(app.entities, stored.entities) {
            // The stored form made from the app's own steps names the same keys as the lineage
            // here: up to this version, the lineage holds exactly those steps.
            var plan = EntityPlan(appName: entity.name, writeEntity: storedEntity, appToStored: [:], attributes: [], relationships: [], claimed: [:])
            for attribute in entity.attributes {
                let field = lineage.origin(entity: entity.name, attribute.name, before: position)
                plan.appToStored[attribute.name] = field.key
                let family = family(of: field)
                plan.attributes.append((attribute.name, field.key, family.count > 1))
                for member in family where plan.claimed[member.key] == nil { plan.claimed[member.key] = attribute.name }
                plan.claimed[field.key] = attribute.name
            }
            for relationship in entity.relationships {
                let field = lineage.origin(entity: entity.name, relationship.name, before: position)
                plan.appToStored[relationship.name] = field.key
                plan.relationships.append((relationship.name, field.key))
                plan.claimed[field.key] = relationship.name
            }
            let appNames = Set(plan.attributes.map(\.app) + plan.relationships.map(\.app))
            plan.renamed = plan.attributes.filter { !$0.related && $0.key != $0.app }.map { ($0.key, $0.app) }
                + plan.relationships.filter { $0.key != $0.app }.map { ($0.key, $0.app) }
            plan.related = plan.attributes.filter(\.related).map { ($0.app, $0.key) }
            plan.hidden = plan.claimed.keys.filter { !appNames.contains($0) }.sorted()
            let storedName = lineage.storedEntity(entity.name, before: position)
            plan.writeEntity.name = storedName
            storedEntityNames[entity.name] = storedName
            plans[storedName] = plan
        }
    }

    /// Every field related to `field` through transforms, itself included.
    private func family(of field: StoredField) -> Set<StoredField> {
        var seen: Set<StoredField> = [field]
        var queue = [field]
        while let next = queue.popLast() {
            for transform in transformsByField[next] ?? [] {
                for other in transform.olds + transform.news where seen.insert(other).inserted { queue.append(other) }
            }
        }
        return seen
    }

    // MARK: Names

    /// The stored name of the entity this version calls `name` (itself when unknown).
    package func storedEntity(_ name: String) -> String { storedEntityNames[name] ?? name }

    /// The name this version gives the stored entity `name`.
    package func appEntity(_ storedName: String) -> String { plans[storedName]?.appName ?? storedName }

    /// The stored key of the field this version calls `name` in the stored entity `entity`.
    package func storedKey(_ name: String, in entity: String) -> String { plans[entity]?.appToStored[name] ?? name }

    /// The entity as this version writes it (stored names), if this version knows it.
    package func writeEntity(_ storedName: String) -> Entity? { plans[storedName]?.writeEntity }

    /// `values` keyed by this version's names, keyed by stored keys.
    package func storedValues(_ values: [String: Value], in entity: String) -> [String: Value] {
        guard let plan = plans[entity] else { return values }
        var result: [String: Value] = [:]
        for (name, value) in values { result[plan.appToStored[name] ?? name] = value }
        return result
    }

    /// The stored keys a change of `keys` (stored) touches, as this version names them: a
    /// change to any representation of an attribute is a change of the attribute.
    package func appKeys(_ keys: Set<String>, in entity: String) -> Set<String> {
        guard let plan = plans[entity] else { return keys }
        return Set(keys.map { plan.claimed[$0] ?? $0 })
    }

    // MARK: Reads

    /// The object as this version reads it: `stored` (the projection's snapshot under stored
    /// names) renamed, with each attribute read from its newest representation.
    /// Changed in place, key by key (most keys are the same under both names): fields this
    /// version has no name for (another version's) stay under their stored keys.
    package func snapshot(_ stored: consuming ObjectSnapshot, record: ObjectRecord, in projection: Projection) -> ObjectSnapshot {
        var snapshot = stored
        guard let plan = plans[snapshot.entity] else { return snapshot }
        // Read before anything moves: each related attribute from its newest representation.
        var readValues: [(String, Value)] = []
        readValues.reserveCapacity(plan.related.count)
        for (app, key) in plan.related {
            let own = snapshot.values[key] ?? .null
            var budget = Self.readBudget
            switch read(StoredField(entity: snapshot.entity, key: key), visited: [], budget: &budget, record: record, projection: projection).state {
            case .value(let value): readValues.append((app, value))
            // Absent everywhere: the default, as the projection gave it for the own field.
            case .absent: readValues.append((app, own))
            // The newest write does not convert: this version's default (the write stays stored).
            case .unconvertible: readValues.append((app, defaultValue(key, plan: plan)))
            }
        }
        // Renames: every value taken out first (two fields may swap names), then put back.
        var moved: [(String, Value?, [ObjectID]?)] = []
        moved.reserveCapacity(plan.renamed.count)
        for (key, app) in plan.renamed {
            moved.append((app, snapshot.values.removeValue(forKey: key), snapshot.toMany.removeValue(forKey: key)))
        }
        for key in plan.hidden {
            snapshot.values.removeValue(forKey: key)
            snapshot.toMany.removeValue(forKey: key)
        }
        for (app, value, members) in moved {
            if let value { snapshot.values[app] = value }
            if let members { snapshot.toMany[app] = members }
        }
        for (app, value) in readValues { snapshot.values[app] = value }
        snapshot.entity = plan.appName
        return snapshot
    }

    /// `values` (the stored fields of an object of the stored entity `entity`, all to be written
    /// by one event: a move to another zone) with each field that has other representations set
    /// to the newest of them, converted: one event stamps them all alike, and the newest-wins
    /// read could no longer tell which was written last — so they must all say the same.
    package func movedValues(_ values: [String: Value], entity: String, record: ObjectRecord, in projection: Projection) -> [String: Value] {
        var result = values
        for key in values.keys {
            let field = StoredField(entity: entity, key: key)
            guard transformsByField[field] != nil else { continue }
            var budget = Self.readBudget
            if case .value(let value) = read(field, visited: [], budget: &budget, record: record, projection: projection).state {
                result[key] = value
            }
        }
        return result
    }

    private func defaultValue(_ key: String, plan: EntityPlan) -> Value {
        guard let attribute = plan.writeEntity.attribute(key) else { return .null }
        return attribute.defaultValue ?? (attribute.isOptional ? .null : attribute.type.zeroValue)
    }

    enum ReadState {
        case absent
        case value(Value)
        case unconvertible
    }

    /// The most transforms one attribute's read goes through. A fleet's real lineage has a few;
    /// a hostile recorded schema could chain or loop them (stored keys with `@` chosen by hand).
    static let readBudget = 64

    /// The newest representation of `field` and its value in `field`'s type, not going back
    /// through a transform already on the path (`visited`: the read came through them).
    private func read(_ field: StoredField, visited: [Int], budget: inout Int, record: ObjectRecord, projection: Projection) -> (state: ReadState, ref: Ref) {
        var best: (state: ReadState, ref: Ref) = (.absent, .none)
        if let id = projection.nameID(field.key), let visible = projection.visibleValue(record, key: id) {
            best = (.value(visible.value), visible.ref)
        }
        for transform in transformsByField[field] ?? [] where !visited.contains(transform.index) {
            guard budget > 0 else { break }
            budget -= 1
            let forward = transform.news.contains(field)
            let path = visited + [transform.index]
            var sources: [(state: ReadState, ref: Ref)] = []
            sources.reserveCapacity(forward ? transform.olds.count : transform.news.count)
            for source in forward ? transform.olds : transform.news {
                sources.append(read(source, visited: path, budget: &budget, record: record, projection: projection))
            }
            var newest = Ref.none
            var present = false
            for source in sources {
                if case .absent = source.state { continue }
                present = true
                if newest.isNone || projection.isNewer(source.ref, than: newest) { newest = source.ref }
            }
            guard present, best.ref.isNone || projection.isNewer(newest, than: best.ref) else { continue }
            // Several fields on the other side (the parts of a split, read from the whole): a part
            // not written since the whole was reads as the whole's part, as the other version
            // reads it — so changing one part keeps the others.
            if sources.count > 1, case .value(let whole) = best.state {
                let parts = forward ? transform.backward([whole]) : transform.forward([whole])
                for i in sources.indices where i < parts.count {
                    let stale: Bool
                    switch sources[i].state {
                    case .absent: stale = true
                    default: stale = projection.isNewer(best.ref, than: sources[i].ref)
                    }
                    if stale, let part = parts[i] { sources[i] = (.value(part), best.ref) }
                }
            }
            var inputs: [Value] = []
            var convertible = true
            for source in sources {
                switch source.state {
                case .absent: inputs.append(.null)
                case .value(let value): inputs.append(value)
                case .unconvertible: convertible = false
                }
            }
            let position = (forward ? transform.news : transform.olds).firstIndex(of: field) ?? 0
            let outputs = convertible ? (forward ? transform.forward(inputs) : transform.backward(inputs)) : []
            if position < outputs.count, let value = outputs[position] {
                best = (.value(value), newest)
            } else {
                best = (.unconvertible, newest)
            }
        }
        return best
    }
}
