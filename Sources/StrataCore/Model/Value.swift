public import Foundation

/// A value of an attribute or to-one reference.
public enum Value: Hashable, Sendable, CustomStringConvertible {
    case null
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    /// Microseconds since 1970-01-01T00:00:00Z (exact, unlike `Date`'s floating point).
    case date(Int64)
    case bytes(Data)
    case uuid(UUID)
    /// A to-one relationship's target.
    case reference(ObjectID)
    /// A file kept outside the log, by reference (see ``Asset``). Boxed (`indirect`): an asset
    /// reference is 72 bytes and would make every value — every field of every object the
    /// projection holds — that large; the other payloads are at most 16 bytes.
    indirect case asset(Asset)

    public init(_ date: Date) { self = .date(Int64((date.timeIntervalSince1970 * 1_000_000).rounded())) }

    public var isNull: Bool { self == .null }

    public var stringValue: String? { if case .string(let v) = self { v } else { nil } }
    public var integerValue: Int64? { if case .integer(let v) = self { v } else { nil } }
    public var doubleValue: Double? {
        switch self {
        case .double(let v): v
        case .integer(let v): Double(v)
        default: nil
        }
    }
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }
    public var dateValue: Date? { if case .date(let v) = self { Date(timeIntervalSince1970: Double(v) / 1_000_000) } else { nil } }
    public var bytesValue: Data? { if case .bytes(let v) = self { v } else { nil } }
    public var uuidValue: UUID? { if case .uuid(let v) = self { v } else { nil } }
    public var referenceValue: ObjectID? { if case .reference(let v) = self { v } else { nil } }
    public var assetValue: Asset? { if case .asset(let v) = self { v } else { nil } }

    /// The attribute type this value is of (`nil` for null and references).
    public var attributeType: AttributeType? {
        switch self {
        case .null, .reference: nil
        case .string: .string
        case .integer: .integer
        case .double: .double
        case .bool: .bool
        case .date: .date
        case .bytes: .bytes
        case .uuid: .uuid
        case .asset: .asset
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case .string(let v): "\"\(v)\""
        case .integer(let v): String(v)
        case .double(let v): String(v)
        case .bool(let v): String(v)
        case .date(let v): Date(timeIntervalSince1970: Double(v) / 1_000_000).formatted(.iso8601)
        case .bytes(let v): "<\(v.count) bytes>"
        case .uuid(let v): v.uuidString.lowercased()
        case .reference(let v): "→\(v)"
        case .asset(let v): v.description
        }
    }

    /// A total order for sorting query results: null first, then by type, then by value.
    package static func ordered(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): return x < y
        case (.integer(let x), .integer(let y)): return x < y
        case (.double(let x), .double(let y)): return x < y
        case (.integer(let x), .double(let y)): return Value.less(x, y)
        case (.double(let x), .integer(let y)): return Value.less(x, y)
        case (.bool(let x), .bool(let y)): return !x && y
        case (.date(let x), .date(let y)): return x < y
        case (.bytes(let x), .bytes(let y)): return x.lexicographicallyPrecedes(y)
        case (.uuid(let x), .uuid(let y)): return x.uuidString < y.uuidString
        case (.reference(let x), .reference(let y)): return x < y
        case (.asset(let x), .asset(let y)):
            return (x.sha256, x.byteCount, x.mediaType, x.fileName ?? "") < (y.sha256, y.byteCount, y.mediaType, y.fileName ?? "")
        default: return a.rank < b.rank
        }
    }

    /// `x < y` exactly (converting a large integer to a double would round it, and make two
    /// different integers tie with one double: no sort order then). A NaN is below nothing.
    package static func less(_ x: Int64, _ y: Double) -> Bool {
        if y.isNaN { return false }
        if y >= 9_223_372_036_854_775_808.0 { return true }
        if y < -9_223_372_036_854_775_808.0 { return false }
        let whole = y.rounded(.down)
        let w = Int64(whole)
        return x < w || (x == w && y > whole)
    }

    /// `x < y` exactly (see the other overload).
    package static func less(_ x: Double, _ y: Int64) -> Bool {
        if x.isNaN { return false }
        if x >= 9_223_372_036_854_775_808.0 { return false }
        if x < -9_223_372_036_854_775_808.0 { return true }
        let whole = x.rounded(.down)
        let w = Int64(whole)
        return w < y
    }

    /// The kind's place in the order of values (numbers of both kinds share one).
    package static let numberRank = 2

    package var rank: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .integer, .double: 2
        case .date: 3
        case .string: 4
        case .bytes: 5
        case .uuid: 6
        case .reference: 7
        case .asset: 8
        }
    }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}
