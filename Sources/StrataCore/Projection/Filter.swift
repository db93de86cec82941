/// A filter stated as data, so that a fetch or an observed query can be planned: an equality or
/// a range on an attribute declared indexed (`StoreOptions.indexes`) is answered from the index;
/// anything else is checked object by object, as a closure filter would be. An index only ever
/// narrows the objects a filter is checked against, so the result is the same with or without
/// one.
///
/// ```swift
/// store.fetch("Note", matching: .equal("folder", "Inbox") && .greater("priority", 2),
///             sortedBy: [SortKey("due")], limit: 20)
/// ```
///
/// Values are written as literals (`"Inbox"`, `2`, `true`, `nil`) or as ``Value``s
/// (`Value(date)`). Comparisons follow the order of ``Value``: an integer and a double compare,
/// and are equal, by their exact numeric value (`.equal("price", 10)` matches a price of 10.0);
/// values of other kinds never match a comparison (`.less("due", Value(now))` matches no title
/// and no null). A double that is not a number matches no comparison and equals nothing, not even
/// itself. An attribute an object lacks reads as its default (or null), as in a fetched snapshot.
///
/// Names are not checked: a misspelled attribute reads as null in every object (so `.equal` with
/// a value other than null matches nothing on it, and `.not` of that matches everything). `.not(.less(k, v))` is not
/// `.greaterOrEqual(k, v)`: it also matches nulls and values of other kinds.
///
/// What an index answers: equalities (`.equal`, `.oneOf` of up to 64 values) on an index's
/// leading attributes, then one range on the next; an `.any` whose every branch it answers. A
/// `.not`, a filter on attributes no index leads with, or a longer `.oneOf` is checked on every
/// object of the entity.
public struct Filter: Sendable, Hashable {
    /// What the filter is. A struct around an enum, so that kinds of filters can be added later
    /// without breaking an app (an app builds filters with the static functions, never switches
    /// over them).
    package indirect enum Node: Sendable, Hashable {
        case equal(String, Value)
        case oneOf(String, [Value])
        case less(String, Value)
        case lessOrEqual(String, Value)
        case greater(String, Value)
        case greaterOrEqual(String, Value)
        case between(String, Value, Value)
        case all([Filter])
        case any([Filter])
        case not(Filter)
    }

    package let node: Node

    package init(_ node: Node) { self.node = node }

    /// The attribute's value is this one (`nil`/`.null` matches an absent value; an integer and a
    /// double of the same value are equal).
    public static func equal(_ attribute: String, _ value: Value) -> Filter { Filter(.equal(attribute, value)) }
    /// The attribute's value is any of these.
    public static func oneOf(_ attribute: String, _ values: [Value]) -> Filter { Filter(.oneOf(attribute, values)) }
    public static func less(_ attribute: String, _ bound: Value) -> Filter { Filter(.less(attribute, bound)) }
    public static func lessOrEqual(_ attribute: String, _ bound: Value) -> Filter { Filter(.lessOrEqual(attribute, bound)) }
    public static func greater(_ attribute: String, _ bound: Value) -> Filter { Filter(.greater(attribute, bound)) }
    public static func greaterOrEqual(_ attribute: String, _ bound: Value) -> Filter { Filter(.greaterOrEqual(attribute, bound)) }
    /// Within the closed range `lower...upper`.
    public static func between(_ attribute: String, _ lower: Value, _ upper: Value) -> Filter { Filter(.between(attribute, lower, upper)) }
    /// Every one of these holds (true when empty).
    public static func all(_ filters: [Filter]) -> Filter { Filter(.all(filters)) }
    /// At least one of these holds (false when empty).
    public static func any(_ filters: [Filter]) -> Filter { Filter(.any(filters)) }
    /// The filter does not hold.
    public static func not(_ filter: Filter) -> Filter { Filter(.not(filter)) }

