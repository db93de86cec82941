package import StrataCore
package import StrataProtocol

/// What a push is decided from: the zone and the replica's ledger as the append sees them under
/// its lock (the embedded storage's actor, PostgreSQL's row locks), the owner's stored bytes and
/// the push itself. Values only: reading them is the backend's work, deciding is
/// ``AppendPlan/decide(_:)``'s.
package struct AppendInputs: Sendable {
    /// The zone pushed to.
    package var zone: ZoneID
    /// The zone as stored (its access, grants, epoch); `nil` when there is none: never created,
    /// or deleted.
    package var info: ZoneInfo?
    /// The position the next transaction gets (the log's end, appends in flight included).
    package var end: UInt64
    /// The history chain at ``end`` (`HistoryChain`).
    package var chain: UInt64
    /// The pushing user.
    package var user: String
    /// The replica pushed.
    package var replica: ReplicaID
    /// What the zone holds of the replica: its owner, highest sequence and, for sequences a push
    /// names again, the held transactions' boundaries and digests.
    package var ledger: ReplicaLedger
    /// The bytes the zone owner's zones store, every append in flight counted.
    package var storedBytes: Int64
    /// The owner's stored-bytes quota; `nil` or `0`: none.
    package var storedBytesLimit: Int64?
    /// The push, in order.
    package var transactions: [PushedTransaction]
    /// The zone's life the push is for (the epoch the caller looked up); `nil`: whichever.
    package var epoch: UInt64? = nil
    /// The highest sequence the zone holds of each replica the push's removes name adds of
    /// (``PushedTransaction/namedAdds``), for the replicas the zone has a ledger of; a replica
    /// absent is one the zone never heard of, whose adds are not checked (see rule 5). Read any
    /// time after the zone's life was looked up: within a life it only grows, so a value read
    /// early can only refuse, never let through, what a later one would.
    package var heldThrough: [ReplicaID: UInt64] = [:]

    package init(zone: ZoneID, info: ZoneInfo?, end: UInt64, chain: UInt64, user: String, replica: ReplicaID, ledger: ReplicaLedger,
                 storedBytes: Int64, storedBytesLimit: Int64?, transactions: [PushedTransaction]) {
        self.zone = zone
        self.info = info
        self.end = end
        self.chain = chain
        self.user = user
        self.replica = replica
        self.ledger = ledger
        self.storedBytes = storedBytes
        self.storedBytesLimit = storedBytesLimit
        self.transactions = transactions
    }

    /// The quota in force: `nil` when there is none.
    var limit: Int64? { storedBytesLimit.flatMap { $0 > 0 ? $0 : nil } }

    /// What of these inputs a decision depends on, besides the push, as far as it changes from
    /// one push to the next (the held transactions' digests never change). A backend that plans
    /// from inputs read before it holds the lock (PostgreSQL's compare and set, from the inputs
    /// the replica's last push left) executes the plan only if the basis under the lock is this
    /// one, and plans again from what it reads there otherwise. The stored bytes count only
    /// under a quota. `nil` for a zone that does not exist.
    package var basis: Basis? {
        guard let info else { return nil }
        return Basis(epoch: info.epoch, end: end, chain: chain, access: info.access, grants: info.grants,
                     replicaOwner: ledger.owner, acknowledged: ledger.acknowledged, uncheckedThrough: ledger.uncheckedThrough,
                     storedBytes: limit == nil ? nil : storedBytes)
    }

    /// See ``AppendInputs/basis``.
    package struct Basis: Sendable, Hashable {
        package var epoch: UInt64
        package var end: UInt64
        package var chain: UInt64
        package var access: ZoneAccess
        package var grants: [String: ZoneGrant]
        package var replicaOwner: String?
        package var acknowledged: UInt64
        package var uncheckedThrough: UInt64
        package var storedBytes: Int64?
    }
}

