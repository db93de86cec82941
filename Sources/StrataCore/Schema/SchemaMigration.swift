import Foundation

/// One step from a schema version to the next: what a new app version changed in a way that is
/// not purely additive. Declared by the app with its ``Schema``, recorded in the log with it, and
/// read by every device of the fleet — older app versions included — so that every version reads
/// and writes the same objects through its own names and types.
///
/// Names are those in force where the step is taken: the entity and attribute as the previous
/// version (or the previous step of the same version) called them. Steps of one version apply in
/// the order listed.
///
/// ```swift
/// let schema = Schema(version: 3, migrations: [
///     .renameAttribute("Person", "name", to: "fullName", in: 2),
///     .changeType("Person", "age", from: .string, to: .integer, in: 3),
/// ]) {
///     Entity("Person", attributes: [Attribute("fullName", .string), Attribute("age", .integer)])
/// }
/// ```
public struct SchemaMigration: Sendable, Hashable {
    /// The version this step leads to (2 or more).
    public var version: Int
    public var change: Change
    /// For an `unrecognized` step: its JSON as it was read, written back unchanged (a newer
    /// Strata must find its step whole in a schema this one recorded).
    package var raw: [String: RawJSON]? = nil

    public enum Change: Sendable, Hashable {
        /// The entity is called `to` from now on. Its objects keep their stored name, so every
        /// version reads them.
        case renameEntity(from: String, to: String)
        /// The attribute or relationship is called `to` from now on; its values keep their stored
        /// key, so both versions read and write the same field.
        case renameAttribute(entity: String, from: String, to: String)
        /// The attribute's values are of type `to` from now on. The new version writes a field of
        /// its own; each version reads the newer of the two, converted (see ``TypeConversion``).
        case changeType(entity: String, attribute: String, from: AttributeType, to: AttributeType)
        /// A string attribute becomes several: the first part before the first `separator`, the
        /// next before the next one, the last part the rest. Older versions read them joined.
        case split(entity: String, attribute: String, into: [String], separator: String)
        /// Several string attributes become one, joined with `separator`. Older versions read it
        /// split.
        case merge(entity: String, attributes: [String], into: String, separator: String)
        /// The attribute is no longer part of the app's schema. Its values stay in the store and
        /// the log (older versions still read and write them); `strata schema check` takes the
        /// removal as intended.
        case deprecate(entity: String, attribute: String)
        /// A step a newer Strata knows and this one does not: kept, not applied.
        case unrecognized(kind: String)
    }

    public init(version: Int, _ change: Change) {
        self.version = version
        self.change = change
    }

    public static func renameEntity(_ from: String, to: String, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .renameEntity(from: from, to: to))
    }

    public static func renameAttribute(_ entity: String, _ from: String, to: String, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .renameAttribute(entity: entity, from: from, to: to))
    }

    public static func changeType(_ entity: String, _ attribute: String, from: AttributeType, to: AttributeType, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .changeType(entity: entity, attribute: attribute, from: from, to: to))
    }

    public static func split(_ entity: String, _ attribute: String, into parts: [String], separator: String, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .split(entity: entity, attribute: attribute, into: parts, separator: separator))
    }

    public static func merge(_ entity: String, _ attributes: [String], into name: String, separator: String, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .merge(entity: entity, attributes: attributes, into: name, separator: separator))
    }

    public static func deprecate(_ entity: String, _ attribute: String, in version: Int) -> SchemaMigration {
        SchemaMigration(version: version, .deprecate(entity: entity, attribute: attribute))
    }

    /// What the step says, in words (for `strata schema` and messages).
    public var summary: String {
        switch change {
        case .renameEntity(let from, let to): "v\(version): entity \(from) renamed \(to)"
        case .renameAttribute(let entity, let from, let to): "v\(version): \(entity).\(from) renamed \(to)"
        case .changeType(let entity, let attribute, let from, let to): "v\(version): \(entity).\(attribute) changed from \(from) to \(to)"
        case .split(let entity, let attribute, let parts, let separator): "v\(version): \(entity).\(attribute) split into \(parts.joined(separator: ", ")) at \"\(separator)\""
        case .merge(let entity, let attributes, let name, let separator): "v\(version): \(entity).\(attributes.joined(separator: ", ")) merged into \(name) with \"\(separator)\""
        case .deprecate(let entity, let attribute): "v\(version): \(entity).\(attribute) deprecated"
        case .unrecognized(let kind): "v\(version): \(kind) (not known to this Strata; not applied)"
        }
    }
}

