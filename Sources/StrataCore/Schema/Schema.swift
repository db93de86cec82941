import Foundation

/// The type of an attribute.
public enum AttributeType: String, Sendable, Hashable, Codable, CaseIterable {
    case string, integer, double, bool, date, bytes, uuid
    /// A file kept outside the log, by reference (``Asset``).
    case asset

    /// The value a required attribute without a default reads as in an object written by an app
    /// version that did not know it (see ``Schema/merged(with:)``): `""`, `0`, `0.0`, `false`,
    /// 1970-01-01, empty bytes, the all-zero UUID, ``Asset/empty``.
    public var zeroValue: Value {
        switch self {
        case .string: .string("")
        case .integer: .integer(0)
        case .double: .double(0)
        case .bool: .bool(false)
        case .date: .date(0)
        case .bytes: .bytes(Data())
        case .uuid: .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .asset: .asset(Asset.empty)
        }
    }
}

/// What deleting an object does to the objects related to it.
public enum DeleteRule: String, Sendable, Hashable, Codable {
    /// Related objects stay; their references to the deleted object are cleared.
    case nullify
    /// Related objects are deleted too.
    case cascade
    /// The delete is refused while related objects exist.
    case deny
}

/// A typed attribute of an entity.
public struct Attribute: Sendable, Hashable {
    public var name: String
    public var type: AttributeType
    public var isOptional: Bool
    /// The value an insert gets when it names none (`nil`: null, allowed only when optional),
    /// and the value the attribute reads as in an object that has none: one written by an app
    /// version whose schema did not have the attribute yet (or no longer has it). Reads — fetches,
    /// observed queries, typed models — see it; the object itself is not changed, so its digest
    /// and history stay what its events made them.
    public var defaultValue: Value?
    /// Stored on this device, never pushed by sync (and left out of the projection digest).
    public var isLocalOnly: Bool

    public init(_ name: String, _ type: AttributeType, optional: Bool = true, default defaultValue: Value? = nil, localOnly: Bool = false) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.isLocalOnly = localOnly
    }
}

extension Attribute {
    /// The attribute as merged into a definition of its entity that lacks it: a required one
    /// without a default gets its type's zero value as default (see ``Schema/merged(with:)``).
    package var readableWithout: Attribute {
        guard !isOptional, defaultValue == nil else { return self }
        var copy = self
        copy.defaultValue = type.zeroValue
        return copy
    }
}

/// A to-one or to-many relationship of an entity.
public struct Relationship: Sendable, Hashable {
    public var name: String
    public var destination: String
    public var isToMany: Bool
    /// The relationship on the destination entity that points back, if any.
    public var inverse: String?
    public var deleteRule: DeleteRule
    /// For to-one: whether an insert may leave it empty.
    public var isOptional: Bool

    public init(_ name: String, to destination: String, toMany: Bool = false, inverse: String? = nil,
                deleteRule: DeleteRule = .nullify, optional: Bool = true) {
        self.name = name
        self.destination = destination
        self.isToMany = toMany
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.isOptional = optional
    }
}

/// An entity: a kind of object, with attributes and relationships.
public struct Entity: Sendable, Hashable {
    public var name: String
    public var attributes: [Attribute]
    public var relationships: [Relationship]

    public init(_ name: String, attributes: [Attribute] = [], relationships: [Relationship] = []) {
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
    }

    public func attribute(_ name: String) -> Attribute? { attributes.first { $0.name == name } }
    public func relationship(_ name: String) -> Relationship? { relationships.first { $0.name == name } }
}

/// The shape of a store's data. Recorded in the store's log, so that a store can be read without
/// the app's code.
///
/// ```swift
/// let schema = Schema {
///     Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
///            relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
///     Entity("Note", attributes: [Attribute("title", .string, default: "")],
///            relationships: [Relationship("folder", to: "Folder", inverse: "notes")])
/// }
/// ```
public struct Schema: Sendable, Hashable {
    public var entities: [Entity]

    /// The local-only attributes, by entity name (entities without any left out).
    package var localOnlyAttributes: [String: Set<String>] {
        var result: [String: Set<String>] = [:]
        for entity in entities {
            let names = Set(entity.attributes.filter(\.isLocalOnly).map(\.name))
            if !names.isEmpty { result[entity.name] = names }
        }
        return result
    }
    /// The app's schema version (1 unless migrations lead further): what the server's oldest
    /// supported version is compared with, and which names and types this app reads through.
    public var version: Int
    /// Every step from version 1 to ``version`` that was not purely additive (see
    /// ``SchemaMigration``), in version order. Adding attributes, entities and relationships
    /// needs no step.
    public var migrations: [SchemaMigration]

    public init(entities: [Entity], version: Int = 1, migrations: [SchemaMigration] = []) {
        self.entities = entities
        self.version = version
        self.migrations = migrations
    }

    public init(@SchemaBuilder _ build: () -> [Entity]) { self.init(entities: build()) }

    /// A versioned schema: the entities as version `version` names them, and the steps that led
    /// there.
    public init(version: Int, migrations: [SchemaMigration], @SchemaBuilder _ build: () -> [Entity]) {
        self.init(entities: build(), version: version, migrations: migrations)
    }

    public static let empty = Schema(entities: [])

    public func entity(_ name: String) -> Entity? { entities.first { $0.name == name } }

