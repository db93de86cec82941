public import Logging
public import StrataLog

/// Options of a ``Store``.
public struct StoreOptions: Sendable {
    /// How commits reach the disk (see ``Durability``).
    public var durability: Durability = .groupCommit
    /// Size of the log's segment files.
    public var segmentSize: Int = 64 << 20
    /// Wall-clock milliseconds for the hybrid logical clock; injected for deterministic tests.
    public var clock: @Sendable () -> UInt64 = HybridClock.wallMilliseconds
    /// Where warnings (a damaged snapshot skipped, say) go.
    public var logger = Logger(label: "strata.store")
    /// The replica ID of a newly created store; random when `nil`.
    public var newReplicaID: ReplicaID? = nil

    public init(durability: Durability = .groupCommit) {
        self.durability = durability
    }
}