/// The conversions a ``SchemaMigration/Change/changeType(entity:attribute:from:to:)`` may declare:
/// a closed set, each with its inverse, so that a version on either side reads what the other
/// wrote. A value that does not convert (`"abc"` as an integer, `2.5` as an integer, a string
/// that is not a UUID) reads as the attribute's default on that side and stays stored unchanged.
public enum TypeConversion {
    /// Whether values of `from` convert to `to` and back.
    public static func exists(from: AttributeType, to: AttributeType) -> Bool {
        pairs.contains { ($0.0 == from && $0.1 == to) || ($0.0 == to && $0.1 == from) }
    }

    /// Whether some value of `from` has no `to` value (a version on the `to` side may read the
    /// default where the other wrote something).
    public static func isLossy(from: AttributeType, to: AttributeType) -> Bool {
        switch (from, to) {
        // integer → double loses precision above 2^53; integer → date overflows past ±292,000 years.
        case (.string, _), (.double, .integer), (.integer, .bool), (.date, .integer), (.double, .date), (.integer, .double), (.integer, .date): true
        default: false
        }
    }

    private static let pairs: [(AttributeType, AttributeType)] = [
        (.integer, .string), (.double, .string), (.uuid, .string), (.bool, .string),
        (.integer, .double), (.bool, .integer), (.date, .double), (.date, .integer),
    ]

    /// `value` as a `to` value, or `nil` when it has none. Null stays null.
    public static func convert(_ value: Value, to type: AttributeType) -> Value? {
        if value == .null { return .null }
        if value.attributeType == type { return value }
        switch (value, type) {
        case (.integer(let v), .string): return .string(String(v))
        case (.double(let v), .string): return .string(String(v))
        case (.uuid(let v), .string): return .string(v.uuidString.lowercased())
        case (.bool(let v), .string): return .string(v ? "true" : "false")
        case (.string(let v), .integer): return (Int64(v) ?? Int64(v.trimmingCharacters(in: .whitespaces))).map(Value.integer)
        case (.string(let v), .double): return (Double(v) ?? Double(v.trimmingCharacters(in: .whitespaces))).flatMap { $0.isFinite ? Value.double($0) : nil }
        case (.string(let v), .uuid): return UUID(uuidString: v).map(Value.uuid)
        case (.string(let v), .bool):
            switch v.lowercased() { case "true": return .bool(true); case "false": return .bool(false); default: return nil }
        case (.integer(let v), .double): return .double(Double(v))
        case (.double(let v), .integer):
            guard v.isFinite, v == v.rounded(), abs(v) < 9.2e18 else { return nil }
            return .integer(Int64(v))
        case (.bool(let v), .integer): return .integer(v ? 1 : 0)
        case (.integer(let v), .bool):
            guard v == 0 || v == 1 else { return nil }
            return .bool(v == 1)
        // Dates are microseconds since 1970; as numbers they are seconds.
        case (.date(let micros), .double): return .double(Double(micros) / 1_000_000)
        case (.double(let seconds), .date):
            guard seconds.isFinite, abs(seconds) < 9.2e12 else { return nil }
            return .date(Int64((seconds * 1_000_000).rounded()))
        case (.date(let micros), .integer): return .integer(micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000)
        case (.integer(let seconds), .date):
            let (micros, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
            return overflow ? nil : .date(micros)
        default: return nil
        }
    }
}
