public import Foundation
import Synchronization
public import StrataCore

/// A Swift type stored as objects of one entity, through `Codable`.
///
/// ```swift
/// struct Note: StrataModel {
///     static let entityName = "Note"
///     var id: ObjectID
///     var title: String
///     var due: Date?
///     var folder: ObjectID?      // a to-one relationship
///     var tags: [ObjectID] = []  // a to-many relationship: its members (insert and update write them)
/// }
/// try await store.transaction { tx in try tx.insert(Note(id: ObjectID(), title: "Hi")) }
/// let notes = try store.fetch(Note.self)
/// ```
///
/// Properties map to attributes and relationships by name; dates keep microsecond precision.
/// A to-many relationship is an `[ObjectID]` (or a `Set<ObjectID>`): inserting the model adds
/// its members, updating it adds and removes the difference, and reading it back gives the
/// members sorted by ID. A model without a property for a to-many relationship leaves it as is.
public protocol StrataModel: Codable, Sendable, Identifiable where ID == ObjectID {
    static var entityName: String { get }
    /// The entity the model is stored as, declared next to the model so that the schema is
    /// written once: `Schema.init(models:)` collects them. `nil` (the default) for a model
    /// whose entity is declared in a schema of its own.
    static var entity: Entity? { get }
    var id: ObjectID { get }
}

extension StrataModel {
    public static var entity: Entity? { nil }
}

extension Schema {
    /// The schema of these models, each declaring its ``StrataModel/entity``.
    ///
    /// ```swift
    /// struct Note: StrataModel {
    ///     static let entityName = "Note"
    ///     static let entity: Entity? = Entity("Note", attributes: [Attribute("title", .string, default: "")])
    ///     var id: ObjectID
    ///     var title: String
    /// }
    /// let store = try await Store.open(at: path, schema: try Schema(models: Note.self))
    /// ```
    ///
    /// - Throws: `StoreError.Code.invalidSchema` when a model declares no entity, or one
    ///   named other than its ``StrataModel/entityName``.
    public init(models: any StrataModel.Type...) throws {
        try self.init(models: models)
    }

    /// A versioned schema of typed models: their entities under this version's names, and every
    /// migration step since version 1 (see <doc:ShippingAppUpdates>).
    ///
    /// ```swift
    /// let schema = try Schema(version: 2, migrations: [.renameAttribute("Note", "title", to: "heading", in: 2)],
    ///                         models: Note.self)
    /// ```
    public init(version: Int, migrations: [SchemaMigration], models: any StrataModel.Type...) throws {
        try self.init(models: models)
        self.version = version
        self.migrations = migrations
    }

    private init(models: [any StrataModel.Type]) throws {
        var entities: [Entity] = []
        for model in models {
            guard let entity = model.entity else {
                throw StoreError(.invalidSchema, "\(model) declares no entity (static let entity: Entity? = Entity(\"\(model.entityName)\", …))", entity: model.entityName)
            }
            guard entity.name == model.entityName else {
                throw StoreError(.invalidSchema, "\(model)'s entity is named \(entity.name), its entityName \(model.entityName)", entity: model.entityName)
            }
            entities.append(entity)
        }
        self.init(entities: entities)
    }
}

/// Models to values and back, through ``ModelEncoder`` and ``ModelDecoder`` (no JSON between).
enum ModelCoding {
    /// The model's attributes and to-one relationships as values, typed by the schema, and the
    /// members of its to-many relationships.
    static func encode<M: StrataModel>(_ model: M, schema: Schema) throws -> ModelEncoder.Encoded {
        guard let entity = schema.entity(M.entityName) else {
            throw StoreError(.unknownEntity, "no entity \(M.entityName) in the schema", entity: M.entityName, object: model.id)
        }
        return try ModelEncoder(entity: entity, object: model.id).encode(model)
    }

    static func model<M: StrataModel>(_ type: M.Type, from snapshot: ObjectSnapshot) throws -> M {
        do {
            return try M(from: ModelDecoder(snapshot: snapshot, entity: M.entity))
        } catch let error as DecodingError {
            throw StoreError(.encoding, "\(M.self) does not decode: \(error.readableDescription)", entity: snapshot.entity, object: snapshot.id)
        }
    }
}

extension Transaction {
    /// Inserts a model as a new object with its ID, and adds the members of its to-many
    /// relationships.
    ///
    /// Everything is checked before anything is written: a model that is refused (an unknown
    /// property, a wrong type, a member that does not exist or is of another entity) leaves the
    /// transaction as it was.
    ///
    /// - Throws: `StoreError` naming the entity and the property.
    public func insert<M: StrataModel>(_ model: M) throws {
        let encoded = try ModelCoding.encode(model, schema: appSchema)
        let members = encoded.toMany.sorted { $0.key < $1.key }
        for (relationship, targets) in members {
            try checkMembers(targets, of: relationship, entity: M.entityName, object: model.id, inserting: true)
        }
        try insert(M.entityName, id: model.id, encoded.values)
        for (relationship, targets) in members {
            for target in targets { try add(model.id, relationship, target) }
        }
    }