    /// The union of two schemas: every entity, attribute and relationship of either. Where both
    /// define the same name, `self`'s definition stays, except that an attribute may become
    /// optional and may gain a default. Used for additive schema changes and for schemas
    /// recorded by other replicas.
    ///
    /// An attribute that only one of two definitions of an entity has, required and without a
    /// default, gets its type's ``AttributeType/zeroValue`` as default: the other definition is
    /// another app version's, whose objects lack the attribute and whose inserts cannot name it,
    /// so objects without it read as that value and that version's inserts store it — neither
    /// version's reads nor writes fail for it. (Opening a store with a schema that adds such an
    /// attribute to an entity the store already records is refused instead, see
    /// ``incompatibilities(with:)``: this only happens when two versions meet through sync.)
    ///
    /// The version is the higher of the two, the migrations those of both (each once, in version
    /// order).
    public func merged(with other: Schema) -> Schema {
        var result = self
        result.version = max(version, other.version)
        if !other.migrations.isEmpty {
            var steps = migrations
            var seen = Set(migrations)
            for step in other.migrations where seen.insert(step).inserted { steps.append(step) }
            result.migrations = SchemaLineage.ordered(steps)
        }
        for entity in other.entities {
            guard let index = result.entities.firstIndex(where: { $0.name == entity.name }) else {
                result.entities.append(entity)
                continue
            }
            let own = result.entities[index]
            for attribute in entity.attributes {
                if let existing = result.entities[index].attributes.firstIndex(where: { $0.name == attribute.name }) {
                    if attribute.isOptional { result.entities[index].attributes[existing].isOptional = true }
                    if result.entities[index].attributes[existing].defaultValue == nil, let value = attribute.defaultValue,
                       value.attributeType == result.entities[index].attributes[existing].type {
                        result.entities[index].attributes[existing].defaultValue = value
                    }
                } else {
                    result.entities[index].attributes.append(attribute.readableWithout)
                }
            }
            for (position, attribute) in own.attributes.enumerated() where entity.attribute(attribute.name) == nil {
                result.entities[index].attributes[position] = attribute.readableWithout
            }
            for relationship in entity.relationships where result.entities[index].relationship(relationship.name) == nil {
                result.entities[index].relationships.append(relationship)
            }
        }
        return result
    }

    /// The ways `newer` is not an additive change of `self`: a type changed, an attribute turned
    /// from optional to required without a default, a relationship changed its shape.
    public func incompatibilities(with newer: Schema) -> [String] {
        var problems: [String] = []
        for entity in newer.entities {
            guard let old = self.entity(entity.name) else { continue }
            for attribute in entity.attributes {
                guard let existing = old.attribute(attribute.name) else {
                    if !attribute.isOptional && attribute.defaultValue == nil {
                        problems.append("\(entity.name).\(attribute.name): a new attribute must be optional or have a default")
                    }
                    continue
                }
                if existing.type != attribute.type {
                    problems.append("\(entity.name).\(attribute.name): type changed from \(existing.type) to \(attribute.type)")
                }
                if existing.isLocalOnly != attribute.isLocalOnly {
                    problems.append("\(entity.name).\(attribute.name): local-only changed")
                }
            }
            for relationship in entity.relationships {
                guard let existing = old.relationship(relationship.name) else { continue }
                if existing.destination != relationship.destination || existing.isToMany != relationship.isToMany || existing.inverse != relationship.inverse {
                    problems.append("\(entity.name).\(relationship.name): relationship changed shape")
                }
            }
        }
        return problems
    }

    /// Checks names, destinations and inverses; returns the problems found.
    public func problems() -> [String] {
        var problems: [String] = migrationProblems()
        var seen = Set<String>()
        for entity in entities {
            if entity.name.isEmpty { problems.append("an entity has an empty name") }
            if !seen.insert(entity.name).inserted { problems.append("entity \(entity.name) is defined twice") }
            var keys = Set<String>()
            for key in entity.attributes.map(\.name) + entity.relationships.map(\.name) where !keys.insert(key).inserted {
                problems.append("\(entity.name).\(key) is defined twice")
            }
            for attribute in entity.attributes {
                if let value = attribute.defaultValue, value != .null, value.attributeType != attribute.type {
                    problems.append("\(entity.name).\(attribute.name): default \(value) is not a \(attribute.type)")
                }
            }
            for relationship in entity.relationships {
                guard let destination = self.entity(relationship.destination) else {
                    problems.append("\(entity.name).\(relationship.name): unknown destination \(relationship.destination)")
                    continue
                }
                if let inverse = relationship.inverse {
                    guard let back = destination.relationship(inverse) else {
                        problems.append("\(entity.name).\(relationship.name): inverse \(destination.name).\(inverse) does not exist")
                        continue
                    }
                    if back.destination != entity.name || back.inverse != relationship.name {
                        problems.append("\(entity.name).\(relationship.name): inverse \(destination.name).\(inverse) does not point back")
                    }
                }
            }
        }
        return problems
    }
}

/// Builds a ``Schema`` from a list of entities.
@resultBuilder
public enum SchemaBuilder {
    public static func buildArray(_ groups: [[Entity]]) -> [Entity] { groups.flatMap { $0 } }
    public static func buildExpression(_ entity: Entity) -> [Entity] { [entity] }
    public static func buildBlock(_ groups: [Entity]...) -> [Entity] { groups.flatMap { $0 } }
    public static func buildOptional(_ group: [Entity]?) -> [Entity] { group ?? [] }
    public static func buildEither(first: [Entity]) -> [Entity] { first }
    public static func buildEither(second: [Entity]) -> [Entity] { second }
}
