import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Testing

/// A zone's settings naming a key twice in one object are refused: a decoder keeps one of the two
/// silently, and something in front of the server may read the other.
@Suite("Duplicate JSON keys")
struct DuplicateJSONKeysTests {
    @Test("a key twice in one object is found (escaped or not, at any depth); the same key in different objects, in arrays or inside strings is not", arguments: [
        (#"{"access": "shared", "access": "private"}"#, "access"),
        (#"{"grants": {"bob": "read", "bob": "readWrite"}}"#, "bob"),
        (#"{"grants": {"bob": "read", "\u0062ob": "readWrite"}}"#, "bob"),
        (#"{"a": [{"x": 1}, {"x": 2, "x": 3}]}"#, "x"),
        (#"{"a": {"b": 1}, "c": {"b": 2}, "a": 3}"#, "a"),
        (#"{"a": {"b": 1}, "c": {"b": 2}}"#, nil),
        (#"{"grants": {"bob": "read"}, "access": "grants"}"#, nil),
        (#"{"a": "\"a\": 1, \"a\": 2"}"#, nil),
        (#"["a", "a", {"a": 1}]"#, nil),
        (#"{"a": 1, "b": [1, 2], "c": {"a": 1}}"#, nil),
        (#"{"unterminated": "x"#, nil),
        (#"{"a\\": 1, "b": {"c": [1, {"d": 2}], "d": 3}, "a\\": 4}"#, "a\\"),
        (#"{}"#, nil),
    ] as [(String, String?)])
    func found(json: String, duplicate: String?) {
        #expect(DuplicateJSONKeys.first(in: Array(json.utf8))?.key == duplicate, "\(json)")
    }

    @Test("a body it cannot judge is a problem, not a pass: a key that does not decode, nesting past the limit")
    func failsClosed() {
        // A lone surrogate in a key, in an object whose value nothing decodes.
        let lone = #"{"x": {"\ud800": 1}, "grants": {}}"#
        #expect(DuplicateJSONKeys.first(in: Array(lone.utf8)) == .undecodableKey(offset: 7))
        var invalid = Array(#"{"#.utf8) + [0x22, 0xFF, 0x22] + Array(#": 1}"#.utf8)
        #expect(DuplicateJSONKeys.first(in: invalid) == .undecodableKey(offset: 1))
        invalid = Array(String(repeating: "[", count: DuplicateJSONKeys.maxDepth + 1).utf8)
        #expect(DuplicateJSONKeys.first(in: invalid) == .tooDeep(offset: DuplicateJSONKeys.maxDepth))
        #expect(DuplicateJSONKeys.first(in: Array(String(repeating: "[", count: DuplicateJSONKeys.maxDepth).utf8)) == nil)
    }

    @Test("the scan is linear: an object of 200,000 distinct keys, then one twice, is judged at once")
    func manyKeys() {
        var json = "{"
        for i in 0..<200_000 { json += "\"k\(i)\": 1, " }
        json += "\"k7\": 2}"
        #expect(DuplicateJSONKeys.first(in: Array(json.utf8)) == .duplicate(key: "k7", offset: json.utf8.count - #""k7": 2}"#.utf8.count))
    }

    @Test("a PUT of a zone whose settings name a key twice is 400 badRequest naming the key, and changes nothing")
    func refusedByServer() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.createZone("board", #"{"access": "shared", "grants": {"bob": "read"}}"#)
            for body in [#"{"grants": {"bob": "read", "bob": "readWrite"}}"#, #"{"access": "private", "access": "public"}"#] {
                let refused = try await client.execute(uri: "/v1/zones/board", method: .put, headers: auth(Token.alice), body: ByteBuffer(string: body))
                #expect(refused.status == .badRequest)
                let error = try errorBody(refused)
                #expect(error.code == "badRequest" && error.message.contains("twice"), "\(error.message)")
            }
            let zone = try await client.execute(uri: "/v1/zones/board", method: .get, headers: auth(Token.alice))
            let description = try JSONDecoder().decode(ZoneDescription.self, from: zone.body.data)
            #expect(description.access == .shared && description.grants == ["bob": .read])
        }
    }
}
