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
    /// How far ahead of wall-clock now one observed remote timestamp may move the store's clock,
    /// in milliseconds (default one hour). Without a bound, a single event stamped far in the
    /// future (a device with a wrong clock, or a legacy event near 2^64) would make every later
    /// local edit inherit that stamp and soon exhaust the clock; the events keep their stamps, so
    /// the merge rule still orders them by it. Within the bound, ordinary clock skew between
    /// devices still orders an edit after the ones it saw.
    public var maxClockLead: UInt64 = StoreOptions.defaultMaxClockLead

    /// Whether compaction keeps, in the log, this store's transactions that a sync engine has
    /// not pushed yet (see ``Store/pinUnpushed(_:acknowledged:)``): the push path reads them from
    /// the log, so retiring them would strand them. On by default; it concerns stores that have
    /// a sync engine (a store that never synced has no pin and compacts as before).
    public var retainsUnpushed = true

    /// One hour, in milliseconds.
    public static let defaultMaxClockLead: UInt64 = 3_600_000

    public init(durability: Durability = .groupCommit) {
        self.durability = durability
    }
}
