import Dispatch
import Foundation
import Strata
import StrataCore

/// JSON for `--json`: keys sorted, so output is stable for scripts and tests.
enum JSONOutput {
    static func string(_ value: some Encodable, pretty: Bool = true) throws -> String {
        let encoder = JSONOutput.encoder(pretty: pretty)
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw CLIError("cannot encode the output as JSON: \(error)")
        }
    }
}

extension JSONOutput {
    /// The encoder every `--json` output is written with.
    static func encoder(pretty: Bool) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// A top-level object whose members are encoded at once, one per core, and joined: the same
    /// bytes as ``string(_:pretty:)`` of the value whose synthesized encoding writes these
    /// members (`nil` ones left out), pretty-printed. For outputs of megabytes (`diff --json` of
    /// large stores), where Foundation's encoder was an eighth of the command's time.
    ///
    /// Each member is encoded on its own and indented one level, which is how the encoder
    /// nests it: every line after its first gains two spaces, except the empty line inside an
    /// empty array or object (strings hold no raw line breaks: they are escaped).
    static func prettyObject(_ members: [(key: String, value: (any Encodable & Sendable)?)]) throws -> String {
        let present = members.compactMap { member in member.value.map { (key: member.key, value: $0) } }
            .sorted { $0.key < $1.key }
        guard !present.isEmpty else { return "{\n\n}" }
        let encoded = KeyedSlots<Int, Result<[UInt8], any Error>>()
        DispatchQueue.concurrentPerform(iterations: present.count) { i in
            encoded.set(i, Result {
                let encoder = JSONOutput.encoder(pretty: true)
                let key = try encoder.encode(present[i].key)
                let value: Data
                do {
                    value = try encoder.encode(present[i].value)
                } catch {
                    throw CLIError("cannot encode the output as JSON: \(error)")
                }
                var member: [UInt8] = [0x20, 0x20]
                member.reserveCapacity(key.count + value.count + value.count / 8 + 8)
                member.append(contentsOf: key)
                member.append(contentsOf: [0x20, 0x3A, 0x20])  // " : "
                var previousWasBreak = false
                for byte in value {
                    if previousWasBreak && byte != 0x0A { member.append(contentsOf: [0x20, 0x20]) }
                    member.append(byte)
                    previousWasBreak = byte == 0x0A
                }
                return member
            })
        }
        var out: [UInt8] = [0x7B, 0x0A]  // "{\n"
        for i in present.indices {
            guard let result = encoded.get(i) else { throw CLIError("internal: a member of the output was not encoded") }
            out.append(contentsOf: try result.get())
            out.append(contentsOf: i + 1 < present.count ? [0x2C, 0x0A] : [0x0A])
        }
        out.append(0x7D)  // "}"
        return String(decoding: out, as: UTF8.self)
    }
}

/// A value as JSON: what `export`, `get` and `log` print and what `apply` reads. Strings,
/// numbers and booleans are themselves; dates are ISO 8601 strings (microseconds kept), bytes
/// base64, UUIDs and references their UUID strings — the attribute types in the schema say how
/// to read them back.
enum JSONValue: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(_ value: Value) {
        switch value {
        case .null: self = .null
        case .string(let s): self = .string(s)
        case .integer(let i): self = .integer(i)
        case .double(let d): self = .double(d)
        case .bool(let b): self = .bool(b)
        case .date(let micros): self = .string(JSONValue.isoMicroseconds(micros))
        case .bytes(let data): self = .string(data.base64EncodedString())
        case .uuid(let uuid): self = .string(uuid.uuidString.lowercased())
        case .reference(let id): self = .string(id.description)
        case .asset(let asset):
            var fields: [String: JSONValue] = ["sha256": .string(asset.sha256.hex), "size": .integer(Int64(clamping: asset.byteCount)), "mediaType": .string(asset.mediaType)]
            if let name = asset.fileName { fields["fileName"] = .string(name) }
            self = .object(fields)
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let b = try? container.decode(Bool.self) { self = .bool(b) }
        else if let i = try? container.decode(Int64.self) { self = .integer(i) }
        else if let d = try? container.decode(Double.self) { self = .double(d) }
        else if let s = try? container.decode(String.self) { self = .string(s) }
        else if let a = try? container.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .integer(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }

    /// `2026-11-21T10:15:00.123456Z`: exact to the microsecond, like ``Value/date(_:)``.
    static func isoMicroseconds(_ micros: Int64) -> String {
        let millisecondText = Format.time(microseconds: micros)
        let remainder = ((micros % 1000) + 1000) % 1000
        guard remainder != 0 else { return millisecondText }
        let digits = String(remainder)
        return String(millisecondText.dropLast()) + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// An object as `get`, `export` and `replay --json` print it.
struct ObjectJSON: Codable, Hashable {
    var id: String
    var entity: String
    var values: [String: JSONValue]
    var toMany: [String: [String]]

    init(_ snapshot: ObjectSnapshot) {
        id = snapshot.id.description
        entity = snapshot.entity
        values = snapshot.values.mapValues(JSONValue.init)
        toMany = snapshot.toMany.mapValues { $0.map(\.description) }
    }
}
