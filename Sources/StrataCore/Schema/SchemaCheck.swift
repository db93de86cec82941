import Foundation

/// One thing `strata schema check` (``Schema/fleetFindings(from:)``) found about shipping a new
/// schema to a fleet that still runs the old one.
public struct SchemaFinding: Sendable, Hashable, Codable {
    public enum Severity: String, Sendable, Hashable, Codable {
        /// Devices on one of the two versions would lose, misread or refuse data.
        case error
        /// Safe, with a cost the app should know of (a lossy conversion).
        case warning
    }

    public var severity: Severity
    /// What it is about: `Entity`, `Entity.attribute`, or `migrations`.
    public var subject: String
    public var message: String

    public init(_ severity: Severity, _ subject: String, _ message: String) {
        (self.severity, self.subject, self.message) = (severity, subject, message)
    }
}

extension Schema {
    /// Problems with the migration steps alone: versions out of range, a type change without
    /// a conversion, a split or merge of too few fields, two fields under one stored key.
    func migrationProblems() -> [String] {
        var problems: [String] = []
        if migrations.count > SchemaLineage.maxSteps {
            problems.append("\(migrations.count) migration steps: at most \(SchemaLineage.maxSteps)")
        }
        for step in migrations {
            if step.version < 2 || step.version > version {
                problems.append("migration \(step.summary): its version must be from 2 to the schema's version \(version)" + (step.version > version ? " (raise Schema.version to \(step.version) or more)" : ""))
            }
            switch step.change {
            case .changeType(_, _, let from, let to):
                if !TypeConversion.exists(from: from, to: to) {
                    problems.append("migration \(step.summary): there is no conversion from \(from) to \(to)")
                }
            case .split(_, _, let parts, let separator):
                if parts.count < 2 || separator.isEmpty { problems.append("migration \(step.summary): a split needs two parts or more and a separator") }
            case .merge(_, let attributes, _, let separator):
                if attributes.count < 2 || separator.isEmpty { problems.append("migration \(step.summary): a merge needs two attributes or more and a separator") }
            default:
                break
            }
        }
        guard !migrations.isEmpty else { return problems }
        // What the steps lead to must be declared: a step renaming to a misspelled name would
        // make the declared one a new, empty field.
        var produced: [(entity: String, name: String, step: String)] = []
        for step in SchemaLineage.ordered(migrations) {
            switch step.change {
            case .renameEntity(let from, let to):
                for i in produced.indices where produced[i].entity == from { produced[i].entity = to }
                produced.append((to, "", step.summary))
            case .renameAttribute(let entity, let from, let to):
                produced.removeAll { $0.entity == entity && $0.name == from }
                produced.append((entity, to, step.summary))
            case .changeType(let entity, let attribute, _, _):
                produced.removeAll { $0.entity == entity && $0.name == attribute }
                produced.append((entity, attribute, step.summary))
            case .split(let entity, let attribute, let parts, _):
                produced.removeAll { $0.entity == entity && $0.name == attribute }
                produced += parts.map { (entity, $0, step.summary) }
            case .merge(let entity, let attributes, let into, _):
                produced.removeAll { $0.entity == entity && attributes.contains($0.name) }
                produced.append((entity, into, step.summary))
            case .deprecate(let entity, let attribute):
                produced.removeAll { $0.entity == entity && $0.name == attribute }
            case .unrecognized:
                break
            }
        }
        for (entityName, name, step) in produced {
            guard let entity = entity(entityName) else {
                problems.append("migration \(step): it leads to entity \(entityName), which the schema does not declare (a misspelling, or a later step missing?)")
                continue
            }
            if !name.isEmpty, entity.attribute(name) == nil, entity.relationship(name) == nil {
                problems.append("migration \(step): it leads to \(entityName).\(name), which the schema does not declare (a misspelling, or a later step missing?)")
            }
        }
        // `@` marks the stored keys of fields born of a migration (`age@3`): a name with one
        // could be taken for such a key.
        for entity in entities {
            for name in entity.attributes.map(\.name) + entity.relationships.map(\.name) where name.contains("@") {
                problems.append("\(entity.name).\(name): a schema with migrations may not name a field with @ (it marks the stored keys of migrated fields)")
            }
        }
        // Two names of this version stored under one key would be one field; two entities under
        // one stored name, one entity.
        let stored = self.stored
        var entityOwner: [String: String] = [:]
        for (entity, storedEntity) in zip(entities, stored.entities) {
            if let other = entityOwner[storedEntity.name] {
                problems.append("entities \(entity.name) and \(other) are both stored as \(storedEntity.name): give one of them another name (an entity renamed away keeps its stored name)")
            }
            entityOwner[storedEntity.name] = entity.name
        }
        for (entity, storedEntity) in zip(entities, stored.entities) {
            let names = entity.attributes.map(\.name) + entity.relationships.map(\.name)
            let keys = storedEntity.attributes.map(\.name) + storedEntity.relationships.map(\.name)
            var owner: [String: String] = [:]
            for (name, key) in zip(names, keys) {
                if let other = owner[key] {
                    problems.append("\(entity.name).\(name) and \(entity.name).\(other) are both stored as \(key): give one of them another name (a field renamed away keeps its stored key)")
                }
                owner[key] = name
            }
        }
        return problems
    }

