import Foundation

// The JSON form of a migration step, inside a schema's "migrations" array:
//
//     {"version": 2, "kind": "renameAttribute", "entity": "Person", "from": "name", "to": "fullName"}
//     {"version": 3, "kind": "changeType", "entity": "Person", "attribute": "age", "from": "string", "to": "integer"}
//     {"version": 4, "kind": "split", "entity": "Person", "attribute": "fullName", "into": ["first", "last"], "separator": " "}
//     {"version": 4, "kind": "merge", "entity": "Person", "attributes": ["street", "city"], "into": "address", "separator": ", "}
//     {"version": 5, "kind": "deprecate", "entity": "Person", "attribute": "fax"}
//     {"version": 6, "kind": "renameEntity", "from": "Person", "to": "Contact"}
//
// A kind this Strata does not know decodes as `unrecognized` (an old log reader must still read
// a schema a newer Strata recorded) and is not applied.

extension SchemaMigration: Codable {
    package enum CodingKeys: String, CodingKey { case version, kind, entity, attribute, attributes, from, to, into, separator }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        let kind = try c.decode(String.self, forKey: .kind)
        switch kind {
        case "renameEntity":
            change = .renameEntity(from: try c.decode(String.self, forKey: .from), to: try c.decode(String.self, forKey: .to))
        case "renameAttribute":
            change = .renameAttribute(entity: try c.decode(String.self, forKey: .entity), from: try c.decode(String.self, forKey: .from),
                                      to: try c.decode(String.self, forKey: .to))
        case "changeType":
            change = .changeType(entity: try c.decode(String.self, forKey: .entity), attribute: try c.decode(String.self, forKey: .attribute),
                                 from: try c.decode(AttributeType.self, forKey: .from), to: try c.decode(AttributeType.self, forKey: .to))
        case "split":
            change = .split(entity: try c.decode(String.self, forKey: .entity), attribute: try c.decode(String.self, forKey: .attribute),
                            into: try c.decode([String].self, forKey: .into), separator: try c.decode(String.self, forKey: .separator))
        case "merge":
            change = .merge(entity: try c.decode(String.self, forKey: .entity), attributes: try c.decode([String].self, forKey: .attributes),
                            into: try c.decode(String.self, forKey: .into), separator: try c.decode(String.self, forKey: .separator))
        case "deprecate":
            change = .deprecate(entity: try c.decode(String.self, forKey: .entity), attribute: try c.decode(String.self, forKey: .attribute))
        default:
            change = .unrecognized(kind: kind)
            raw = try decoder.singleValueContainer().decode([String: RawJSON].self)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        switch change {
        case .renameEntity(let from, let to):
            try c.encode("renameEntity", forKey: .kind)
            try c.encode(from, forKey: .from)
            try c.encode(to, forKey: .to)
        case .renameAttribute(let entity, let from, let to):
            try c.encode("renameAttribute", forKey: .kind)
            try c.encode(entity, forKey: .entity)
            try c.encode(from, forKey: .from)
            try c.encode(to, forKey: .to)
        case .changeType(let entity, let attribute, let from, let to):
            try c.encode("changeType", forKey: .kind)
            try c.encode(entity, forKey: .entity)
            try c.encode(attribute, forKey: .attribute)
            try c.encode(from, forKey: .from)
            try c.encode(to, forKey: .to)
        case .split(let entity, let attribute, let parts, let separator):
            try c.encode("split", forKey: .kind)
            try c.encode(entity, forKey: .entity)
            try c.encode(attribute, forKey: .attribute)
            try c.encode(parts, forKey: .into)
            try c.encode(separator, forKey: .separator)
        case .merge(let entity, let attributes, let name, let separator):
            try c.encode("merge", forKey: .kind)
            try c.encode(entity, forKey: .entity)
            try c.encode(attributes, forKey: .attributes)
            try c.encode(name, forKey: .into)
            try c.encode(separator, forKey: .separator)
        case .deprecate(let entity, let attribute):
            try c.encode("deprecate", forKey: .kind)
            try c.encode(entity, forKey: .entity)
            try c.encode(attribute, forKey: .attribute)
        case .unrecognized(let kind):
            if let raw {
                var whole = encoder.singleValueContainer()
                try whole.encode(raw)
                return
            }
            try c.encode(kind, forKey: .kind)
        }
    }
}

/// Any JSON value, kept as read (an unrecognized migration step's fields).
package indirect enum RawJSON: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([RawJSON])
    case object([String: RawJSON])

    package init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let v = try? c.decode(Bool.self) { self = .bool(v) }
        else if let v = try? c.decode(Int64.self) { self = .integer(v) }
        else if let v = try? c.decode(Double.self) { self = .number(v) }
        else if let v = try? c.decode(String.self) { self = .string(v) }
        else if let v = try? c.decode([RawJSON].self) { self = .array(v) }
        else { self = .object(try c.decode([String: RawJSON].self)) }
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let v): try c.encode(v)
        case .integer(let v): try c.encode(v)
        case .number(let v): try c.encode(v)
        case .string(let v): try c.encode(v)
        case .array(let v): try c.encode(v)
        case .object(let v): try c.encode(v)
        }
    }
}
