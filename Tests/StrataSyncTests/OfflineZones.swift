import StrataCore
import StrataProtocol
import StrataSync

/// A transport for tests of the database engine's own logic: every zone call fails as if the
/// server were unreachable (the zones' syncs land in the report's failures); the conforming
/// type answers the database changes.
protocol OfflineZones: SyncTransport {}

extension OfflineZones {
    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { throw SyncError(.transport, "offline") }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { throw SyncError(.transport, "offline") }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult { throw SyncError(.transport, "offline") }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { nil }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { [] }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        throw SyncError(.transport, "offline")
    }
}
