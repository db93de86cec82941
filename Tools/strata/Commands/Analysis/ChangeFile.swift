import Foundation
import Strata
import StrataCore

/// The changes `strata apply` reads: JSON Lines, one change per line, all committed as one
/// transaction.
///
///     {"op": "insert", "entity": "Note", "id": "…", "values": {"title": "Milk", "folder": "…"}}
///     {"op": "update", "id": "…", "values": {"pinned": true}}
///     {"op": "delete", "id": "…"}
///     {"op": "add", "id": "…", "relationship": "tags", "target": "…"}
///     {"op": "remove", "id": "…", "relationship": "tags", "target": "…"}
///
/// `id` is optional for an insert (a new one is made). Values are JSON typed by the schema:
/// dates as ISO 8601 strings (microseconds kept), bytes as base64, UUIDs and references as UUID
/// strings, `null` to clear. Blank lines are skipped. Every error names the line and the field.
struct ChangeFile {
    enum Operation: String, CaseIterable {
        case insert, update, delete, add, remove
    }
    struct Change {
        var line: Int
        var operation: Operation
        var entity: String?
        var id: ObjectID?
        var values: [String: JSONValue]
        var relationship: String?
        var target: ObjectID?
    }

    var changes: [Change] = []

    /// Parses the whole file before anything is applied.
    ///
    /// - Throws: ``CLIError`` naming the line and the field.
    init(text: String, source: String) throws {
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty else { continue }
            changes.append(try Self.parse(line, number: i + 1, source: source))
        }
        guard !changes.isEmpty else { throw CLIError("\(source): no changes") }
    }

    private static func parse(_ line: String, number: Int, source: String) throws -> Change {
        func fail(_ field: String?, _ message: String) -> CLIError {
            CLIError("\(source):\(number)\(field.map { ", field \"\($0)\"" } ?? ""): \(message)")
        }
        let object: [String: JSONValue]
        do {
            guard case .object(let parsed) = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) else {
                throw fail(nil, "expected a JSON object")
            }
            object = parsed
        } catch let error as CLIError {
            throw error
        } catch {
            throw fail(nil, "not valid JSON (\(Self.reason(error)))")
        }
        let known: Set<String> = ["op", "entity", "id", "values", "relationship", "target"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw fail(unknown, "unknown key (expected \(known.sorted().joined(separator: ", ")))")
        }
        guard case .string(let opText)? = object["op"] else { throw fail("op", "missing; one of \(Operation.allCases.map(\.rawValue).joined(separator: ", "))") }
        guard let operation = Operation(rawValue: opText) else {
            throw fail("op", "unknown operation \"\(opText)\"; one of \(Operation.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        func string(_ key: String, required: Bool) throws -> String? {
            switch object[key] {
            case .string(let s)?: return s
            case nil where !required: return nil
            case nil: throw fail(key, "missing (\(operation.rawValue) needs it)")
            case let other?: throw fail(key, "expected a string, got \(other.typeName)")
            }
        }
        func objectID(_ key: String, required: Bool) throws -> ObjectID? {
            guard let text = try string(key, required: required) else { return nil }
            guard let id = ObjectID(text) else { throw fail(key, "not a UUID: \"\(text)\"") }
            return id
        }
        var change = Change(line: number, operation: operation, entity: try string("entity", required: operation == .insert),
                            id: try objectID("id", required: operation != .insert), values: [:])
        switch object["values"] {
        case .object(let values)?:
            guard operation == .insert || operation == .update else { throw fail("values", "\(operation.rawValue) takes no values") }
            change.values = values
        case nil:
            if operation == .update { throw fail("values", "missing (update needs it)") }
        case let other?:
            throw fail("values", "expected an object, got \(other.typeName)")
        }
        if operation == .add || operation == .remove {
            change.relationship = try string("relationship", required: true)
            change.target = try objectID("target", required: true)
        } else if object["relationship"] != nil || object["target"] != nil {
            throw fail(object["relationship"] != nil ? "relationship" : "target", "only add and remove take it")
        }
        return change
    }

    private static func reason(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            return (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String ?? context.debugDescription
        }
        return "\(error)"
    }

    /// Applies every change in one transaction of `tx`; the first failure throws (and the store
    /// rolls the whole transaction back). Returns the IDs inserted.
    func apply(in tx: Transaction, schema: Schema, source: String) throws -> [ObjectID] {
        var inserted: [ObjectID] = []
        for change in changes {
            func fail(_ field: String?, _ message: String) -> CLIError {
                CLIError("\(source):\(change.line)\(field.map { ", field \"\($0)\"" } ?? ""): \(message)")
            }
            let entityName: String
            if let named = change.entity {
                entityName = named
                if change.operation != .insert, let id = change.id, let actual = tx.object(id)?.entity, actual != named {
                    throw fail("entity", "object \(id) is a \(actual), not a \(named)")
                }
            } else if let id = change.id, let existing = tx.object(id) {
                entityName = existing.entity
            } else {
                throw fail("id", "no object \(change.id?.description ?? "") exists in the store")
            }
            guard let entity = schema.entity(entityName) else { throw fail("entity", "no entity \(entityName) in the store's schema") }
            var values: [String: Value] = [:]
            for (key, json) in change.values {
                values[key] = try Self.value(json, for: key, of: entity, fail: { fail("values.\(key)", $0) })
            }
            do {
                switch change.operation {
                case .insert:
                    inserted.append(try tx.insert(entityName, id: change.id ?? ObjectID(), values))
                case .update:
                    try tx.update(change.id ?? ObjectID(), values)
                case .delete:
                    try tx.delete(change.id ?? ObjectID())
                case .add:
                    try tx.add(change.id ?? ObjectID(), change.relationship ?? "", change.target ?? ObjectID())
                case .remove:
                    try tx.remove(change.id ?? ObjectID(), change.relationship ?? "", change.target ?? ObjectID())
                }
            } catch let error as StoreError {
                throw fail(error.attribute.map { "values.\($0)" } ?? (change.relationship != nil ? "relationship" : nil), "\(error)")
            }
        }
        return inserted
    }

    /// A JSON value as the attribute or to-one relationship `key` of `entity` takes it.
    static func value(_ json: JSONValue, for key: String, of entity: Entity, fail: (String) -> CLIError) throws -> Value {
        if json == .null { return .null }
        if let relationship = entity.relationship(key) {
            guard !relationship.isToMany else { throw fail("\(entity.name).\(key) is to-many: use add and remove") }
            guard case .string(let text) = json, let id = ObjectID(text) else { throw fail("expected the UUID of a \(relationship.destination), got \(json.typeName)") }
            return .reference(id)
        }
        guard let attribute = entity.attribute(key) else {
            throw fail("\(entity.name) has no attribute or relationship \(key)")
        }
        switch (attribute.type, json) {
        case (.string, .string(let s)): return .string(s)
        case (.integer, .integer(let i)): return .integer(i)
        case (.double, .double(let d)): return .double(d)
        case (.double, .integer(let i)): return .double(Double(i))
        case (.bool, .bool(let b)): return .bool(b)
        case (.date, .string(let s)):
            guard let micros = DateText.microseconds(s) else { throw fail("not an ISO 8601 date: \"\(s)\"") }
            return .date(micros)
        case (.bytes, .string(let s)):
            guard let data = Data(base64Encoded: s) else { throw fail("not base64: \"\(s.prefix(40))\"") }
            return .bytes(data)
        case (.uuid, .string(let s)):
            guard let uuid = UUID(uuidString: s) else { throw fail("not a UUID: \"\(s)\"") }
            return .uuid(uuid)
        default:
            throw fail("expected \(attribute.type.rawValue) for \(entity.name).\(key), got \(json.typeName)")
        }
    }
}

/// ISO 8601 dates to the microsecond, as `apply` reads them.
enum DateText {
    static func microseconds(_ text: String) -> Int64? {
        text.hasPrefix("@") ? nil : TimeArgument.microseconds(text)
    }
}
