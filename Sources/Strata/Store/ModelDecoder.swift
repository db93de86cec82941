import Foundation
import StrataCore

/// Decodes a ``StrataModel`` straight from an object's values — no JSON in between: the
/// counterpart of ``ModelEncoder``. `id` is the object's ID; a to-many relationship is its
/// targets (`[ObjectID]`, when the snapshot holds them).
///
/// Across app versions: values of attributes the model does not declare (a newer version's) are
/// ignored; an attribute the object lacks reads as its default — the store's schema fills it in
/// the snapshot (see `ObjectSnapshot`), and the model's own ``StrataModel/entity``, when
/// given, supplies it where the store's schema has none. Without a default, a missing or null
/// value decodes as `nil` for an optional property and fails, naming the property, for any other.
struct ModelDecoder: Decoder {
    let snapshot: ObjectSnapshot
    /// The model's declared entity: its defaults stand in for values the snapshot lacks.
    var entity: Entity? = nil
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Properties<Key>(snapshot: snapshot, entity: entity))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [], debugDescription: "a model decodes from an object's properties"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(Value.self, .init(codingPath: [], debugDescription: "a model decodes from an object's properties"))
    }

    /// What a property holds in the snapshot.
    enum Field {
        case value(Value)
        case toMany([ObjectID])
    }

    struct Properties<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let snapshot: ObjectSnapshot
        let entity: Entity?
        var codingPath: [any CodingKey] { [] }

        var allKeys: [Key] {
            (["id"] + Array(snapshot.values.keys) + Array(snapshot.toMany.keys)).compactMap(Key.init(stringValue:))
        }

        func field(_ key: Key) -> Field? {
            let name = key.stringValue
            if name == "id" { return .value(.reference(snapshot.id)) }
            if let value = snapshot.values[name] { return .value(value) }
            if let targets = snapshot.toMany[name] { return .toMany(targets) }
            // Not in the store's schema (a store opened with another schema than the model's).
            return declaredDefault(name).map(Field.value)
        }

        /// The default the model's entity declares for an attribute.
        private func declaredDefault(_ name: String) -> Value? {
            guard let value = entity?.attribute(name)?.defaultValue, value != .null else { return nil }
            return value
        }

        func contains(_ key: Key) -> Bool {
            switch field(key) {
            case nil, .value(.null)?: false
            default: true
            }
        }

        func decodeNil(forKey key: Key) throws -> Bool { !contains(key) }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try ModelDecoder.decode(type, from: present(key), path: [key])
        }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard let field = field(key) else { return nil }
            if case .value(.null) = field { return nil }
            return try ModelDecoder.decode(type, from: field, path: [key])
        }

        /// The key's field, or the error for a property that is missing or null (and has no
        /// declared default to stand in).
        private func present(_ key: Key) throws -> Field {
            switch field(key) {
            case nil, .value(.null)?:
                if let value = declaredDefault(key.stringValue) { return .value(value) }
                throw DecodingError.keyNotFound(key, .init(codingPath: [key], debugDescription: "the object has no value for \(key.stringValue)"))
            case let field?:
                return field
            }
        }

        // The plain types synthesized conformances ask for by name: read without the generic
        // path's type tests (a typed fetch decodes every property of every object).
        func decode(_ type: String.Type, forKey key: Key) throws -> String {
            if case .value(.string(let v))? = field(key) { return v }
            return try ModelDecoder.decode(type, from: present(key), path: [key])
        }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
            if case .value(.bool(let v))? = field(key) { return v }
            return try ModelDecoder.decode(type, from: present(key), path: [key])
        }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
            if case .value(.integer(let v))? = field(key), let i = Int(exactly: v) { return i }
            return try ModelDecoder.decode(type, from: present(key), path: [key])
        }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            if case .value(.integer(let v))? = field(key) { return v }
            return try ModelDecoder.decode(type, from: present(key), path: [key])
        }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            if case .value(let v)? = field(key), let d = v.doubleValue { return d }
            return try ModelDecoder.decode(type, from: present(key), path: [key])
        }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
            switch field(key) {
            case nil, .value(.null)?: return nil
            case .value(.string(let v))?: return v
            case let field?: return try ModelDecoder.decode(type, from: field, path: [key])
            }
        }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
            switch field(key) {
            case nil, .value(.null)?: return nil
            case .value(.bool(let v))?: return v
            case let field?: return try ModelDecoder.decode(type, from: field, path: [key])
            }
        }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
            switch field(key) {
            case nil, .value(.null)?: return nil
            case let field?: return try ModelDecoder.decode(type, from: field, path: [key])
            }
        }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
            switch field(key) {
            case nil, .value(.null)?: return nil
            case .value(let v)? where v.doubleValue != nil: return v.doubleValue
            case let field?: return try ModelDecoder.decode(type, from: field, path: [key])
            }
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: [key], debugDescription: "\(key.stringValue) is a plain value, not a nested structure"))
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            guard case .toMany(let targets)? = field(key) else {
                throw DecodingError.typeMismatch([Any].self, .init(codingPath: [key], debugDescription: "\(key.stringValue) is not a to-many relationship"))
            }
            return Targets(targets: targets, codingPath: [key])
        }
        func superDecoder() throws -> any Decoder { ModelDecoder(snapshot: snapshot, entity: entity) }
        func superDecoder(forKey key: Key) throws -> any Decoder {
            guard let field = field(key) else { throw DecodingError.keyNotFound(key, .init(codingPath: [key], debugDescription: "no value")) }
            return Single(field: field, codingPath: [key])
        }
    }

    /// A property's value as `T`: integers convert between widths (checked) and to floating
    /// point; anything else must match the stored type.
    static func decode<T: Decodable>(_ type: T.Type, from field: Field, path: [any CodingKey]) throws -> T {
        func mismatch() -> DecodingError {
            DecodingError.typeMismatch(T.self, .init(codingPath: path, debugDescription: "expected \(T.self), the object holds \(field)"))
        }
        func integer<I: FixedWidthInteger>(_: I.Type) throws -> I {
            guard case .value(.integer(let i)) = field else { throw mismatch() }
            guard let exact = I(exactly: i) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "\(i) does not fit \(I.self)"))
            }
            return exact
        }
        let result: Any
        switch type {
        case is String.Type:
            guard case .value(.string(let v)) = field else { throw mismatch() }
            result = v
        case is Bool.Type:
            guard case .value(.bool(let v)) = field else { throw mismatch() }
            result = v
        case is Int.Type: result = try integer(Int.self)
        case is Int64.Type: result = try integer(Int64.self)
        case is Int32.Type: result = try integer(Int32.self)
        case is Int16.Type: result = try integer(Int16.self)
        case is Int8.Type: result = try integer(Int8.self)
        case is UInt.Type: result = try integer(UInt.self)
        case is UInt64.Type: result = try integer(UInt64.self)
        case is UInt32.Type: result = try integer(UInt32.self)
        case is UInt16.Type: result = try integer(UInt16.self)
        case is UInt8.Type: result = try integer(UInt8.self)
        case is Double.Type:
            guard case .value(let v) = field, let d = v.doubleValue else { throw mismatch() }
            result = d
        case is Float.Type:
            guard case .value(let v) = field, let d = v.doubleValue else { throw mismatch() }
            result = Float(d)
        case is Date.Type:
            guard case .value(let v) = field, let d = v.dateValue else { throw mismatch() }
            result = d
        case is Data.Type:
            guard case .value(.bytes(let v)) = field else { throw mismatch() }
            result = v
        case is UUID.Type:
            guard case .value(.uuid(let v)) = field else { throw mismatch() }
            result = v
        case is Asset.Type:
            guard case .value(.asset(let v)) = field else { throw mismatch() }
            result = v
        case is ObjectID.Type:
            guard case .value(.reference(let v)) = field else { throw mismatch() }
            result = v
        case is [ObjectID].Type:
            guard case .toMany(let v) = field else { throw mismatch() }
            result = v
        case is Value.Type:
            guard case .value(let v) = field else { throw mismatch() }
            result = v
        default:
            // A type that decodes from one plain value (a raw-value enum, a wrapper).
            return try T(from: Single(field: field, codingPath: path))
        }
        guard let typed = result as? T else { throw mismatch() }
        return typed
    }

    /// A decoder of one property's value.
    struct Single: Decoder, SingleValueDecodingContainer {
        let field: Field
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath, debugDescription: "a property is a plain value, not a nested structure"))
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .toMany(let targets) = field else {
                throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "not a to-many relationship"))
            }
            return Targets(targets: targets, codingPath: codingPath)
        }
        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

        func decodeNil() -> Bool {
            if case .value(.null) = field { return true }
            return false
        }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try ModelDecoder.decode(type, from: field, path: codingPath) }
    }

    /// A to-many relationship's targets, for types that decode them element by element.
    struct Targets: UnkeyedDecodingContainer {
        let targets: [ObjectID]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { targets.count }
        var isAtEnd: Bool { currentIndex >= targets.count }

        mutating func decodeNil() throws -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath, debugDescription: "past the end of the relationship"))
            }
            defer { currentIndex += 1 }
            return try ModelDecoder.decode(type, from: .value(.reference(targets[currentIndex])), path: codingPath + [AnyKey(String(currentIndex))])
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath, debugDescription: "targets are object IDs"))
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "targets are object IDs"))
        }
        mutating func superDecoder() throws -> any Decoder { Single(field: .toMany(targets), codingPath: codingPath) }
    }
}

extension ModelDecoder.Field: CustomStringConvertible {
    var description: String {
        switch self {
        case .value(let value): value.description
        case .toMany(let ids): "\(ids.count) object IDs"
        }
    }
}
