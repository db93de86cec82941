import Foundation

/// Finds a key that appears twice in one JSON object. `JSONDecoder` keeps one of the two values
/// silently, so `{"grants": {"bob": "read"}, "grants": {"bob": "readWrite"}}` would mean whatever
/// the decoder happens to keep — and a proxy or audit log in front of the server may read the
/// other one. The server refuses such a body instead.
///
/// A single pass over the bytes, not a parser: it leaves every other error to the decoder. Keys
/// are compared after unescaping (`"a"` and `"\u0061"` are the same key). It fails closed: a key
/// it cannot decode, or nesting deeper than ``maxDepth``, is a problem too (a body it cannot
/// judge is refused, not waved through). Linear in the body: each object's keys are one set,
/// changed in place.
enum DuplicateJSONKeys {
    /// Deeper than any settings or users file needs (they nest three levels), shallow enough that
    /// a body of `[[[[…` costs nothing.
    static let maxDepth = 64

    /// What makes a body ambiguous.
    enum Problem: Equatable, CustomStringConvertible {
        /// `key` named twice in one object, again at byte `offset`.
        case duplicate(key: String, offset: Int)
        /// A key at byte `offset` that does not decode as a JSON string.
        case undecodableKey(offset: Int)
        /// Nesting deeper than ``maxDepth`` at byte `offset`.
        case tooDeep(offset: Int)

        var description: String {
            switch self {
            case .duplicate(let key, let offset): "names \"\(key.prefix(64))\" twice in one object (again at byte \(offset))"
            case .undecodableKey(let offset): "has a key that is not a valid JSON string at byte \(offset)"
            case .tooDeep(let offset): "nests deeper than \(DuplicateJSONKeys.maxDepth) levels at byte \(offset)"
            }
        }

        /// The duplicated key, if that is the problem.
        var key: String? {
            if case .duplicate(let key, _) = self { key } else { nil }
        }
    }

    /// The first problem in `bytes`, or `nil` when every object names each key once (or the body
    /// is not JSON enough to tell: the decoder says why).
    static func first(in bytes: [UInt8]) -> Problem? {
        // One entry per open object or array: an object's keys so far, or `nil` for an array.
        var open: [Set<String>?] = []
        // Whether the next string in the innermost object is a key (after `{` or `,`).
        var expectingKey = false
        let decoder = JSONDecoder()
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard open.count < maxDepth else { return .tooDeep(offset: index) }
                let isObject = bytes[index] == UInt8(ascii: "{")
                open.append(isObject ? [] : nil)
                expectingKey = isObject
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !open.isEmpty { open.removeLast() }
                expectingKey = false
            case UInt8(ascii: ","):
                // In an object, the next string is a key; in an array, a value.
                expectingKey = open.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                let start = index
                var escaped = false
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { escaped = true; index += 1 }
                    index += 1
                }
                guard index < bytes.count else { return nil }
                if expectingKey, !open.isEmpty, open[open.count - 1] != nil {
                    let key: String
                    if escaped {
                        guard let decoded = try? decoder.decode(String.self, from: Data(bytes[start...index])) else {
                            return .undecodableKey(offset: start)
                        }
                        key = decoded
                    } else {
                        guard let plain = String(validating: bytes[(start + 1)..<index], as: UTF8.self) else {
                            return .undecodableKey(offset: start)
                        }
                        key = plain
                    }
                    // In place: the set is not copied on every key.
                    if open[open.count - 1]?.insert(key).inserted == false {
                        return .duplicate(key: key, offset: start)
                    }
                    expectingKey = false
                }
            default:
                break
            }
            index += 1
        }
        return nil
    }
}