    /// Writes what differs between the model and `original` (the model as the app read it) when
    /// given, else the stored object: the attributes and to-one relationships that changed, and
    /// for each to-many relationship an add of every member the model gained and a remove of
    /// every member it lost — so the relationship ends up holding exactly the model's members.
    /// A one-field edit is a one-field event, on the wire and under the merge rule: another
    /// device's concurrent edit of another field of the object (or of another member) is kept.
    /// Nothing differs, nothing is written.
    ///
    /// Pass `original` when the object may have changed since the app read it (sync applied a
    /// pull meanwhile): compared with the stored object, a field another device changed would
    /// look edited and be written back with the app's stale value, and a member another device
    /// added would be removed.
    ///
    /// - Throws: `StoreError` naming the entity and the property (checked before anything is
    ///   written).
    public func update<M: StrataModel>(_ model: M, from original: M? = nil) throws {
        let encoded = try ModelCoding.encode(model, schema: appSchema)
        let before: [String: Value]
        let membersBefore: [String: [ObjectID]]
        if let original {
            guard original.id == model.id else {
                throw StoreError(.invalidArgument, "the original of \(M.self) \(model.id) is object \(original.id)", entity: M.entityName, object: model.id)
            }
            let encodedOriginal = try ModelCoding.encode(original, schema: appSchema)
            before = encodedOriginal.values
            membersBefore = encodedOriginal.toMany
        } else {
            // A missing object goes through the plain update, which names it.
            guard let current = object(model.id) else { return try update(model.id, encoded.values) }
            before = current.values
            membersBefore = current.toMany
        }
        let changed = encoded.values.filter { key, value in before[key] ?? .null != value }
        var additions: [(String, [ObjectID])] = []
        var removals: [(String, [ObjectID])] = []
        for (relationship, members) in encoded.toMany.sorted(by: { $0.key < $1.key }) {
            let old = membersBefore[relationship] ?? []
            let kept = Set(members)
            let oldSet = Set(old)
            let added = members.filter { !oldSet.contains($0) }
            let removed = old.filter { !kept.contains($0) }
            if !added.isEmpty {
                try checkMembers(added, of: relationship, entity: M.entityName, object: model.id, inserting: false)
                additions.append((relationship, added))
            }
            if !removed.isEmpty { removals.append((relationship, removed)) }
        }
        if !changed.isEmpty { try update(model.id, changed) }
        for (relationship, targets) in removals {
            for target in targets { try remove(model.id, relationship, target) }
        }
        for (relationship, targets) in additions {
            for target in targets { try add(model.id, relationship, target) }
        }
    }

    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        try object(id).map { try ModelCoding.model(type, from: $0) }
    }
}

extension Store {
    /// The object with this ID as a model, or `nil`.
    public func object<M: StrataModel>(_ type: M.Type, _ id: ObjectID) throws -> M? {
        guard let snapshot = object(id), snapshot.entity == M.entityName else { return nil }
        return try ModelCoding.model(type, from: snapshot)
    }

    /// The objects of `M`'s entity as models, filtered on the model, sorted by attributes.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: (@Sendable (M) -> Bool)? = nil,
                                      sortedBy sort: [SortKey] = [], limit: Int? = nil) throws -> [M] {
        // One state for the whole fetch (a commit cannot land between two objects); decoding runs
        // after the lock is released.
        let snapshots = core.withLock { core in
            Query(entity: M.entityName, predicate: nil, sort: sort, limit: nil, includeToMany: true).run(on: core.projection)
        }
        var result: [M] = []
        for snapshot in snapshots {
            let model = try ModelCoding.model(type, from: snapshot)
            if predicate?(model) ?? true { result.append(model) }
            if let limit, result.count >= limit { break }
        }
        return result
    }
}

extension Store {
    /// The objects of `M`'s entity that match `filter` (stated on attribute names, planned on the
    /// indexes, see ``Store/fetch(_:matching:sortedBy:limit:)->[ObjectSnapshot]``) as models.
    public func fetch<M: StrataModel>(_ type: M.Type, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) throws -> [M] {
        let snapshots = core.withLock { core in
            Query(entity: M.entityName, predicate: nil, filter: filter, sort: sort, limit: limit, includeToMany: true).run(on: core.projection)
        }
        return try snapshots.map { try ModelCoding.model(type, from: $0) }
    }
}

extension Store {
    /// The objects of `M`'s entity as models, filtered on the model and sorted by key paths of the
    /// model (`[KeyPathComparator(\Note.title), KeyPathComparator(\Note.due, order: .reverse)]`);
    /// ties keep ID order, so results are deterministic.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: (@Sendable (M) -> Bool)? = nil,
                                      sortedBy comparators: [KeyPathComparator<M>], limit: Int? = nil) throws -> [M] {
        Self.sorted(try fetch(type, where: predicate), by: comparators, limit: limit)
    }

    /// Models sorted by key paths, stably (so the ID order of equal ones stays), cut to `limit`.
    static func sorted<M: StrataModel>(_ models: [M], by comparators: [KeyPathComparator<M>], limit: Int?) -> [M] {
        var sorted = comparators.isEmpty ? models : models.sorted(using: comparators)
        if let limit, sorted.count > limit { sorted.removeSubrange(limit...) }
        return sorted
    }
}

extension StoreView {
    /// The objects of `M`'s entity as models, sorted by key paths of the model.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: ((M) -> Bool)? = nil,
                                      sortedBy comparators: [KeyPathComparator<M>], limit: Int? = nil) throws -> [M] {
        Store.sorted(try fetch(type, where: predicate), by: comparators, limit: limit)
    }
}
