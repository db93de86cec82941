import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A push answered `410 zoneReset` (the zone was deleted and created again while it was in flight;
/// the server took nothing of it) starts the engine over against the new zone, which pushes
/// again — once: a server answering it to every push gets the refusal back, not a recursion.
@Suite("A push answered zoneReset")
struct PushZoneResetTests {
    /// Forwards to an in-memory zone, answering the first `resets` pushes `410 zoneReset`.
    final class ResettingTransport: SyncTransport {
        let base = InMemoryTransport()
        let resets: Mutex<Int>
        init(resets: Int) { self.resets = Mutex(resets) }

        func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
        func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
            let reset = resets.withLock { left in
                guard left > 0 else { return false }
                left -= 1
                return true
            }
            if reset { throw SyncError(ErrorCode.zoneReset, "zone \(zone) was deleted and created again while the push was in flight", status: 410) }
            return try await base.push(zone: zone, transactions: transactions)
        }
        func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
            try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
        }
        func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
        func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
        /// Starting over uploads the store's state first (a heal); the in-memory zone keeps no
        /// states, so the upload is taken as merging nothing new, and the pull goes from the start.
        func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
            StateAnswer(token: "0", upToDate: false, acknowledged: 0)
        }
    }

    @Test("one zoneReset: the engine starts over and its edit lands; a zoneReset to every push: the sync throws zoneReset and the edit stays pending")
    func startsOverOnce() async throws {
        let dir = TemporaryDirectory()
        var options = SyncOptions()
        options.maxRetries = 0
        for (resets, lands) in [(1, true), (1_000, false)] {
            let store = try await Store.open(at: dir.sub("device-\(resets)"), schema: deviceSchema)
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("inbox")]) }
            let transport = ResettingTransport(resets: resets)
            let engine = try SyncEngine(store: store, transport: transport, zone: "notes", options: options)
            if lands {
                let report = try await engine.sync()
                #expect(report.pushedTransactions >= 1)
                #expect(transport.base.zones.withLock { $0["notes"]?.log.count ?? 0 } >= 1, "the edit never reached the zone")
            } else {
                await #expect { try await engine.sync() } throws: { ($0 as? SyncError)?.code == .zoneReset }
                #expect(transport.base.zones.withLock { $0["notes"]?.log.count ?? 0 } == 0)
                #expect(try store.unpushedChangeCount() >= 1, "the edit is no longer pending")
            }
            try await store.close()
        }
    }
}
