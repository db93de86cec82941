import Strata
import StrataProtocol
import StrataSync
import StrataCore

/// Forwards to another transport (a real one in end-to-end tests), and refuses every pull when asked to (a network that drops the
/// answers to pulls), so that a push is acknowledged while the pull after it fails.
struct PullRefusingTransport: SyncTransport {
    let base: any SyncTransport
    let refusing: Bool
    init(_ base: any SyncTransport, refusing: Bool) { self.base = base; self.refusing = refusing }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await base.ensureZone(zone, create: create) }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { try await base.push(zone: zone, transactions: transactions) }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        if refusing { throw SyncError(.transport, "the answer to the pull was dropped") }
        return try await base.pull(zone: zone, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await base.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await base.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await base.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
}
