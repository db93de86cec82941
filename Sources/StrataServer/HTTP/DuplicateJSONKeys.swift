import Foundation

/// Finds a key that appears twice in one JSON object. `JSONDecoder` keeps one of the two values
/// silently, so `{"grants": {"bob": "read"}, "grants": {"bob": "readWrite"}}` would mean whatever
/// the decoder happens to keep — and a proxy or audit log in front of the server may read the
/// other one. The server refuses such a body instead.
///
/// A scan of the bytes, not a parser: it assumes nothing about the body beyond what it checks and
/// leaves every other error to the decoder. Keys are compared after unescaping (`"a"` and
/// `"\u0061"` are the same key). Nesting is bounded by the body, which the server bounds.
enum DuplicateJSONKeys {
    /// The first key found twice in one object, with the byte offset of its second occurrence;
    /// `nil` when there is none (or the body is not JSON enough to tell: the decoder says why).
    static func first(in bytes: [UInt8]) -> (key: String, offset: Int)? {
        // One set of keys per open object; `nil` for an open array.
        var open: [Set<String>?] = []
        // Whether the next string in the innermost object is a key (after `{` or `,`).
        var expectingKey = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                open.append([])
                expectingKey = true
            case UInt8(ascii: "["):
                open.append(nil)
                expectingKey = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !open.isEmpty { open.removeLast() }
                expectingKey = false
            case UInt8(ascii: ","):
                // In an object, the next string is a key; in an array, a value.
                expectingKey = open.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                guard index < bytes.count else { return nil }
                if expectingKey, var keys = open.last ?? nil {
                    guard let key = try? JSONDecoder().decode(String.self, from: Data(bytes[start...index])) else { return nil }
                    if keys.contains(key) { return (key, start) }
                    keys.insert(key)
                    open[open.count - 1] = keys
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
