import Foundation
import StrataCore

/// Encodes a ``StrataModel`` straight into Strata values — no JSON in between — typed by the
/// entity's schema: each stored property becomes the attribute or to-one relationship of the same
/// name. Properties are Swift's plain types (`String`, the integer and floating-point types,
/// `Bool`, `Date`, `Data`, `UUID`, `Asset`, `ObjectID`), their optionals, and types that encode as one of
/// those (a `String` or `Int` raw-value enum); a to-many relationship is an `[ObjectID]` (or a
/// `Set<ObjectID>`): its members, which the typed insert and update write as adds and removes.
struct ModelEncoder {
    let entity: Entity
    let object: ObjectID

    /// What a model encodes to.
    struct Encoded {
        /// Attributes and to-one relationships by name (`nil` properties as `.null`).
        var values: [String: Value] = [:]
        /// The members of each to-many relationship the model has a property for, without
        /// duplicates, in the model's order (a `nil` optional array as no members).
        var toMany: [String: [ObjectID]] = [:]
    }

    /// The model's values by attribute or relationship name, and its to-many members.
    ///
    /// - Throws: `StoreError` naming the entity and property: a property that matches nothing
    ///   in the entity, or whose type does not fit it (an `[ObjectID]` for an attribute or a
    ///   to-one relationship, anything but object IDs for a to-many one).
    func encode<M: StrataModel>(_ model: M) throws -> Encoded {
        let storage = Storage()
        do {
            try model.encode(to: TopEncoder(storage: storage))
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.encoding, "\(M.self) does not encode: \(error)", entity: entity.name, object: object)
        }
        var encoded = Encoded()
        for (key, raw) in storage.fields where key != "id" {
            if let attribute = entity.attribute(key) {
                encoded.values[key] = try Self.coerce(raw, to: attribute.type, entity: entity.name, object: object, key: key)
            } else if let relationship = entity.relationship(key) {
                if relationship.isToMany {
                    switch raw {
                    case .value(.null): encoded.toMany[key] = []
                    case .toMany(let targets):
                        var seen: Set<ObjectID> = []
                        encoded.toMany[key] = targets.filter { seen.insert($0).inserted }
                    default: throw StoreError(.typeMismatch, "\(M.self).\(key) is a to-many relationship: expected [ObjectID], got \(raw)", entity: entity.name, object: object, attribute: key)
                    }
                    continue
                }
                switch raw {
                case .value(.null): encoded.values[key] = .null
                case .value(.reference(let target)): encoded.values[key] = .reference(target)
                default: throw StoreError(.typeMismatch, "\(M.self).\(key) is a to-one relationship: expected an ObjectID, got \(raw)", entity: entity.name, object: object, attribute: key)
                }
            } else if case .toMany = raw {
                throw StoreError(.unknownAttribute, "\(M.self).\(key) matches no relationship", entity: entity.name, object: object, attribute: key)
            } else {
                throw StoreError(.unknownAttribute, "\(M.self).\(key) matches no attribute or relationship", entity: entity.name, object: object, attribute: key)
            }
        }
        return encoded
    }

    /// A Swift value in the attribute's type: integers widen to doubles; anything else must match.
    static func coerce(_ raw: Field, to type: AttributeType, entity: String, object: ObjectID, key: String) throws -> Value {
        switch (raw, type) {
        case (.value(.null), _): return .null
        case (.value(.integer(let i)), .double): return .double(Double(i))
        case (.value(let value), _) where value.attributeType == type: return value
        default:
            throw StoreError(.typeMismatch, "expected \(type), got \(raw)", entity: entity, object: object, attribute: key)
        }
    }

    /// What a property encoded to.
    enum Field: CustomStringConvertible {
        case value(Value)
        case toMany([ObjectID])

        static let null = Field.value(.null)
        static func reference(_ id: ObjectID) -> Field { .value(.reference(id)) }

        var description: String {
            switch self {
            case .value(let value): value.description
            case .toMany(let ids): "\(ids.count) object IDs"
            }
        }
    }

    final class Storage {
        var fields: [String: Field] = [:]
    }

    /// The model itself: a keyed container of its properties, nothing else.
    struct TopEncoder: Encoder {
        let storage: Storage
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Properties<Key>(storage: storage))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { Refusing(codingPath: []).unkeyedContainer() }
        func singleValueContainer() -> any SingleValueEncodingContainer { Refusing(codingPath: []).singleValueContainer() }
    }

    struct Properties<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let storage: Storage
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { storage.fields[key.stringValue] = .null }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            storage.fields[key.stringValue] = try ModelEncoder.field(value, key: key)
        }

        // Synthesized conformances skip nil optionals; a property that is nil is a null value.
        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
            storage.fields[key.stringValue] = try value.map { try ModelEncoder.field($0, key: key) } ?? .null
        }
        mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try present(value, key) }
        mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try present(value, key) }

        private mutating func present<T: Encodable>(_ value: T?, _ key: Key) throws {
            storage.fields[key.stringValue] = try value.map { try ModelEncoder.field($0, key: key) } ?? .null
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            Refusing(codingPath: [key]).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { Refusing(codingPath: [key]).unkeyedContainer() }
        mutating func superEncoder() -> any Encoder { Refusing(codingPath: []) }
        mutating func superEncoder(forKey key: Key) -> any Encoder { Refusing(codingPath: [key]) }
    }

    /// One property's value.
    static func field<T: Encodable>(_ value: T, key: some CodingKey) throws -> Field {
        switch value {
        case let v as String: return .value(.string(v))
        case let v as Bool: return .value(.bool(v))
        case let v as Int: return .value(.integer(Int64(v)))
        case let v as Int64: return .value(.integer(v))
        case let v as Int32: return .value(.integer(Int64(v)))
        case let v as Int16: return .value(.integer(Int64(v)))
        case let v as Int8: return .value(.integer(Int64(v)))
        case let v as UInt32: return .value(.integer(Int64(v)))
        case let v as UInt16: return .value(.integer(Int64(v)))
        case let v as UInt8: return .value(.integer(Int64(v)))
        case let v as UInt:
            guard let i = Int64(exactly: v) else { throw overflow(key, v) }
            return .value(.integer(i))
        case let v as UInt64:
            guard let i = Int64(exactly: v) else { throw overflow(key, v) }
            return .value(.integer(i))
        case let v as Double: return .value(.double(v))
        case let v as Float: return .value(.double(Double(v)))
        case let v as Date: return .value(Value(v))
        case let v as Data: return .value(.bytes(v))
        case let v as UUID: return .value(.uuid(v))
        case let v as Asset: return .value(.asset(v))
        case let v as ObjectID: return .reference(v)
        case let v as [ObjectID]: return .toMany(v)
        case let v as Set<ObjectID>: return .toMany(v.sorted())
        case let v as Value: return .value(v)
        default:
            // A type that encodes as one plain value (a raw-value enum, a wrapper).
            let single = SingleCapture(codingPath: [key])
            try value.encode(to: single)
            guard let captured = single.box.field else {
                throw EncodingError.invalidValue(value, .init(codingPath: [key], debugDescription: "\(T.self) encodes no value"))
            }
            return captured
        }
    }

    private static func overflow(_ key: some CodingKey, _ value: some BinaryInteger) -> EncodingError {
        EncodingError.invalidValue(value, .init(codingPath: [key], debugDescription: "\(value) does not fit a 64-bit signed integer"))
    }

    final class Box { var field: Field? }

    /// An encoder for a property whose type encodes itself as a single value.
    struct SingleCapture: Encoder, SingleValueEncodingContainer {
        let codingPath: [any CodingKey]
        let box = Box()
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> { Refusing(codingPath: codingPath).container(keyedBy: type) }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { Refusing(codingPath: codingPath).unkeyedContainer() }
        func singleValueContainer() -> any SingleValueEncodingContainer { self }

        mutating func encodeNil() throws { box.field = .null }
        mutating func encode<T: Encodable>(_ value: T) throws {
            box.field = try ModelEncoder.field(value, key: AnyKey(codingPath.last?.stringValue ?? "value"))
        }
    }

    /// Nested structures have no attribute type to go to: encoding one fails with its path.
    struct Refusing: Encoder {
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(FailingKeyed<Key>(codingPath: codingPath))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { FailingUnkeyed(codingPath: codingPath) }
        func singleValueContainer() -> any SingleValueEncodingContainer { FailingUnkeyed(codingPath: codingPath) }
    }

    static func nested(_ path: [any CodingKey]) -> EncodingError {
        let name = path.map(\.stringValue).joined(separator: ".")
        return EncodingError.invalidValue(name, .init(codingPath: path, debugDescription: "\(name) is a nested structure; a model's properties are plain values, ObjectIDs or [ObjectID]"))
    }

    struct FailingKeyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let codingPath: [any CodingKey]
        mutating func encodeNil(forKey key: Key) throws { throw nested(codingPath) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw nested(codingPath) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(FailingKeyed<NestedKey>(codingPath: codingPath))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { FailingUnkeyed(codingPath: codingPath) }
        mutating func superEncoder() -> any Encoder { Refusing(codingPath: codingPath) }
        mutating func superEncoder(forKey key: Key) -> any Encoder { Refusing(codingPath: codingPath) }
    }

    struct FailingUnkeyed: UnkeyedEncodingContainer, SingleValueEncodingContainer {
        let codingPath: [any CodingKey]
        var count: Int { 0 }
        mutating func encodeNil() throws { throw nested(codingPath) }
        mutating func encode<T: Encodable>(_ value: T) throws { throw nested(codingPath) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(FailingKeyed<NestedKey>(codingPath: codingPath))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> any Encoder { Refusing(codingPath: codingPath) }
    }
}

/// A coding key made from a string (for paths in errors).
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