/// The decision on one push, made from values alone (``AppendInputs``) by ``decide(_:)``: a
/// typed refusal, "already held", or the entries to append and what the zone's ledger and
/// history chain become. Every backend reads the inputs under its lock, asks for the plan and
/// performs it; none decides anything itself (as PostgresNIO's `ConnectionStateMachine` returns
/// actions for its channel handler to perform). So the rules of ``ZoneStorage/append(zone:user:replica:transactions:)``
/// are written once, here and in ``ReplicaLedger/check(_:user:replica:zone:)``.
///
/// ```swift
/// switch AppendPlan.decide(inputs) {
/// case .refused(let error): throw error
/// case .held(let held): return held.outcome                 // after recording held.ledger's owner, if new
/// case .append(let write): /* write write.entries, write.ledger, write.chain */ return write.outcome
/// }
/// ```
package enum AppendPlan: Sendable, Hashable {
    /// Nothing changes; the push is answered with this error.
    case refused(ZoneStorageError)
    /// Everything pushed is held already (a retry): nothing is appended.
    case held(Held)
    /// Entries to append.
    case append(Write)

    /// A retry of what the zone holds.
    package struct Held: Sendable, Hashable {
        /// The replica's ledger, its owner the pusher.
        package var ledger: ReplicaLedger
        /// Whether the ledger's owner is new (the replica's first push, or its first since owners
        /// were recorded): the backend records it before answering.
        package var recordsOwner: Bool
        /// The answer: the zone's end, its chain there, the replica's highest sequence.
        package var outcome: AppendOutcome
    }

    /// What an append writes.
    package struct Write: Sendable, Hashable {
        /// One transaction to append: where it goes and the history chain after it.
        package struct Entry: Sendable, Hashable {
            package var position: UInt64
            package var transaction: PushedTransaction
            package var chain: UInt64
        }

        /// The transactions not held yet, from the zone's end on, in order.
        package var entries: [Entry]
        /// The replica's ledger after the append: its owner the pusher, its highest sequence the
        /// last appended, the appended transactions held.
        package var ledger: ReplicaLedger
        /// Whether the replica's owner is recorded with this append (it had none).
        package var recordsOwner: Bool
        /// The zone's end after the append.
        package var end: UInt64
        /// The history chain at ``end``.
        package var chain: UInt64
        /// The bytes the append adds to the owner's (uncompressed, as the quota counts them).
        package var adding: Int64
        /// The answer once the entries are durable.
        package var outcome: AppendOutcome
    }

    /// The plan for `inputs`. The rules, in the order they refuse:
    ///
    /// 1. The zone exists, else ``ZoneStorageError/Code/zoneNotFound``.
    /// 2. The push holds a transaction, else ``ZoneStorageError/Code/invalidArgument``.
    /// 3. The user may push to the zone as it is now (``ZoneInfo/canPush(_:)``), else
    ///    ``ZoneStorageError/Code/forbidden``: a revocation counts from the next append. The zone
    ///    is in the life the push is for (``AppendInputs/epoch``), else
    ///    ``ZoneStorageError/Code/zoneReset``.
    /// 4. The replica's ledger takes the push (``ReplicaLedger/check(_:user:replica:zone:)``):
    ///    ``ZoneStorageError/Code/replicaNotYours``, ``ZoneStorageError/Code/replicaForked`` with
    ///    the first differing sequence, ``ZoneStorageError/Code/sequenceGap`` with the expected one.
    /// 5. Everything held: ``held(_:)``. Else every add a new transaction's removes name of
    ///    another replica the zone knows is one the zone holds (``AppendInputs/heldThrough``),
    ///    else ``ZoneStorageError/Code/unheldAdd`` with the transaction's first sequence: a
    ///    remove naming adds that do not exist yet would cancel them when they come (the
    ///    replica's own adds are checked without storage: they must come before the remove).
    ///    Adds of a replica the zone never heard of are not refused: a zone recreated or
    ///    restored from a backup holds other devices' edits only as merged state (credited to
    ///    the uploader), and a device's remove of one must not keep its edits pending for good.
    /// 6. The new bytes fit the owner's quota, else ``ZoneStorageError/Code/quotaExceeded``, and
    ///    the rest is appended.
    package static func decide(_ inputs: AppendInputs) -> AppendPlan {
        let id = inputs.zone
        guard let info = inputs.info else {
            return .refused(ZoneStorageError(.zoneNotFound, "user \(id.owner) has no zone named \(id.name)", zone: id.description))
        }
        guard !inputs.transactions.isEmpty else {
            return .refused(ZoneStorageError(.invalidArgument, "a push holds at least one transaction", zone: id.description))
        }
        guard info.canPush(inputs.user) else {
            return .refused(ZoneStorageError(.forbidden, "user \(inputs.user) may not push to zone \(info.id)", zone: id.description))
        }
        if let expected = inputs.epoch, expected != info.epoch {
            return .refused(.recreated(id, expected: expected, now: info.epoch))
        }
        let fresh: [PushedTransaction]
        do {
            fresh = try inputs.ledger.check(inputs.transactions, user: inputs.user, replica: inputs.replica, zone: id)
        } catch {
            return .refused(error)
        }
        var ledger = inputs.ledger
        let recordsOwner = ledger.owner == nil
        ledger.owner = inputs.user
        guard !fresh.isEmpty else {
            return .held(Held(ledger: ledger, recordsOwner: recordsOwner,
                              outcome: AppendOutcome(epoch: info.epoch, position: inputs.end, acknowledged: ledger.acknowledged, appended: 0,
                                                     fingerprint: inputs.end > 0 ? inputs.chain : nil)))
        }
        for transaction in fresh {
            for (named, sequence) in transaction.namedAdds where named != inputs.replica {
                guard let held = inputs.heldThrough[named] else { continue }
                guard sequence <= held else {
                    return .refused(ZoneStorageError(
                        .unheldAdd,
                        "replica \(inputs.replica): transaction at sequences \(transaction.firstSequence)...\(transaction.lastSequence) removes the add \(named)#\(sequence), which zone \(id) does not hold (it holds replica \(named) through sequence \(held)); a remove names only adds that exist",
                        zone: id.description, sequence: transaction.firstSequence))
                }
            }
        }
        let adding = fresh.reduce(Int64(0)) { $0 + Int64($1.bytes.count) }
        if let limit = inputs.limit, inputs.storedBytes + adding > limit {
            return .refused(ZoneStorageError.storedBytesQuota(owner: id.owner, limit: limit, used: inputs.storedBytes, adding: adding, zone: id))
        }
        var chain = inputs.chain
        var entries: [Write.Entry] = []
        entries.reserveCapacity(fresh.count)
        for (offset, transaction) in fresh.enumerated() {
            let position = inputs.end + UInt64(offset)
            chain = HistoryChain.link(chain, transaction.digest)
            entries.append(Write.Entry(position: position, transaction: transaction, chain: chain))
            ledger.hold(HeldTransaction(first: transaction.firstSequence, last: transaction.lastSequence, position: position, digest: transaction.digest))
        }
        let end = inputs.end + UInt64(fresh.count)
        return .append(Write(entries: entries, ledger: ledger, recordsOwner: recordsOwner, end: end, chain: chain, adding: adding,
                             outcome: AppendOutcome(epoch: info.epoch, position: end, acknowledged: ledger.acknowledged, appended: fresh.count,
                                                    fingerprint: chain)))
    }
}

extension ZoneStorageError {
    /// The refusal of an append into a zone's life (`expected`) that has ended: the zone was
    /// deleted and created again (`now`) since the caller looked it up.
    package static func recreated(_ zone: ZoneID, expected: UInt64, now: UInt64, what: String = "push") -> ZoneStorageError {
        ZoneStorageError(.zoneReset, "zone \(zone) was deleted and created again (epoch \(expected) → \(now)) while the \(what) was in flight; nothing was \(what == "push" ? "appended" : "merged")",
                         zone: zone.description)
    }
}
