import Foundation

/// Where a field of one schema version is stored: the entity's stored name and the field's stored
/// key — what its events carry.
package struct StoredField: Hashable, Sendable {
    package var entity: String
    package var key: String
}

/// The migration steps of a fleet, read as a history of names and representations.
///
/// Every field has a *stored key* that never changes: the name it had when its representation
/// was born. An attribute of version 1, or one added later without a step, is stored under the
/// first name it had; a rename changes its name in the app and nothing in the log, so every
/// version writes and reads the same field. A step that changes the representation — a type
/// change, a split, a merge — gives the new fields keys of their own (`name@version`), and a
/// ``SchemaTransform`` relating them to the fields they came from. Entities keep the name they
/// were stored under first.
///
/// Stored keys are worked out by walking the steps backwards from a version, so a version knows
/// its keys from its own steps alone, and every version of the fleet works out the same ones.
package struct SchemaLineage: Sendable {
    /// The steps in version order (steps of one version in the order declared).
    package let steps: [SchemaMigration]
    package let transforms: [SchemaTransform]

    /// The most steps a lineage reads (a recorded schema may come from any device: one with more
    /// is read up to there). An app's schema with more is refused (``Schema/problems()``).
    package static let maxSteps = 1000

    package init(_ steps: [SchemaMigration]) {
        self.steps = Array(SchemaLineage.ordered(steps).prefix(Self.maxSteps))
        var transforms: [SchemaTransform] = []
        // Each field is born of at most one step and consumed by at most one: a recorded schema
        // from any device may declare more (two splits of one attribute), which would link the
        // fields in a loop. The later such step is not applied.
        var born: Set<StoredField> = [], consumed: Set<StoredField> = []
        for (index, step) in self.steps.enumerated() {
            guard let transform = SchemaLineage.transform(of: step, at: index, in: self.steps) else { continue }
            let news = Set(transform.news), olds = Set(transform.olds)
            guard news.isDisjoint(with: born), olds.isDisjoint(with: consumed), news.isDisjoint(with: olds),
                  news.count == transform.news.count, olds.count == transform.olds.count else { continue }
            born.formUnion(news)
            consumed.formUnion(olds)
            transforms.append(transform)
        }
        self.transforms = transforms
    }

    /// Steps sorted by version, keeping the declared order within one version.
    package static func ordered(_ steps: [SchemaMigration]) -> [SchemaMigration] {
        steps.enumerated().sorted { ($0.element.version, $0.offset) < ($1.element.version, $1.offset) }.map(\.element)
    }

    /// The number of steps at or below `version`: where a schema of that version stands.
    package func position(of version: Int) -> Int { steps.firstIndex { $0.version > version } ?? steps.count }

    /// The stored name of the entity called `name` after the first `position` steps.
    package func storedEntity(_ name: String, before position: Int) -> String {
        SchemaLineage.storedEntity(name, before: position, in: steps)
    }

    /// Where the field called `name` of the entity called `entity` after the first `position`
    /// steps is stored.
    package func origin(entity: String, _ name: String, before position: Int) -> StoredField {
        SchemaLineage.origin(entity: entity, name, before: position, in: steps)
    }

    private static func storedEntity(_ name: String, before position: Int, in steps: [SchemaMigration]) -> String {
        var entity = name
        for step in steps[..<min(position, steps.count)].reversed() {
            if case .renameEntity(let from, let to) = step.change, to == entity { entity = from }
        }
        return entity
    }

    private static func origin(entity: String, _ name: String, before position: Int, in steps: [SchemaMigration]) -> StoredField {
        var e = entity
        var a = name
        var index = min(position, steps.count)
        while index > 0 {
            index -= 1
            let step = steps[index]
            // A field born at this step is stored under its name here and the step's version.
            func born() -> StoredField { StoredField(entity: storedEntity(e, before: index, in: steps), key: "\(a)@\(step.version)") }
            switch step.change {
            case .renameEntity(let from, let to):
                if e == to { e = from }
            case .renameAttribute(let owner, let from, let to):
                if owner == e && a == to { a = from }
            case .changeType(let owner, let attribute, _, _):
                if owner == e && attribute == a { return born() }
            case .split(let owner, _, let parts, _):
                if owner == e && parts.contains(a) { return born() }
            case .merge(let owner, _, let into, _):
                if owner == e && into == a { return born() }
            case .deprecate(let owner, let attribute):
                // A field of that name after its deprecation is a new one.
                if owner == e && attribute == a { return born() }
            case .unrecognized:
                break
            }
        }
        return StoredField(entity: e, key: a)
    }

    private static func transform(of step: SchemaMigration, at index: Int, in steps: [SchemaMigration]) -> SchemaTransform? {
        func old(_ entity: String, _ name: String) -> StoredField { origin(entity: entity, name, before: index, in: steps) }
        func new(_ entity: String, _ name: String) -> StoredField {
            StoredField(entity: storedEntity(entity, before: index, in: steps), key: "\(name)@\(step.version)")
        }
        switch step.change {
        case .changeType(let entity, let attribute, let from, let to):
            return SchemaTransform(index: index, olds: [old(entity, attribute)], news: [new(entity, attribute)], kind: .convert(from: from, to: to))
        case .split(let entity, let attribute, let parts, let separator):
            return SchemaTransform(index: index, olds: [old(entity, attribute)], news: parts.map { new(entity, $0) }, kind: .split(separator: separator))
        case .merge(let entity, let attributes, let into, let separator):
            return SchemaTransform(index: index, olds: attributes.map { old(entity, $0) }, news: [new(entity, into)], kind: .merge(separator: separator))
        case .renameEntity, .renameAttribute, .deprecate, .unrecognized:
            return nil
        }
    }
}