    /// Both hold.
    public static func && (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs.node, rhs.node) {
        case (.all(let a), .all(let b)): .all(a + b)
        case (.all(let a), _): .all(a + [rhs])
        case (_, .all(let b)): .all([lhs] + b)
        default: .all([lhs, rhs])
        }
    }

    /// Either holds.
    public static func || (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs.node, rhs.node) {
        case (.any(let a), .any(let b)): .any(a + b)
        case (.any(let a), _): .any(a + [rhs])
        case (_, .any(let b)): .any([lhs] + b)
        default: .any([lhs, rhs])
        }
    }

    public static prefix func ! (filter: Filter) -> Filter { .not(filter) }

    /// Whether the object matches.
    public func matches(_ object: ObjectSnapshot) -> Bool {
        switch node {
        case .equal(let key, let value): return Value.same(object[key], value)
        case .oneOf(let key, let values):
            let held = object[key]
            return values.contains { Value.same(held, $0) }
        case .less(let key, let bound): return Value.compare(object[key], bound).map { $0 < 0 } ?? false
        case .lessOrEqual(let key, let bound): return Value.compare(object[key], bound).map { $0 <= 0 } ?? false
        case .greater(let key, let bound): return Value.compare(object[key], bound).map { $0 > 0 } ?? false
        case .greaterOrEqual(let key, let bound): return Value.compare(object[key], bound).map { $0 >= 0 } ?? false
        case .between(let key, let lower, let upper):
            let held = object[key]
            guard let low = Value.compare(held, lower), let high = Value.compare(held, upper) else { return false }
            return low >= 0 && high <= 0
        case .all(let filters): return filters.allSatisfy { $0.matches(object) }
        case .any(let filters): return filters.contains { $0.matches(object) }
        case .not(let filter): return !filter.matches(object)
        }
    }

    /// The attributes the filter reads.
    public var attributes: Set<String> {
        switch node {
        case .equal(let key, _), .oneOf(let key, _), .less(let key, _), .lessOrEqual(let key, _),
             .greater(let key, _), .greaterOrEqual(let key, _), .between(let key, _, _):
            return [key]
        case .all(let filters), .any(let filters): return filters.reduce(into: []) { $0.formUnion($1.attributes) }
        case .not(let filter): return filter.attributes
        }
    }
}

extension Value {
    /// Equality as filters see it: the values are identical, or an integer and a double of the
    /// same exact numeric value (a literal `10` matches a double attribute's 10.0); a double that
    /// is not a number equals nothing. This is the equivalence of the order an index keeps.
    package static func same(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.double(let x), _) where x.isNaN, (_, .double(let x)) where x.isNaN: return false
        case (.integer(let x), .double(let y)): return !less(x, y) && !less(y, x)
        case (.double(let x), .integer(let y)): return !less(x, y) && !less(y, x)
        default: return a == b
        }
    }

    /// -1, 0 or 1 when `a` and `b` can be compared (the same kind of value, numbers across integer
    /// and double; neither a NaN nor null), `nil` when they cannot.
    package static func compare(_ a: Value, _ b: Value) -> Int? {
        switch (a, b) {
        case (.null, _), (_, .null): return nil
        case (.double(let x), _) where x.isNaN: return nil
        case (_, .double(let y)) where y.isNaN: return nil
        default:
            guard a.rank == b.rank else { return nil }
            return Value.ordered(a, b) ? -1 : (Value.ordered(b, a) ? 1 : 0)
        }
    }

    /// A total order for sorting and indexing: by kind, then by ``ordered(_:_:)``, with NaN after
    /// every other number (``ordered(_:_:)`` alone is not a strict weak order once a NaN is
    /// among the values). An integer and a double of equal numeric value are equivalent here.
    package static func precedes(_ a: Value, _ b: Value) -> Bool {
        let (ra, rb) = (a.rank, b.rank)
        if ra != rb { return ra < rb }
        if ra == Value.numberRank {
            let x = a.isNaN, y = b.isNaN
            if x || y { return !x && y }
        }
        return Value.ordered(a, b)
    }

    private var isNaN: Bool { if case .double(let x) = self { x.isNaN } else { false } }
}