    /// What shipping `self` (the new version) to a fleet still running `old` would do: errors
    /// where devices on one of the two would lose, misread or refuse data, warnings where a
    /// declared conversion can lose values. Both schemas are under the app's names, as the app
    /// declares them.
    public func fleetFindings(from old: Schema) -> [SchemaFinding] {
        var findings: [SchemaFinding] = []
        func error(_ subject: String, _ message: String) { findings.append(SchemaFinding(.error, subject, message)) }
        func warning(_ subject: String, _ message: String) { findings.append(SchemaFinding(.warning, subject, message)) }

        for problem in problems() { error("schema", "the new schema is not valid: \(problem)") }
        for problem in old.problems() { error("schema", "the old schema is not valid: \(problem)") }
        guard findings.isEmpty else { return findings }

        // The steps: every version works out stored names from its own steps, so the old ones
        // must be kept as they were, and new ones belong to new versions.
        if version < old.version { error("version", "the version goes back from \(old.version) to \(version)") }
        if old.migrations.count > migrations.count || Array(migrations.prefix(old.migrations.count)) != old.migrations {
            error("migrations", "the old version's steps are not kept as they were (in order, unchanged): devices on the old version would store fields under other keys than the new one reads")
        }
        let added = migrations.count >= old.migrations.count ? Array(migrations.dropFirst(old.migrations.count)) : []
        for step in added where step.version <= old.version {
            error("migrations", "\(step.summary): a new step needs a version above the old one's (\(old.version))")
        }

        let oldStored = old.stored
        let newStored = stored
        let lineage = SchemaLineage(migrations)
        // Every step names what it changes as the version before it called it.
        var names: [String: Set<String>] = Dictionary(uniqueKeysWithValues: old.entities.map { ($0.name, Set($0.attributes.map(\.name) + $0.relationships.map(\.name))) })
        var types: [String: AttributeType] = [:]
        for entity in old.entities { for attribute in entity.attributes { types[entity.name + "." + attribute.name] = attribute.type } }
        for step in added {
            func has(_ entity: String, _ name: String) -> Bool {
                guard names[entity]?.contains(name) == true else {
                    error("\(entity).\(name)", "\(step.summary): the version before it has no \(entity).\(name)")
                    return false
                }
                return true
            }
            switch step.change {
            case .renameEntity(let from, let to):
                guard let fields = names[from] else { error(from, "\(step.summary): the version before it has no entity \(from)"); continue }
                if names[to] != nil { error(to, "\(step.summary): \(to) already exists") }
                names[from] = nil
                names[to] = fields
                for (key, type) in types where key.hasPrefix(from + ".") { types[to + key.dropFirst(from.count)] = type }
            case .renameAttribute(let entity, let from, let to):
                guard has(entity, from) else { continue }
                if names[entity]?.contains(to) == true { error("\(entity).\(to)", "\(step.summary): \(entity).\(to) already exists") }
                names[entity]?.remove(from)
                names[entity]?.insert(to)
                types[entity + "." + to] = types[entity + "." + from]
            case .changeType(let entity, let attribute, let from, let to):
                guard has(entity, attribute) else { continue }
                if let known = types[entity + "." + attribute], known != from {
                    error("\(entity).\(attribute)", "\(step.summary): the attribute is of type \(known), not \(from)")
                }
                if TypeConversion.isLossy(from: from, to: to) {
                    warning("\(entity).\(attribute)", "\(step.summary): some \(from) values have no \(to) value; the new version reads those as its default (they stay stored, and the old version keeps reading them)")
                }
                if TypeConversion.isLossy(from: to, to: from) {
                    warning("\(entity).\(attribute)", "\(step.summary): some \(to) values have no \(from) value; the old version reads those as its default")
                }
                types[entity + "." + attribute] = to
            case .split(let entity, let attribute, let parts, let separator):
                guard has(entity, attribute) else { continue }
                warning("\(entity).\(attribute)", "\(step.summary): a value holding the separator \"\(separator)\" in a part does not split back the same; an older version editing one part rewrites the whole from its parts")
                if let known = types[entity + "." + attribute], known != .string { error("\(entity).\(attribute)", "\(step.summary): only a string attribute splits (this one is of type \(known))") }
                names[entity]?.remove(attribute)
                for part in parts { names[entity]?.insert(part); types[entity + "." + part] = .string }
            case .merge(let entity, let attributes, let into, let separator):
                warning("\(entity).\(into)", "\(step.summary): a part holding the separator \"\(separator)\" does not split back the same for older versions")
                for attribute in attributes where has(entity, attribute) {
                    if let known = types[entity + "." + attribute], known != .string { error("\(entity).\(attribute)", "\(step.summary): only string attributes merge (this one is of type \(known))") }
                    names[entity]?.remove(attribute)
                }
                names[entity]?.insert(into)
                types[entity + "." + into] = .string
            case .deprecate(let entity, let attribute):
                if has(entity, attribute) { names[entity]?.remove(attribute) }
            case .unrecognized(let kind):
                error("migrations", "a step of kind \(kind) is not known to this Strata")
            }
        }

        // What the old version stores must still be read by the new one, as a field of its own or
        // through a step.
        let consumed = Set(lineage.transforms.flatMap(\.olds))
        let deprecated = Set(added.compactMap { step -> StoredField? in
            guard case .deprecate(let entity, let attribute) = step.change else { return nil }
            return lineage.origin(entity: entity, attribute, before: lineage.steps.firstIndex(of: step) ?? 0)
        })
        for (entity, storedEntity) in zip(old.entities, oldStored.entities) {
            guard let newEntity = newStored.entity(storedEntity.name) else {
                error(entity.name, "the entity is gone without a migration: the new version would not read the objects the old one writes (rename it with renameEntity, or keep it)")
                continue
            }
            for (attribute, storedAttribute) in zip(entity.attributes, storedEntity.attributes) {
                let field = StoredField(entity: storedEntity.name, key: storedAttribute.name)
                if newEntity.attribute(field.key) == nil && !consumed.contains(field) && !deprecated.contains(field) {
                    error("\(entity.name).\(attribute.name)", "the attribute is gone without a migration: a new name would be a new field, and the old version's values would not be read (declare renameAttribute, or deprecate it)")
                }
            }
            for (relationship, storedRelationship) in zip(entity.relationships, storedEntity.relationships)
            where newEntity.relationship(storedRelationship.name) == nil && !deprecated.contains(StoredField(entity: storedEntity.name, key: storedRelationship.name)) {
                error("\(entity.name).\(relationship.name)", "the relationship is gone without a migration (declare renameAttribute, or deprecate it)")
            }
        }
        // Fields under the same stored key must mean the same on both sides.
        for problem in oldStored.incompatibilities(with: newStored) {
            error("schema", problem + " (declare a migration for a change that is not additive)")
        }
        return findings
    }
}