/// A change of representation between fields of one entity: the older fields `olds` and the
/// newer `news`, and how values go from one side to the other.
package struct SchemaTransform: Sendable {
    package enum Kind: Sendable {
        case convert(from: AttributeType, to: AttributeType)
        case split(separator: String)
        case merge(separator: String)
    }

    /// The step's position in the lineage (identifies the transform).
    package let index: Int
    package let olds: [StoredField]
    package let news: [StoredField]
    package let kind: Kind

    /// The news' values from the olds' (`nil`: a value that does not convert).
    package func forward(_ values: [Value]) -> [Value?] {
        switch kind {
        case .convert(_, let to): [TypeConversion.convert(values[0], to: to)]
        case .split(let separator): SchemaTransform.split(values[0], parts: news.count, separator: separator)
        case .merge(let separator): [SchemaTransform.join(values, separator: separator)]
        }
    }

    /// The olds' values from the news'.
    package func backward(_ values: [Value]) -> [Value?] {
        switch kind {
        case .convert(let from, _): [TypeConversion.convert(values[0], to: from)]
        case .split(let separator): [SchemaTransform.join(values, separator: separator)]
        case .merge(let separator): SchemaTransform.split(values[0], parts: olds.count, separator: separator)
        }
    }

    /// A string in `parts` parts: up to each of the first `parts - 1` separators, then the rest;
    /// missing parts are empty. Null splits into nulls.
    static func split(_ value: Value, parts: Int, separator: String) -> [Value?] {
        if value == .null { return Array(repeating: .null, count: parts) }
        guard case .string(let text) = value else { return Array(repeating: nil, count: parts) }
        var pieces: [String] = []
        var rest = Substring(text)
        while pieces.count < parts - 1, !separator.isEmpty, let range = rest.range(of: separator) {
            pieces.append(String(rest[..<range.lowerBound]))
            rest = rest[range.upperBound...]
        }
        pieces.append(String(rest))
        while pieces.count < parts { pieces.append("") }
        return pieces.map { .string($0) }
    }

    /// Strings joined with `separator`; nulls count as empty, and all nulls join into null.
    static func join(_ values: [Value], separator: String) -> Value? {
        if values.allSatisfy({ $0 == .null }) { return .null }
        var texts: [String] = []
        for value in values {
            switch value {
            case .null: texts.append("")
            case .string(let text): texts.append(text)
            default: return nil
            }
        }
        return .string(texts.joined(separator: separator))
    }
}

extension Schema {
    /// The schema under its stored names (see `SchemaLineage`): what the log records and the
    /// events carry. A schema without migrations is its own stored form.
    public var stored: Schema {
        guard !migrations.isEmpty else { return self }
        let lineage = SchemaLineage(migrations)
        let position = lineage.position(of: version)
        func key(_ entity: String, _ name: String) -> String { lineage.origin(entity: entity, name, before: position).key }
        let entities = self.entities.map { entity in
            Entity(lineage.storedEntity(entity.name, before: position),
                   attributes: entity.attributes.map { attribute in
                       var copy = attribute
                       copy.name = key(entity.name, attribute.name)
                       return copy
                   },
                   relationships: entity.relationships.map { relationship in
                       var copy = relationship
                       copy.name = key(entity.name, relationship.name)
                       copy.destination = lineage.storedEntity(relationship.destination, before: position)
                       copy.inverse = relationship.inverse.map { key(relationship.destination, $0) }
                       return copy
                   })
        }
        return Schema(entities: entities, version: version, migrations: migrations)
    }
}
