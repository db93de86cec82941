import PostgresNIO
public import StrataCore
public import StrataServer
import Synchronization

/// Replicas bound to their users server-wide (`strata_replica_owners`, schema version 7): the
/// first user to push a replica to any zone, or upload a state for it, owns it everywhere, for
/// good — so that nobody claims another user's replica ID in a zone of their own, or in one the
/// owner shares with them later, and makes the owner's device fork.
extension PostgresZoneStorage {
    /// Binds `replica` to `user` when it is bound to nobody; refuses it when it is another
    /// user's. A binding never changes once made, so one this instance has seen committed is
    /// remembered (no round trip on the next push); one made here is read again next time, in
    /// case the transaction that made it rolls back.
    ///
    /// - Throws: ``ZoneStorageError/Code/replicaNotYours``.
    func claimReplica(_ replica: ReplicaID, for user: String, zone: ZoneID, on connection: PostgresConnection) async throws {
        if let bound = replicaOwners.owner(of: replica) {
            guard bound == user else { throw ZoneStorageError.boundElsewhere(replica, owner: bound, user: user, zone: zone) }
            return
        }
        let (high, low) = Self.halves(replica)
        // Inserted, or the one there: a row another transaction inserts concurrently is waited
        // for by the insert, but not seen by this statement's read; then the next one sees it.
        for _ in 0..<2 {
            let found = try await rows(connection.query("""
                WITH inserted AS (
                    INSERT INTO strata_replica_owners (replica_high, replica_low, owner) VALUES (\(high), \(low), \(user))
                    ON CONFLICT DO NOTHING RETURNING owner
                )
                SELECT owner, true FROM inserted
                UNION ALL SELECT owner, false FROM strata_replica_owners WHERE replica_high = \(high) AND replica_low = \(low)
                """, logger: logger), as: (String, Bool).self)
            guard let (owner, inserted) = found.first else { continue }
            if !inserted { replicaOwners.remember(owner, of: replica) }
            guard owner == user else { throw ZoneStorageError.boundElsewhere(replica, owner: owner, user: user, zone: zone) }
            return
        }
        throw ZoneStorageError(.storageFailure, "replica \(replica): its owner could not be read or recorded", zone: zone.description)
    }

    /// Binds `replica` to `user` when it is bound to nobody (`strata migrate` carrying an
    /// embedded storage's bindings); a replica bound to someone else stays theirs.
    public func bindReplica(_ replica: ReplicaID, to user: String) async throws(ZoneStorageError) {
        let (high, low) = Self.halves(replica)
        try await withConnection("binding replica \(replica)", zone: nil) { connection in
            _ = try await connection.query("""
                INSERT INTO strata_replica_owners (replica_high, replica_low, owner) VALUES (\(high), \(low), \(user))
                ON CONFLICT DO NOTHING
                """, logger: self.logger)
        }
    }
}

/// The bindings this instance has seen committed (they never change). Bounded: past its limit it
/// starts over (a miss costs one round trip).
final class ReplicaOwnerCache: Sendable {
    private let owners = Mutex<[ReplicaID: String]>([:])
    static let limit = 100_000

    func owner(of replica: ReplicaID) -> String? { owners.withLock { $0[replica] } }

    func remember(_ owner: String, of replica: ReplicaID) {
        owners.withLock { owners in
            if owners.count >= Self.limit { owners.removeAll(keepingCapacity: true) }
            owners[replica] = owner
        }
    }
}
