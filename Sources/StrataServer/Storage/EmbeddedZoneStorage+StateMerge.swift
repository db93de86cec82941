import Foundation
public import StrataCore
import StrataProtocol
import StrataLog
import Logging

/// Merging a state a client uploaded into the zone (healing history the zone lost).
extension EmbeddedZoneStorage {
    /// Merges a state a client uploaded (a projection snapshot payload) into the zone: the zone's
    /// state through its end, joined with the upload, becomes its snapshot, and the merge gets a
    /// new random ID (``ZoneInfo/merges``), so that every change token handed out before expires and every client
    /// adopts the merged state (merging it into its own, nothing lost) before it pulls on. How a
    /// zone that lost history (a server restored from a backup, a zone recreated) gets back what
    /// its devices hold but no longer have as events.
    ///
    /// The upload's values are merged, its claims of which events it applied are not (see
    /// `ProjectionBuilder.merge(_:believingApplied:withholding:)`): the replicas' ledgers stay what the
    /// log holds, and events that really arrive later still apply.
    ///
    /// - Parameters:
    ///   - id: the zone.
    ///   - user: who uploads (the replica's owner when `replica` is given).
    ///   - replica: the uploader's own replica, whose sequences through `claim` the server then
    ///     counts as held (`nil`: no claim).
    ///   - claim: how far a server had acknowledged `replica`; believed only as far as this zone
    ///     acknowledged it.
    ///   - upload: the uploaded state.
    ///   - basis: the position the uploader had pulled through (from a token of the
    ///     zone's newest merge); the outcome says whether that was the zone's end (then the
    ///     uploader holds the merged state already and goes on from the new token).
    public func mergeState(zone id: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state upload: StateUpload, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        try await mergeState(zone: id, epoch: nil, user: user, replica: replica, claim: claim, state: upload, basis: basis)
    }

    public func mergeState(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID?, claim: UInt64, state upload: StateUpload,
                           basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        let state = try await usableZone(id)
        try Self.checkPush(state.info, user: user)
        if let expected, expected != state.info.epoch {
            throw ZoneStorageError.recreated(id, expected: expected, now: state.info.epoch, what: "state upload")
        }
        // The uploader's claim of how far its own replica goes is believed (a false one can only
        // hold back its own edits), as far as the state really holds it; the replica must be the
        // uploader's, or new to the zone.
        func believed(_ replica: ReplicaID) -> UInt64 { min(claim, upload.contiguousSequences()[replica] ?? 0) }
        var ledger: ReplicaLedger?
        if let replica {
            var own = state.ledgers[replica] ?? ReplicaLedger()
            if let owner = own.owner, owner != user {
                throw ZoneStorageError(.replicaNotYours, "replica \(replica) belongs to user \(owner), not \(user)", zone: id.description)
            }
            // Bound server-wide only once the zone's own check passed (a refused upload binds nothing).
            try claimReplica(replica, for: user, zone: id)
            if own.owner == nil {
                var owners = state.ledgers.compactMapValues(\.owner)
                owners[replica] = user
                try ZoneLedgerFiles.saveOwners(owners, in: Self.logDirectory(in: directory, for: state.info))
                own.owner = user
            }
            // Sequences up to the claim that the zone holds no digest of count as held: a push of
            // them is refused as a fork (another copy's), never silently taken as a retry.
            own.acknowledged = max(own.acknowledged, believed(replica))
            ledger = own
        }
        // From here to the catalog write nothing suspends: no push of this zone interleaves, so
        // the merged snapshot is exactly the state at `position`, and tokens of the new merge
        // are handed out only for positions from it on.
        let position = state.log.endPosition
        let credited: StateCredit?
        let changed: Bool
        do {
            let builder = try Self.projection(of: state.log, through: position)
            // The uploader's own events past its claim are left out: it pushes them as events,
            // which the server checks against another copy's under the same sequences. Events
            // of others the zone does not hold are credited to a replica of the uploader's.
            let merged = try StateCredit.merge(upload, into: builder, replica: replica, believed: replica.map(believed), zone: id)
            credited = StateCredit(merged.credited, user: user)
            changed = merged.payload != nil
            if let credited {
                try claimReplica(credited.replica, for: user, zone: id)
                var owners = state.ledgers.compactMapValues(\.owner)
                if let replica { owners[replica] = user }
                owners[credited.replica] = user
                try ZoneLedgerFiles.saveOwners(owners, in: Self.logDirectory(in: directory, for: state.info))
            }
            if let payload = merged.payload { try writeSnapshot(payload, at: position, of: state) }
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): merging the uploaded state failed: \(error)", zone: id.description)
        }
        if let replica, let ledger { zoneStates[id]?.ledgers[replica] = ledger }
        guard changed else {
            // Nothing new (a device healing twice, an upload repeated): no merge, so no token
            // expires and the catalog does not grow.
            logger.info("uploaded state brought nothing new", metadata: ["zone": "\(id)", "user": "\(user)", "position": "\(position)"])
            return StateMergeOutcome(epoch: state.info.epoch, generation: state.info.generation, position: position, upToDate: basis == position,
                                     acknowledged: ledger?.acknowledged ?? 0, merged: false)
        }
        remeasure(id)
        if let credited { zoneStates[id]?.ledgers[credited.replica] = credited.ledger }
        var info = state.info
        var merge = UInt64.random(in: 1 ... .max)
        while info.merges.contains(merge) { merge = UInt64.random(in: 1 ... .max) }
        info.merges.append(merge)
        zoneStates[id]?.info = info
        do {
            try writeCatalog()
        } catch {
            zoneStates[id]?.info = state.info
            throw error
        }
        database.touch(id)
        logger.notice("uploaded state merged", metadata: [
            "zone": "\(id)", "user": "\(user)", "position": "\(position)", "generation": "\(info.generation)",
            "credited": "\(credited?.count ?? 0)", "creditedReplica": "\(credited.map { "\($0.replica)" } ?? "-")",
        ])
        return StateMergeOutcome(epoch: info.epoch, generation: info.generation, position: position, upToDate: basis == position && credited == nil,
                                 acknowledged: ledger?.acknowledged ?? 0)
    }
}
