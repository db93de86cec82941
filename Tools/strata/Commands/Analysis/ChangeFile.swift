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
/// strings, assets as their reference `{"sha256", "size", "mediaType", "fileName"}` or as a file to
/// attach, `{"file": PATH, "mediaType": TYPE}` (see ``importAttachments(into:source:)``), `null` to
/// clear. Blank lines are skipped. Every error names the line and the field.
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
        case (.asset, .object(let fields)):
            do { return .asset(try Asset(json: fields.mapValues(\.foundationValue))) } catch { throw fail(error.message) }
        default:
            throw fail("expected \(attribute.type.rawValue) for \(entity.name).\(key), got \(json.typeName)")
        }
    }
}

extension ChangeFile {
    /// The keys of an attachment: a value `{"file": PATH, "mediaType": TYPE, "fileName": NAME}`
    /// for an asset attribute (`mediaType` guessed from the extension when left out, `fileName`
    /// the path's last component unless given).
    static let attachmentKeys: Set<String> = ["file", "mediaType", "fileName"]

    /// Copies the file of every attachment into `store` (streamed and hashed: see
    /// `Store.importAsset(contentsOf:mediaType:fileName:)`) and puts the reference in its place,
    /// before the transaction, which then sets it like any asset value. Returns the references.
    ///
    /// - Throws: ``CLIError`` naming the line and the field: an attachment for an attribute that
    ///   is not an asset, an unreadable file, an invalid media type or file name.
    mutating func importAttachments(into store: Store, source: String) async throws -> [Asset] {
        var imported: [Asset] = []
        for index in changes.indices {
            let change = changes[index]
            for (key, json) in change.values {
                guard case .object(let fields) = json, fields["file"] != nil else { continue }
                func fail(_ message: String) -> CLIError { CLIError("\(source):\(change.line), field \"values.\(key)\": \(message)") }
                let entityName = change.entity ?? change.id.flatMap { store.object($0)?.entity }
                if let entityName, let type = store.schema.entity(entityName)?.attribute(key)?.type, type != .asset {
                    throw fail("a file can be attached to an asset attribute only; \(entityName).\(key) is \(type.rawValue)")
                }
                if let unknown = fields.keys.sorted().first(where: { !Self.attachmentKeys.contains($0) }) {
                    throw fail("an attachment has no key \"\(unknown)\" (expected \(Self.attachmentKeys.sorted().joined(separator: ", ")))")
                }
                guard case .string(let path) = fields["file"] else { throw fail("\"file\" must be a path (a string)") }
                var mediaType = MediaType.guess(forPath: path)
                if let given = fields["mediaType"] {
                    guard case .string(let type) = given else { throw fail("\"mediaType\" must be a string") }
                    mediaType = type
                }
                var fileName: String? = URL(fileURLWithPath: path).lastPathComponent
                if let given = fields["fileName"] {
                    switch given {
                    case .string(let name): fileName = name
                    case .null: fileName = nil
                    default: throw fail("\"fileName\" must be a string")
                    }
                }
                guard FileManager.default.isReadableFile(atPath: path) else { throw fail("cannot read the file \(path)") }
                let asset: Asset
                do {
                    asset = try await store.importAsset(contentsOf: URL(fileURLWithPath: path), mediaType: mediaType, fileName: fileName)
                } catch let error as StoreError {
                    throw fail(error.message)
                }
                changes[index].values[key] = JSONValue(.asset(asset))
                imported.append(asset)
            }
        }
        return imported
    }
}

/// A media type from a file's extension, for attachments that do not name one.
enum MediaType {
    static let byExtension: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "heic": "image/heic",
        "webp": "image/webp", "pdf": "application/pdf", "txt": "text/plain", "json": "application/json",
        "mp4": "video/mp4", "mov": "video/quicktime", "m4a": "audio/mp4", "mp3": "audio/mpeg", "zip": "application/zip",
    ]

    static func guess(forPath path: String) -> String {
        byExtension[URL(fileURLWithPath: path).pathExtension.lowercased()] ?? "application/octet-stream"
    }
}

extension JSONValue {
    /// The value as `JSONSerialization` would give it (what `Asset(json:)` reads).
    var foundationValue: Any {
        switch self {
        case .null: NSNull()
        case .bool(let b): b
        case .integer(let i): i
        case .double(let d): d
        case .string(let s): s
        case .array(let a): a.map(\.foundationValue)
        case .object(let o): o.mapValues(\.foundationValue)
        }
    }
}

/// ISO 8601 dates to the microsecond, as `apply` reads them.
enum DateText {
    static func microseconds(_ text: String) -> Int64? {
        text.hasPrefix("@") ? nil : TimeArgument.microseconds(text)
    }
}
