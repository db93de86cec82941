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
    ] as [(String, String?)])
    func found(json: String, duplicate: String?) {
        #expect(DuplicateJSONKeys.first(in: Array(json.utf8))?.key == duplicate, "\(json)")
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
