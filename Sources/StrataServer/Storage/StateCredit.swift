public import StrataCore

/// What a merged state's unheld events were credited to (see
/// `ProjectionBuilder.merge(_:believingApplied:withholding:crediting:)`): a new replica for each
/// merge that credits any, owned by the uploader, holding as many sequences as it was credited
/// with. Each backend records its ledger with the merge, so that removes naming its adds are taken
/// (the zone holds them) and the tools name the uploader as their author — never the replica the
/// upload named.
package struct StateCredit: Sendable {
    /// The random step above the highest credited replica ID (see the merge).
    package static func step() -> UInt64 { UInt64.random(in: 1...(1 << 40)) }

    package var replica: ReplicaID
    /// The uploader.
    package var user: String
    /// How many events it was credited with.
    package var count: UInt64

    /// The credit of a merge, `nil` when nothing was credited.
    package init?(_ merged: (replica: ReplicaID, count: UInt64)?, user: String) {
        guard let merged, merged.count > 0 else { return nil }
        replica = merged.replica
        count = merged.count
        self.user = user
    }

    /// Its ledger: the uploader's, held through ``count``, without digests (nobody holds its
    /// events as transactions: a push of them is refused as a fork).
    package var ledger: ReplicaLedger {
        var ledger = ReplicaLedger()
        ledger.owner = user
        ledger.acknowledged = count
        return ledger
    }
}
