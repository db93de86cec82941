import Foundation
import Strata
import StrataSync
import StrataProtocol
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

let syncSchema = Schema {
    Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("draft", .string, localOnly: true)])
}

@Suite("Sync engine logic (in-memory transport)")
struct SyncEngineTests {
    @Test("Two stores converge; a restarted engine resumes without pushing or applying twice")
    func convergeAndResume() async throws {
        let dir = TemporaryDirectory()
        let transport = InMemoryTransport()
        var options = SyncOptions()
        options.pushBatchSize = 3
        options.pullLimit = 4
        let a = try await Store.open(at: dir.sub("a"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        let b = try await Store.open(at: dir.sub("b"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        for i in 0..<10 { try await a.transaction { tx in try tx.insert("Note", ["title": .string("a\(i)"), "draft": "mine"]) } }
        for i in 0..<5 { try await b.transaction { tx in try tx.insert("Note", ["title": .string("b\(i)")]) } }
        let engineA = try SyncEngine(store: a, transport: transport, zone: "z", options: options)
        let engineB = try SyncEngine(store: b, transport: transport, zone: "z", options: options)
        let first = try await engineA.sync()
        #expect(first.pushedTransactions == 11)  // the schema transaction and ten inserts
        try await engineB.sync()
        try await engineA.sync()
        #expect(a.digest() == b.digest())
        #expect(b.count("Note") == 15)
        #expect(b.fetch("Note").allSatisfy { $0["draft"] == .null })  // local-only never pushed

        // A new engine on the same store reads the persisted cursor: nothing to push or apply.
        let appendsBefore = transport.appends.load(ordering: .relaxed)
        let again = try SyncEngine(store: a, transport: transport, zone: "z", options: options)
        let report = try await again.sync()
        #expect(report.pushedTransactions == 0)
        #expect(report.appliedEvents == 0)
        #expect(transport.appends.load(ordering: .relaxed) == appendsBefore)
    }

    @Test("A lost cursor is recovered from the server's sequence-gap answer, without duplicates")
    func lostCursor() async throws {
        let dir = TemporaryDirectory()
        let transport = InMemoryTransport()
        let a = try await Store.open(at: dir.sub("a"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        for i in 0..<4 { try await a.transaction { tx in try tx.insert("Note", ["title": .string("n\(i)")]) } }
        try await SyncEngine(store: a, transport: transport, zone: "z").sync()
        try FileManager.default.removeItem(atPath: a.directory + "/sync-z.json")
        try await a.transaction { tx in try tx.insert("Note", ["title": "later"]) }
        try await SyncEngine(store: a, transport: transport, zone: "z").sync()
        let log = transport.zones.withLock { $0["z"]?.log ?? [] }
        #expect(log.count == 6)  // schema + 4 + 1, each once
    }
}
