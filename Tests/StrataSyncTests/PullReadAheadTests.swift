import Foundation
import Synchronization
@_spi(StrataInternals) import Strata
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

/// Forwards to a real transport and notes the token each pull asks after. Pulls after
/// `failingAfter` fail once, when set; with `damageFirstPage`, the first page's last transaction
/// arrives damaged.
private final class PullWatchingTransport: SyncTransport, Sendable {
    let base: any SyncTransport
    let asked = Mutex<[String?]>([])
    let failOnce = Mutex<String?>(nil)
    /// Whether the first page's last transaction arrives damaged (the store refuses the page).
    let damageFirstPage: Bool

    init(_ base: any SyncTransport, failingAfter token: String? = nil, damageFirstPage: Bool = false) {
        self.base = base
        self.damageFirstPage = damageFirstPage
        failOnce.withLock { $0 = token }
    }

    func tokensAsked() -> [String?] { asked.withLock { $0 } }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { try await base.push(zone: zone, transactions: transactions) }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        asked.withLock { $0.append(token) }
        let fail = failOnce.withLock { failing -> Bool in
            guard let expected = failing, expected == token else { return false }
            failing = nil
            return true
        }
        if fail { throw SyncError(.transport, "the answer to this pull was dropped") }
        var page = try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
        if damageFirstPage, token == nil, !page.transactions.isEmpty {
            page.transactions[page.transactions.count - 1] = [0xFF, 0xFF, 0xFF, 0xFF]
        }
        return page
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await base.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
}

/// A catch-up asks for the next page while it applies the one it has, so that the server's read
/// and the download overlap the store's apply; what it then applies is exactly the zone, in order.
@Suite("Pull pages read ahead")
struct PullReadAheadTests {
    /// A zone of 6,000 one-insert transactions (and the schema's), pushed by a writer: 5 pages
    /// of 1,500.
    func fill(_ url: URL, _ dir: TemporaryDirectory) async throws -> Store {
        let writer = try await Store.open(at: dir.sub("writer"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
        for i in 0..<6_000 {
            try await writer.transaction { tx in _ = try tx.insert("Tag", ["label": .string("tag \(i)")]) }
        }
        try await SyncEngine(store: writer, server: url, zone: "tags", credentials: "alice-secret").sync()
        return writer
    }

    @Test("a catch-up with read ahead ends equal to the writer, and no page is asked for twice")
    func nextPageIsAskedEarly() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let writer = try await fill(url, dir)
            let reader = try await Store.open(at: dir.sub("reader"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let watching = PullWatchingTransport(HTTPSyncTransport(server: url, bearer: "alice-secret"))
            var options = SyncOptions()
            options.pullLimit = 1_500
            let report = try await SyncEngine(store: reader, transport: watching, zone: "tags", options: options).sync()
            let asked = watching.tokensAsked()
            // 6,000 inserts and the writer's schema: 5 pages.
            #expect(report.pulledTransactions == 6_002)
            #expect(reader.count("Tag") == 6_000)
            #expect(reader.digest() == writer.digest())
            // Every page once, in order: each asked after the token the page before it ended
            // with. (Whether a read ahead started before the apply ended depends on the
            // scheduler; the test after this one shows it does not wait for it.)
            #expect(asked.count == 5)
            #expect(Set(asked).count == asked.count, "a page was asked for twice")
            try await reader.close()
            try await writer.close()
        }
    }

    @Test("the page after one the store refuses was already asked for: the read ahead does not wait for the apply")
    func readAheadDoesNotWaitForTheApply() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let writer = try await fill(url, dir)
            let reader = try await Store.open(at: dir.sub("reader"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let watching = PullWatchingTransport(HTTPSyncTransport(server: url, bearer: "alice-secret"), damageFirstPage: true)
            var options = SyncOptions()
            options.pullLimit = 1_500
            options.maxRetries = 0
            await #expect(throws: SyncError.self) {
                try await SyncEngine(store: reader, transport: watching, zone: "tags", options: options).sync()
            }
            // The refused page was never applied, so only a read ahead asks for the page after
            // it. (It is asked from a task of its own: given a moment to start.)
            for _ in 0..<200 where watching.tokensAsked().count < 2 { try await Task.sleep(for: .milliseconds(25)) }
            let tokens = watching.tokensAsked()
            #expect(tokens.count == 2 && tokens[0] == nil && tokens[1] != nil, "pulls after: \(tokens)")
            #expect(reader.count("Tag") == 0, "a page with a damaged transaction was applied")
            try await reader.close()
            try await writer.close()
        }
    }

    @Test("a read ahead that fails is asked again in turn, and the catch-up still ends complete and in order")
    func failedReadAheadIsAskedAgain() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let writer = try await fill(url, dir)
            // Where the second page starts: a first reader's first pull tells.
            let first = try await HTTPSyncTransport(server: url, bearer: "alice-secret").pull(zone: ZoneReference("tags"), after: nil, limit: 1_500, wait: nil)
            #expect(first.moreComing)

            let reader = try await Store.open(at: dir.sub("reader"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let watching = PullWatchingTransport(HTTPSyncTransport(server: url, bearer: "alice-secret"), failingAfter: first.nextToken)
            var options = SyncOptions()
            options.pullLimit = 1_500
            let report = try await SyncEngine(store: reader, transport: watching, zone: "tags", options: options).sync()
            let asked = watching.tokensAsked()
            #expect(report.pulledTransactions == 6_002)
            #expect(reader.digest() == writer.digest())
            // The failed read ahead, then the same page asked again in turn, then the rest.
            #expect(asked.count == 6)
            #expect(asked.filter { $0 == first.nextToken }.count == 2)
            #expect(watching.failOnce.withLock { $0 } == nil, "the read ahead was not made")
            try await reader.close()
            try await writer.close()
        }
    }
}
