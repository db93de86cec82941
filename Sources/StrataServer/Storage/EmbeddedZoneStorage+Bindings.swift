import Logging
public import StrataCore

/// Replicas bound to their users server-wide: the first user to push a replica (to any zone) or
/// upload a state for it owns it everywhere, for good, so that nobody can claim another user's
/// replica ID in a zone of their own, or in a zone the owner shares with them later, and make the
/// owner's device fork (or pass their edits off as the owner's).
extension EmbeddedZoneStorage {
    static let replicaBindingsName = "replica-owners.json"

    /// Binds `replica` to `user` when it is bound to nobody (durably, before anything of it is
    /// acknowledged); refuses it when it is another user's.
    ///
    /// - Throws: ``ZoneStorageError/Code/replicaNotYours``, or a storage failure writing the file.
    func claimReplica(_ replica: ReplicaID, for user: String, zone: ZoneID) throws(ZoneStorageError) {
        if let bound = replicaBindings[replica] {
            guard bound == user else { throw ZoneStorageError.boundElsewhere(replica, owner: bound, user: user, zone: zone) }
            return
        }
        var next = replicaBindings
        next[replica] = user
        if bindingJournal.count + 1 >= max(Self.journalFoldMinimum, replicaBindings.count) {
            // Folded once the journal holds as many bindings as the file: the rewrite's cost,
            // shared among them, stays constant per binding.
            try ZoneLedgerFiles.saveOwners(next, in: directory, named: Self.replicaBindingsName)
            try bindingJournal.clear()
        } else {
            try bindingJournal.append(replica, user)
        }
        replicaBindings = next
    }

    /// The fewest bindings the journal holds before it is folded into the file.
    static let journalFoldMinimum = 1_024

    /// Writes every binding to `replica-owners.json` and removes the journal (on open and close:
    /// a data directory at rest has the one file).
    func foldBindingJournal() throws(ZoneStorageError) {
        try Self.fold(replicaBindings, in: directory, journal: &bindingJournal)
    }

    static func fold(_ bindings: [ReplicaID: String], in directory: String, journal: inout ReplicaBindingJournal) throws(ZoneStorageError) {
        guard journal.count > 0 else { return }
        try ZoneLedgerFiles.saveOwners(bindings, in: directory, named: replicaBindingsName)
        try journal.clear()
    }

    /// Every binding (for `strata migrate`).
    public func replicaOwners() -> [ReplicaID: String] { replicaBindings }

    /// The bindings on disk; in a data directory written before they were kept, made from the
    /// zones' owners (a replica two users own in different zones, which older servers let
    /// happen, stays unbound and is checked per zone as before) and written.
    static func openReplicaBindings(in directory: String, zones: [ZoneID: ZoneState], logger: Logger) throws(ZoneStorageError) -> (bindings: [ReplicaID: String], journal: ReplicaBindingJournal) {
        let (journal, journaled) = try ReplicaBindingJournal.load(in: directory)
        var bindings = try baseReplicaBindings(in: directory, zones: zones, logger: logger)
        // What the journal holds came after the file was written (each acknowledged).
        for (replica, user) in journaled { bindings[replica] = user }
        return (bindings, journal)
    }

    /// The bindings of `replica-owners.json` (made from the zones when there is none).
    private static func baseReplicaBindings(in directory: String, zones: [ZoneID: ZoneState], logger: Logger) throws(ZoneStorageError) -> [ReplicaID: String] {
        if let bindings = try ZoneLedgerFiles.loadOwnersIfPresent(in: directory, zone: nil, named: replicaBindingsName) { return bindings }
        var owners: [ReplicaID: Set<String>] = [:]
        for state in zones.values {
            for (replica, ledger) in state.ledgers {
                if let owner = ledger.owner { owners[replica, default: []].insert(owner) }
            }
        }
        var bindings: [ReplicaID: String] = [:]
        for (replica, users) in owners {
            if users.count == 1, let user = users.first {
                bindings[replica] = user
            } else {
                logger.warning("replica owned by several users; left unbound", metadata: ["replica": "\(replica)", "users": "\(users.sorted())"])
            }
        }
        try ZoneLedgerFiles.saveOwners(bindings, in: directory, named: replicaBindingsName)
        return bindings
    }
}

extension ZoneStorageError {
    /// The refusal of a replica bound to another user server-wide.
    package static func boundElsewhere(_ replica: ReplicaID, owner: String, user: String, zone: ZoneID) -> ZoneStorageError {
        // The owner is not named: anyone could otherwise learn whose a replica ID is.
        ZoneStorageError(.replicaNotYours, "replica \(replica) belongs to another user, not \(user) (a replica is its first pusher's on the whole server)",
                         zone: zone.description)
    }
}
