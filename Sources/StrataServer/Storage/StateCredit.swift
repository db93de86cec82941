public import StrataCore

/// What a merged state's unheld events were credited to (see
/// `ProjectionBuilder.mergedPayload(with:believingApplied:withholding:crediting:)`): a new replica
/// for each merge that credits any, owned by the uploader, holding the sequences it was credited
/// with. Each backend records its ledger with the merge, so that removes naming its adds are taken
/// (the zone holds them) and the tools name the uploader as their author — never the replica the
/// upload named.
package struct StateCredit: Sendable {
    /// The random step above the highest credited replica ID (see the merge).
    package static func step() -> UInt64 { UInt64.random(in: 1...(1 << 40)) }

    package var replica: ReplicaID
    /// The uploader.
    package var user: String
    /// Its highest credited sequence (every one up to it counts as held).
    package var count: UInt64

    /// Merges an uploaded state into the zone's (`builder`, spent afterwards), as both backends
    /// do: the uploader's own events past its claim (`believed`) are left out — it pushes them
    /// as events, which the server checks against another copy's under the same sequences —
    /// and events of others the zone does not hold are credited to a replica of the uploader's.
    /// The merged snapshot payload is `nil` when the upload brought nothing.
    ///
    /// - Throws: ``ZoneStorageError/Code/invalidArgument`` when the upload cannot be merged (more
    ///   replicas than a state may hold, credited names too far apart); errors of the merge itself.
    package static func merge(_ upload: StateUpload, into builder: ProjectionBuilder, replica: ReplicaID?, believed: UInt64?,
                              zone: ZoneID) throws -> (payload: [UInt8]?, credited: (replica: ReplicaID, count: UInt64)?) {
        do {
            let believing = replica.map { [$0: believed ?? 0] } ?? [:]
            return try builder.mergedPayload(with: upload, believingApplied: believing,
                                             withholding: replica.map { ($0, believed ?? 0) }, crediting: step())
        } catch let error as StoreError where error.code == .invalidArgument {
            throw ZoneStorageError(.invalidArgument, "zone \(zone): the uploaded state cannot be merged: \(error.message)", zone: zone.description)
        }
    }

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
