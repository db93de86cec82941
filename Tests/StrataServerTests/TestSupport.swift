import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable public import StrataServer
import StrataLog
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// The events of one transaction of `replica` with the given sequences.
func transaction(_ replica: ReplicaID, _ sequences: ClosedRange<UInt64>, title: String = "x") -> TransactionRecord {
    TransactionRecord(replica: replica, events: sequences.map { sequence in
        Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
              change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string(title)]))
    })
}

func pushed(_ record: TransactionRecord) throws -> PushedTransaction {
    try #require(PushedTransaction(record))
}

/// A push body of `records`.
func pushBody(_ records: [TransactionRecord]) -> ByteBuffer {
    ByteBuffer(bytes: TransactionFrames.encode(records.map { $0.encoded() }))
}

/// In these tests a zone written as a string literal is alice's (`"notes"`) unless it names its
/// owner (`"bob/notes"`).
extension ZoneID: ExpressibleByStringLiteral, ExpressibleByUnicodeScalarLiteral, ExpressibleByExtendedGraphemeClusterLiteral {
    public init(stringLiteral value: String) {
        let parts = value.split(separator: "/", maxSplits: 1).map(String.init)
        self = parts.count == 2 ? ZoneID(owner: parts[0], name: parts[1]) : ZoneID(owner: "alice", name: value)
    }
}

extension ZoneStorage {
    /// A push by the zone's owner.
    func append(zone: ZoneID, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: zone, user: zone.owner, replica: replica, transactions: transactions)
    }
}

/// Bearer tokens of the test users.
enum Token {
    static let alice = "alice-token"
    static let bob = "bob-token"
    static let carol = "carol-token"
}

func auth(_ token: String) -> HTTPFields {
    [.authorization: "Bearer \(token)"]
}

/// A server over an embedded storage in a temporary directory, with users alice, bob and carol.
struct TestServer {
    let directory: TemporaryDirectory
    let storage: EmbeddedZoneStorage
    let app: StrataServerApp

    init(limits: ServerConfiguration.Limits = ServerConfiguration.Limits(), clock: ServerClock = .system, webhook: WebhookConfiguration? = nil,
         label: String = #function) throws {
        directory = TemporaryDirectory(label)
        // Wired as `strata serve` wires them: the zone logs report their group commits to /metrics.
        let metrics = ServerMetrics()
        var options = EmbeddedZoneStorage.Options()
        options.log.commitObserver = metrics.commitObserver
        storage = try EmbeddedZoneStorage(directory: directory.sub("data"), options: options)
        let users = try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol])
        var configuration = ServerConfiguration(port: 0, limits: limits)
        configuration.webhook = webhook
        app = StrataServerApp(storage: storage, users: users, configuration: configuration, clock: clock, metrics: metrics)
    }

    /// Runs `body` against the router (or a live server), then closes the storage.
    func test<T: Sendable>(_ setup: TestingSetup = .router, _ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        do {
            let value = try await app.buildApplication().test(setup, body)
            try await storage.close()
            return value
        } catch {
            try? await storage.close()
            throw error
        }
    }
}

extension TestClientProtocol {
    /// Creates `zone` as `token`'s user with `settings`; expects 201.
    @discardableResult
    func createZone(_ zone: String, as token: String = Token.alice, _ settings: String = "") async throws -> ZoneDescription {
        let response = try await execute(uri: "/v1/zones/\(zone)", method: .put, headers: auth(token), body: ByteBuffer(string: settings))
        #expect(response.status == .created, "\(String(buffer: response.body))")
        return try JSONDecoder().decode(ZoneDescription.self, from: response.body.data)
    }

    /// The zone's end token as its owner sees it.
    func endToken(_ zone: String, as token: String = Token.alice) async throws -> String {
        let response = try await execute(uri: zoneURI(zone), method: .get, headers: auth(token))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try JSONDecoder().decode(ZoneDescription.self, from: response.body.data).token
    }

    func push(_ zone: String, _ records: [TransactionRecord], as token: String = Token.alice) async throws -> TestResponse {
        try await execute(uri: zoneURI(zone, "/push"), method: .post, headers: auth(token), body: pushBody(records))
    }

    func pull(_ zone: String, query: String = "", as token: String = Token.alice) async throws -> TestResponse {
        try await execute(uri: zoneURI(zone, "/changes", query: query), method: .get, headers: auth(token))
    }
}

/// The path of a zone's endpoint: `"notes"` is the caller's own zone, `"alice/notes"` alice's
/// (`?owner=alice`).
func zoneURI(_ zone: String, _ suffix: String = "", query: String = "") -> String {
    let parts = zone.split(separator: "/", maxSplits: 1).map(String.init)
    var items = query.isEmpty ? [] : [query]
    if parts.count == 2 { items.append("owner=\(parts[0])") }
    let name = parts.last ?? zone
    return "/v1/zones/\(name)\(suffix)" + (items.isEmpty ? "" : "?" + items.joined(separator: "&"))
}

/// The error code and body of an error answer.
func errorBody(_ response: TestResponse) throws -> (code: String, message: String, json: [String: Any]) {
    let object = try JSONSerialization.jsonObject(with: response.body.data) as? [String: Any]
    let error = try #require(object?["error"] as? [String: Any], "not an error body: \(String(buffer: response.body))")
    return (error["code"] as? String ?? "", error["message"] as? String ?? "", error)
}

/// The transactions of a pull answer.
func pulledTransactions(_ response: TestResponse) throws -> [TransactionRecord] {
    try TransactionFrames.decode(Array(buffer: response.body)).map { try TransactionRecord(decoding: $0) }
}

extension TestResponse {
    var nextToken: String? { headers[HTTPField.Name(StrataHeader.nextToken)!] }
    var moreComing: String? { headers[HTTPField.Name(StrataHeader.moreComing)!] }
}

extension ByteBuffer {
    /// The readable bytes.
    var data: Data { Data(readableBytesView) }
}
