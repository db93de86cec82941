import StrataCore

/// An index of one entity's objects by one or more of their attributes, declared in
/// ``StoreOptions/indexes``.
///
/// ```swift
/// options.indexes = [AttributeIndex("Note", on: "folder", "due"), AttributeIndex("Note", on: "title")]
/// let due = store.fetch("Note", matching: .equal("folder", "Inbox") && .less("due", Value(soon)))
/// ```
///
/// A `Filter` uses an index whose leading attributes it fixes by equality (`.equal`, `.oneOf`),
/// then one it bounds by a range; a fetch sorted by an index's first attribute with a limit
/// walks the index in order and stops early (when no index answers its filter: a filter the
/// index answers reads its candidates, then sorts them). Filters and sorts give the same results with or
/// without an index: only the time changes. Closure filters (`where:`) cannot be planned: they
/// read every object of the entity, unless the fetch is sorted by an index's first attribute
/// with a limit (it then walks that index and stops early, checking the closure on the way).
///
/// Indexes live in memory (each entry holds the values and the object's ID), are built from
/// the objects when the store opens, and follow every commit, sync and schema change. Index
/// attributes only, not relationships.
public struct AttributeIndex: Sendable, Hashable {
    /// The entity, under the app's name.
    public var entity: String
    /// The attributes, in the order the index sorts by.
    public var attributes: [String]

    public init(_ entity: String, on attributes: String...) {
        self.init(entity, on: attributes)
    }

    public init(_ entity: String, on attributes: [String]) {
        self.entity = entity
        self.attributes = attributes
    }

    var declaration: IndexDeclaration { IndexDeclaration(entity: entity, attributes: attributes) }

    /// Whether the schema names the entity and these as its attributes.
    static func check(_ indexes: [AttributeIndex], against schema: Schema) throws {
        for index in indexes {
            guard !index.attributes.isEmpty else {
                throw StoreError(.invalidArgument, "an index of \(index.entity) names no attribute")
            }
            guard let entity = schema.entity(index.entity) else {
                throw StoreError(.invalidArgument, "an index names entity \(index.entity), which the schema does not declare")
            }
            for name in index.attributes where entity.attribute(name) == nil {
                let what = entity.relationship(name) != nil ? "a relationship; only attributes can be indexed" : "not an attribute of it"
                throw StoreError(.invalidArgument, "an index of \(index.entity) names \(name), which is \(what)")
            }
        }
    }
}
