public import StrataCore

/// A replica as a zone knows it: who pushed its events, and how far (also the entries of
/// ``ReplicaList``, the answer of `GET /v1/zones/{zone}/replicas`).
public struct ReplicaInfo: Sendable, Hashable, Codable {
    public var replica: ReplicaID
    /// The user the replica belongs to (the first who pushed it); `nil` for a replica found in
    /// history written before the server recorded owners.
    public var user: String?
    /// The highest sequence of the replica the zone holds.
    public var acknowledged: UInt64

    public init(replica: ReplicaID, user: String?, acknowledged: UInt64) {
        self.replica = replica
        self.user = user
        self.acknowledged = acknowledged
    }
}
