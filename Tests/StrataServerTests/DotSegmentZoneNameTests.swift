import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import StrataServer
import StrataProtocol
import Testing
import StrataCore

/// Zone names `.` and `..` fit the name rule (`[A-Za-z0-9._-]`) but not a URL: clients remove such
/// path segments, so that `/v1/zones/../push` would reach `/v1/push`. They cannot be created.
@Suite("zone names that are dot segments")
struct DotSegmentZoneNameTests {
    @Test("PUT /v1/zones/. and /v1/zones/.. answer 400 badRequest and create nothing", arguments: [".", ".."])
    func dotSegmentsRefused(_ name: String) async throws {
        let server = try TestServer(label: "\(#function)-\(name.count)")
        try await server.test { client in
            let response = try await client.execute(uri: "/v1/zones/\(name)", method: .put, headers: auth(Token.alice))
            #expect(response.status == .badRequest, "\(String(buffer: response.body))")
            #expect(String(buffer: response.body).contains("\"badRequest\""))
            // Names that merely contain dots stay valid.
            let dotted = try await client.execute(uri: "/v1/zones/\(name)notes", method: .put, headers: auth(Token.alice))
            #expect(dotted.status == .created)
            #expect(try await server.storage.zones().map(\.name) == ["\(name)notes"])
        }
    }
}
