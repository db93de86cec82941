public import Foundation

// The JSON form of a schema (what `strata init --schema FILE.json` reads, and what the log
// records):
//
//     {"entities": [{"name": "Note",
//                    "attributes": [{"name": "title", "type": "string", "optional": false, "default": ""},
//                                   {"name": "draft", "type": "string", "localOnly": true}],
//                    "relationships": [{"name": "folder", "destination": "Folder", "inverse": "notes"}]}],
//      "version": 2,
//      "migrations": [{"version": 2, "kind": "renameAttribute", "entity": "Note", "from": "name", "to": "title"}]}
//
// "version" (default 1) and "migrations" (default none) are left out when they have their
// default. The log records a schema under its stored names (see `Schema.stored`).

extension Schema: Codable {
    package enum CodingKeys: String, CodingKey { case entities, version, migrations }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        entities = try container.decodeIfPresent([Entity].self, forKey: .entities) ?? []
        version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 1
        // Bounded: a recorded schema may come from any device (see `SchemaLineage.maxSteps`).
        migrations = Array((try container.decodeIfPresent([SchemaMigration].self, forKey: .migrations) ?? []).prefix(SchemaLineage.maxSteps))
    }

    // A schema of version 1 without migrations encodes as it always has (the recorded schemas
    // of existing logs and fixtures stay byte for byte what they were).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entities, forKey: .entities)
        if version != 1 { try container.encode(version, forKey: .version) }
        if !migrations.isEmpty { try container.encode(migrations, forKey: .migrations) }
    }

    /// Decodes a schema from JSON and checks it.
    ///
    /// - Throws: ``StoreError/Code/invalidSchema`` saying what is wrong and where.
    public static func fromJSON(_ data: Data) throws -> Schema {
        let schema: Schema
        do {
            schema = try JSONDecoder().decode(Schema.self, from: data)
        } catch let error as DecodingError {
            throw StoreError(.invalidSchema, "schema JSON: \(error.readableDescription)")
        }
        let problems = schema.problems()
        guard problems.isEmpty else { throw StoreError(.invalidSchema, problems.joined(separator: "; ")) }
        return schema
    }

    /// Canonical JSON (sorted keys), as recorded in the log.
    public func jsonData() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }
}

extension Entity: Codable {
    package enum CodingKeys: String, CodingKey { case name, attributes, relationships }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        attributes = try container.decodeIfPresent([Attribute].self, forKey: .attributes) ?? []
        relationships = try container.decodeIfPresent([Relationship].self, forKey: .relationships) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(attributes, forKey: .attributes)
        try container.encode(relationships, forKey: .relationships)
    }
}

extension Attribute: Codable {
    package enum CodingKeys: String, CodingKey { case name, type, optional, `default`, localOnly }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        type = try container.decode(AttributeType.self, forKey: .type)
        isOptional = try container.decodeIfPresent(Bool.self, forKey: .optional) ?? true
        isLocalOnly = try container.decodeIfPresent(Bool.self, forKey: .localOnly) ?? false
        if container.contains(.default) {
            let json = try container.decode(JSONValue.self, forKey: .default)
            do {
                defaultValue = try Value(json: json.any, type: type)
            } catch let error as StoreError {
                throw DecodingError.dataCorruptedError(forKey: .default, in: container, debugDescription: error.message)
            }
        } else {
            defaultValue = nil
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(isOptional, forKey: .optional)
        if isLocalOnly { try container.encode(true, forKey: .localOnly) }
        if let defaultValue { try container.encode(JSONValue(any: defaultValue.jsonObject), forKey: .default) }
    }
}

extension Relationship: Codable {
    package enum CodingKeys: String, CodingKey { case name, destination, toMany, inverse, deleteRule, optional }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        destination = try container.decode(String.self, forKey: .destination)
        isToMany = try container.decodeIfPresent(Bool.self, forKey: .toMany) ?? false
        inverse = try container.decodeIfPresent(String.self, forKey: .inverse)
        deleteRule = try container.decodeIfPresent(DeleteRule.self, forKey: .deleteRule) ?? .nullify
        isOptional = try container.decodeIfPresent(Bool.self, forKey: .optional) ?? true
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(destination, forKey: .destination)
        try container.encode(isToMany, forKey: .toMany)
        try container.encodeIfPresent(inverse, forKey: .inverse)
        try container.encode(deleteRule, forKey: .deleteRule)
        try container.encode(isOptional, forKey: .optional)
    }
}

