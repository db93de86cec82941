import Logging
import NIOCore
import PostgresNIO
public import StrataCore
public import StrataServer

extension PostgresZoneStorage {
    /// The class of the advisory locks that let one instance at a time compact a zone (the
    /// zone's key is the other half).
    static let compactionLockClass: Int32 = 0x5354_5241

    /// Snapshots the zone at the position `retaining` transactions before its end and retires the
    /// history below it (see `ZoneStorage.compact(zone:retaining:)`).
    ///
    /// Instances serialize on a per-zone advisory lock; one that waited finds the work done and
    /// returns the snapshot written meanwhile. The state is computed from history no push changes
    /// (below the end), without the zone's row lock; the lock is taken only to write the
    /// snapshot and retire what it covers, so pushes wait for that write, not for the computation.
    @discardableResult
    public func compact(zone id: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
        let snapshot = try await transaction("compacting zone \(id)", zone: id) { connection -> ZoneSnapshot in
            guard let first = try await self.zoneRow(id, on: connection) else { throw Self.notFound(id) }
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.compactionLockClass), \(Int32(truncatingIfNeeded: first.key)))",
                                       logger: self.logger)
            guard let zone = try await self.zoneRow(id, on: connection), zone.key == first.key else { throw Self.notFound(id) }
            let cutoff = zone.end > retaining ? zone.end - retaining : 0
            let existing = try await self.storedSnapshot(of: zone, on: connection)
            if let existing, existing.position >= cutoff { return existing }
            let payload = try await self.projection(of: zone, through: cutoff, from: existing, on: connection).snapshotPayload()
            guard let locked = try await self.zoneRow(id, on: connection, lock: true), locked.key == zone.key else { throw Self.notFound(id) }
            // A merge that committed meanwhile wrote a newer snapshot.
            if let current = try await self.storedSnapshot(of: locked, on: connection), current.position >= cutoff { return current }
            try await self.writeSnapshot(payload, at: cutoff, of: locked, on: connection)
            return ZoneSnapshot(epoch: locked.info.epoch, position: cutoff, payload: payload)
        }
        logger.info("zone compacted", metadata: ["zone": "\(id)", "position": "\(snapshot.position)"])
        return snapshot
    }

    /// Merges a state a client uploaded into the zone (see
    /// `ZoneStorage.mergeState(zone:user:replica:claim:state:basis:)`), under the zone's row
    /// lock: the merged snapshot is exactly the state at the zone's end.
    public func mergeState(zone id: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state upload: StateUpload,
                           basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        try await mergeState(zone: id, epoch: nil, user: user, replica: replica, claim: claim, state: upload, basis: basis)
    }

    /// ``mergeState(zone:user:replica:claim:state:basis:)`` into the zone's life `expected` only.
    public func mergeState(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID?, claim: UInt64, state upload: StateUpload,
                           basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
        let contiguous = upload.contiguousSequences()
        // The uploader's claim of how far its own replica goes is believed as far as the state
        // really holds it (a false claim can only hold back its own edits).
        func believed(_ replica: ReplicaID) -> UInt64 { min(claim, contiguous[replica] ?? 0) }
        let outcome = try await unboundedTransaction("merging a state into zone \(id)", zone: id) { connection -> StateMergeOutcome in
            guard let zone = try await self.zoneRow(id, on: connection, lock: true) else { throw Self.notFound(id) }
            try Self.checkPush(zone.info, user: user)
            if let expected, expected != zone.info.epoch {
                throw ZoneStorageError.recreated(id, expected: expected, now: zone.info.epoch, what: "state upload")
            }
            var ledger: ReplicaLedger?
            if let replica {
                var own = try await self.ledger(of: replica, in: zone, covering: [], on: connection)
                if let owner = own.owner, owner != user {
                    throw ZoneStorageError(.replicaNotYours, "replica \(replica) belongs to user \(owner), not \(user)", zone: id.description)
                }
                // Bound server-wide only once the zone's own check passed (a refused upload binds nothing).
                try await self.claimReplica(replica, for: user, zone: id, on: connection)
                own.owner = user
                // Sequences up to the claim that the zone holds no digest of count as held: a
                // push of them is refused as a fork (another copy's), never taken as a retry.
                own.acknowledged = max(own.acknowledged, believed(replica))
                ledger = own
            }
            let existing = try await self.storedSnapshot(of: zone, on: connection)
            let builder = try await self.projection(of: zone, through: zone.end, from: existing, on: connection)
            // The uploader's own events past its claim are left out: it pushes them as events.
            // Events of others the zone does not hold are credited to a replica of the uploader's.
            let merged = try StateCredit.merge(upload, into: builder, replica: replica, believed: replica.map(believed), zone: id)
            let credited = StateCredit(merged.credited, user: user)
            if let replica, let ledger { try await self.saveLedger(ledger, of: replica, in: zone, on: connection) }
            guard let payload = merged.payload else {
                // Nothing new (a device healing twice, an upload repeated): no merge, so no token
                // expires and the zone's row does not grow.
                return StateMergeOutcome(epoch: zone.info.epoch, generation: zone.info.generation, position: zone.end, upToDate: basis == zone.end,
                                         acknowledged: ledger?.acknowledged ?? 0, merged: false)
            }
            try await self.writeSnapshot(payload, at: zone.end, of: zone, on: connection)
            if let credited {
                try await self.claimReplica(credited.replica, for: user, zone: id, on: connection)
                try await self.saveLedger(credited.ledger, of: credited.replica, in: zone, on: connection)
            }
            var merge = UInt64.random(in: 1 ... .max)
            while zone.info.merges.contains(merge) { merge = UInt64.random(in: 1 ... .max) }
            try await connection.query("UPDATE strata_zones SET merges = array_append(merges, \(Int64(bitPattern: merge))) WHERE zone_id = \(zone.key)",
                                       logger: self.logger)
            try await self.announce(id, on: connection)
            return StateMergeOutcome(epoch: zone.info.epoch, generation: merge, position: zone.end, upToDate: basis == zone.end && credited == nil,
                                     acknowledged: ledger?.acknowledged ?? 0)
        }
        logger.notice(outcome.merged ? "uploaded state merged" : "uploaded state brought nothing new", metadata: [
            "zone": "\(id)", "user": "\(user)", "position": "\(outcome.position)", "generation": "\(outcome.generation)",
        ])
        return outcome
    }

    /// The zone's state through `position`: its snapshot (when at or below `position`), then
    /// its transactions, streamed.
    func projection(of zone: ZoneRow, through position: UInt64, from snapshot: ZoneSnapshot?,
                    on connection: PostgresConnection) async throws -> ProjectionBuilder {
        var builder = ProjectionBuilder()
        var from = zone.start
        if let snapshot, snapshot.position <= position, snapshot.position >= zone.start {
            builder = try ProjectionBuilder(snapshot: snapshot.payload)
            from = snapshot.position
        } else if zone.start > 0 {
            throw ZoneStorageError(.storageFailure, "zone \(zone.info.id): its history before position \(zone.start) was retired but no snapshot at or below \(position) covers it",
                                   zone: zone.info.id.description)
        }
        guard from < position else { return builder }
        let rows = try await connection.query("""
            SELECT position, bytes FROM strata_transactions
            WHERE zone_id = \(zone.key) AND position >= \(Int64(from)) AND position < \(Int64(position)) ORDER BY position
            """, logger: logger)
        for try await row in rows {
            let (at, bytes) = try row.decode((Int64, ByteBuffer?).self)
            guard let bytes else {
                throw ZoneStorageError(.storageFailure, "zone \(zone.info.id): the transaction at position \(at) was retired without a snapshot covering it",
                                       zone: zone.info.id.description)
            }
            do {
                _ = try builder.apply(encoded: Array(bytes.readableBytesView))
            } catch {
                throw ZoneStorageError(.storageFailure, "zone \(zone.info.id): the transaction at position \(at) does not decode: \(error)",
                                       zone: zone.info.id.description)
            }
        }
        return builder
    }

    /// Stores the zone's snapshot at `position` and retires the transactions below it (their
    /// bytes go, their rows stay: digests for the fork check, chains for tokens), keeping the
    /// stored-bytes counters exact. The caller holds the zone's row lock.
    func writeSnapshot(_ payload: [UInt8], at position: UInt64, of zone: ZoneRow, on connection: PostgresConnection) async throws {
        let freed = try await values(connection.query("""
            SELECT coalesce(sum(octet_length(bytes)), 0)::bigint FROM strata_transactions
            WHERE zone_id = \(zone.key) AND position >= \(Int64(zone.start)) AND position < \(Int64(position))
            """, logger: logger), as: Int64.self).first ?? 0
        let replaced = try await values(connection.query("SELECT octet_length(payload)::bigint FROM strata_snapshots WHERE zone_id = \(zone.key)",
                                                       logger: logger), as: Int64.self).first ?? 0
        try await connection.query("""
            INSERT INTO strata_snapshots (zone_id, position, payload) VALUES (\(zone.key), \(Int64(position)), \(ByteBuffer(bytes: payload)))
            ON CONFLICT (zone_id) DO UPDATE SET position = EXCLUDED.position, payload = EXCLUDED.payload
            """, logger: logger)
        try await connection.query("""
            UPDATE strata_transactions SET bytes = NULL
            WHERE zone_id = \(zone.key) AND position >= \(Int64(zone.start)) AND position < \(Int64(position))
            """, logger: logger)
        let delta = Int64(payload.count) - replaced - freed
        try await connection.query("""
            UPDATE strata_zones SET start_position = greatest(start_position, \(Int64(position))), stored_bytes = stored_bytes + \(delta)
            WHERE zone_id = \(zone.key)
            """, logger: logger)
        try await connection.query("UPDATE strata_owners SET stored_bytes = stored_bytes + \(delta) WHERE owner = \(zone.info.owner)",
                                   logger: logger)
    }
}
