import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// Forwards to an in-memory log and records every token a pull asks after; can spoil the
/// page after one token (a transaction that does not decode) or refuse it once (a dropped
/// answer), to see what becomes of the page read ahead behind it.
final class PageProbeTransport: SyncTransport, Sendable {
    let base: InMemoryTransport
    let asked = Mutex<[String?]>([])
    /// The page after this token comes with a transaction that does not decode.
    let spoiled = Mutex<String?>(nil)
    /// The page after this token is refused once with a transport failure (the engine retries).
    let droppedOnce = Mutex<String?>(nil)

    init(_ base: InMemoryTransport) { self.base = base }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { try await base.push(zone: zone, transactions: transactions) }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        asked.withLock { $0.append(token) }
        let drop = droppedOnce.withLock { dropped -> Bool in
            guard dropped != nil, dropped == token else { return false }
            dropped = nil
            return true
        }
        if drop { throw SyncError(.transport, "the answer to the pull after \(token ?? "the start") was dropped") }
        var page = try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
        if spoiled.withLock({ $0 != nil && $0 == token }), !page.transactions.isEmpty {
            page.transactions[0] = [0xFF, 0x00, 0x13]
        }
        return page
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await base.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
}

/// A catch-up asks for the next page while it applies the current one. The page read ahead
/// must change nothing about what is applied and when the cursor moves: it is the request the
/// engine would send next, sent early.
@Suite("Pull read-ahead")
struct PullReadAheadTests {
    /// 30 transactions in a zone (and its schema transaction), pulled 4 at a time.
    func filledZone(_ dir: TemporaryDirectory) async throws -> (InMemoryTransport, Store) {
        let transport = InMemoryTransport()
        let source = try await Store.open(at: dir.sub("source"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        for i in 0..<30 { try await source.transaction { tx in _ = try tx.insert("Note", ["title": .string("n\(i)")]) } }
        try await SyncEngine(store: source, transport: transport, zone: "z").sync()
        return (transport, source)
    }

    var options: SyncOptions {
        var options = SyncOptions()
        options.pullLimit = 4
        options.initialBackoff = .milliseconds(1)
        options.maxBackoff = .milliseconds(5)
        return options
    }

    @Test("a catch-up of many pages asks after each token exactly once (the page read ahead is the one applied, never asked again) and converges")
    func eachPageOnce() async throws {
        let dir = TemporaryDirectory()
        let (base, source) = try await filledZone(dir)
        let probe = PageProbeTransport(base)
        let device = try await Store.open(at: dir.sub("device"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        let report = try await SyncEngine(store: device, transport: probe, zone: "z", options: options).sync()
        #expect(device.digest() == source.digest())
        #expect(report.pulledTransactions == base.zones.withLock { $0["z"]?.log.count })
        let asked = probe.asked.withLock { $0 }
        // Pages of 4 over the zone's 32 transactions (the source's schema and 30 notes among them): after
        // nothing, 4, 8, …, 28 (the last, which says no more is coming: nothing is asked ahead).
        #expect(asked == [nil] + stride(from: 4, through: 28, by: 4).map { String($0) }, "asked after \(asked)")
        try await device.close()
        try await source.close()
    }

    @Test("a page that does not apply stops the sync with the cursor before it; the page read ahead behind it is dropped, not applied; the next sync resumes from the page that failed")
    func failedApplyDropsTheReadAhead() async throws {
        let dir = TemporaryDirectory()
        let (base, source) = try await filledZone(dir)
        let probe = PageProbeTransport(base)
        probe.spoiled.withLock { $0 = "12" }
        let device = try await Store.open(at: dir.sub("device"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        let engine = try SyncEngine(store: device, transport: probe, zone: "z", options: options)
        await #expect { try await engine.sync() } throws: { ($0 as? SyncError)?.code == .malformedResponse }
        // Pages after nothing, 4 and 8 applied (11 notes); the page after 12 was refused whole,
        // and the one after 16 — asked ahead — never applied.
        #expect(device.count("Note") == 11)
        // The page after 16 was asked while the page after 12 was being applied — and its
        // request was over when the sync threw (it is waited for, not left running).
        #expect(probe.asked.withLock { $0 } == [nil, "4", "8", "12", "16"])

        // A new engine reads the cursor the failed sync saved: it goes on from the failed page.
        probe.spoiled.withLock { $0 = nil }
        probe.asked.withLock { $0 = [] }
        try await SyncEngine(store: device, transport: probe, zone: "z", options: options).sync()
        #expect(device.digest() == source.digest())
        #expect(probe.asked.withLock { $0 }.first == "12")
        try await device.close()
        try await source.close()
    }

    @Test("with pullReadAhead off, nothing is asked before the page in hand is applied")
    func readAheadOff() async throws {
        let dir = TemporaryDirectory()
        let (base, source) = try await filledZone(dir)
        let probe = PageProbeTransport(base)
        probe.spoiled.withLock { $0 = "12" }
        var options = self.options
        options.pullReadAhead = false
        let device = try await Store.open(at: dir.sub("device"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        await #expect { try await SyncEngine(store: device, transport: probe, zone: "z", options: options).sync() } throws: { ($0 as? SyncError)?.code == .malformedResponse }
        #expect(probe.asked.withLock { $0 } == [nil, "4", "8", "12"])
        try await device.close()
        try await source.close()
    }

    @Test("a page read ahead whose answer was dropped is asked again by the engine's retry, as any pull is")
    func droppedReadAheadIsRetried() async throws {
        let dir = TemporaryDirectory()
        let (base, source) = try await filledZone(dir)
        let probe = PageProbeTransport(base)
        probe.droppedOnce.withLock { $0 = "20" }
        let device = try await Store.open(at: dir.sub("device"), schema: syncSchema, options: StoreOptions(durability: .buffered))
        try await SyncEngine(store: device, transport: probe, zone: "z", options: options).sync()
        #expect(device.digest() == source.digest())
        let asked = probe.asked.withLock { $0 }
        #expect(asked.filter { $0 == "20" }.count == 2, "asked after \(asked)")
        #expect(asked.filter { $0 == "16" }.count == 1)
        try await device.close()
        try await source.close()
    }
}