/// Any JSON value, for fields whose type depends on another field.
package struct JSONValue: Codable {
    package let any: any Sendable

    package init(any: any Sendable) { self.any = any }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { any = NSNull() }
        else if let v = try? container.decode(Bool.self) { any = v }
        else if let v = try? container.decode(Int64.self) { any = v }
        else if let v = try? container.decode(Double.self) { any = v }
        else if let v = try? container.decode(String.self) { any = v }
        else { throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected a JSON scalar") }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch any {
        case let v as Bool: try container.encode(v)
        case let v as Int64: try container.encode(v)
        case let v as Int: try container.encode(v)
        case let v as Double: try container.encode(v)
        case let v as String: try container.encode(v)
        default: try container.encodeNil()
        }
    }
}

extension Value {
    /// The value as a JSON-compatible object: strings, numbers, booleans, `NSNull`; dates as
    /// ISO 8601 strings with microseconds, bytes as base64, UUIDs and references as strings,
    /// assets as `{"sha256", "size", "mediaType", "fileName"}` objects.
    public var jsonObject: any Sendable {
        switch self {
        case .null: NSNull()
        case .string(let v): v
        case .integer(let v): v
        case .double(let v): v
        case .bool(let v): v
        case .date: Value.formatDate(self)
        case .bytes(let v): v.base64EncodedString()
        case .uuid(let v): v.uuidString.lowercased()
        case .reference(let v): v.description
        case .asset(let v): v.jsonObject
        }
    }

    package static func formatDate(_ value: Value) -> String {
        guard case .date(let micros) = value else { return "" }
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let fraction = micros - seconds * 1_000_000
        let date = Date(timeIntervalSince1970: Double(seconds))
        let base = date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon))
        let digits = String(fraction)
        return base.replacingOccurrences(of: "Z", with: "") + "." + String(repeating: "0", count: 6 - digits.count) + digits + "Z"
    }

    /// A value of `type` from a JSON object (as produced by `JSONSerialization` or ``jsonObject``).
    ///
    /// - Throws: ``StoreError/Code/typeMismatch`` saying what was expected.
    public init(json: Any, type: AttributeType) throws {
        func mismatch() -> StoreError {
            StoreError(.typeMismatch, "expected a \(type) value, got \(json)")
        }
        if json is NSNull { self = .null; return }
        switch type {
        case .string:
            guard let v = json as? String else { throw mismatch() }
            self = .string(v)
        case .integer:
            if let v = json as? Int64 { self = .integer(v) }
            else if let v = json as? Int { self = .integer(Int64(v)) }
            else if let v = json as? NSNumber, !(json is Bool), v.doubleValue == v.doubleValue.rounded(), abs(v.doubleValue) < 9.2e18 { self = .integer(v.int64Value) }
            else { throw mismatch() }
        case .double:
            if let v = json as? Double { self = .double(v) }
            else if let v = json as? Int64 { self = .double(Double(v)) }
            else if let v = json as? NSNumber, !(json is Bool) { self = .double(v.doubleValue) }
            else { throw mismatch() }
        case .bool:
            guard let v = json as? Bool else { throw mismatch() }
            self = .bool(v)
        case .date:
            if let v = json as? String, let micros = Value.parseDate(v) { self = .date(micros) }
            else if let v = json as? Int64 { self = .date(v) }
            else if let v = json as? Int { self = .date(Int64(v)) }
            else { throw mismatch() }
        case .bytes:
            guard let v = json as? String, let data = Data(base64Encoded: v) else { throw mismatch() }
            self = .bytes(data)
        case .uuid:
            guard let v = json as? String, let uuid = UUID(uuidString: v) else { throw mismatch() }
            self = .uuid(uuid)
        case .asset:
            self = .asset(try Asset(json: json))
        }
    }

    /// Parses an ISO 8601 date with optional fractional seconds, to microseconds.
    package static func parseDate(_ text: String) -> Int64? {
        var main = text
        var micros: Int64 = 0
        if let dot = text.firstIndex(of: ".") {
            let rest = text[text.index(after: dot)...]
            let digits = rest.prefix { $0.isNumber }
            guard !digits.isEmpty else { return nil }
            let padded = (String(digits) + "000000").prefix(6)
            micros = Int64(padded) ?? 0
            main = String(text[..<dot]) + String(rest.dropFirst(digits.count))
        }
        guard let date = try? Date.ISO8601FormatStyle().parse(main) else { return nil }
        return Int64(date.timeIntervalSince1970) * 1_000_000 + micros
    }
}

extension DecodingError {
    /// "what is wrong at which key path", for error messages.
    package var readableDescription: String {
        func path(_ context: Context) -> String {
            context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch self {
        case .keyNotFound(let key, let context): return "missing key \"\(key.stringValue)\" at \(path(context).isEmpty ? "top level" : path(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(context.debugDescription) at \(path(context).isEmpty ? "top level" : path(context))"
        @unknown default: return "\(self)"
        }
    }
}
