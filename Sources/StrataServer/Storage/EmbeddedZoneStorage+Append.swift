public import StrataCore
import StrataProtocol
import StrataLog
import Synchronization

/// Pushes: the inputs read and `AppendPlan` executed in one step of the actor, then the
/// append submitted to the zone's log and answered once durable.
extension EmbeddedZoneStorage {
    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: id, user: user, replica: replica, transactions: transactions, storedBytesLimit: nil)
    }

    public func append(zone id: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        try await append(zone: id, epoch: nil, user: user, replica: replica, transactions: transactions, storedBytesLimit: storedBytesLimit)
    }

    public func append(zone id: ZoneID, epoch expected: UInt64?, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                       storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
        let state = try await usableZone(id)
        // From here to the submit below nothing suspends (the owners file is written
        // synchronously): the inputs are read, the plan made and its positions claimed in one
        // step of the actor. An `updateZone` revoking the grant comes either before (refused) or
        // after (the push was allowed), no other push of this zone interleaves, and the quota
        // counts every append still in flight (reserved at their uncompressed size).
        let log = state.log
        let end = log.nextPosition
        guard let chain = state.chain.value(at: end) else {
            throw ZoneStorageError(.storageFailure, "zone \(id): its history chain does not reach its end (\(end))", zone: id.description)
        }
        let epoch = state.info.epoch
        var inputs = AppendInputs(zone: id, info: state.info, end: end, chain: chain, user: user, replica: replica,
                                  ledger: state.ledgers[replica] ?? ReplicaLedger(),
                                  // The owner's asset chunks count toward the limit too.
                                  storedBytes: (usage[id.owner] ?? 0) + assets.storedBytes(owner: id.owner),
                                  storedBytesLimit: storedBytesLimit, transactions: transactions)
        inputs.epoch = expected
        inputs.heldThrough = Self.heldThrough(of: transactions, except: replica) { state.ledgers[$0]?.acknowledged }
        switch AppendPlan.decide(inputs) {
        case .refused(let error):
            throw error
        case .held(let held):
            try claimReplica(replica, for: user, zone: id)
            if held.recordsOwner {
                try recordOwner(user, of: replica, in: state)
                zoneStates[id]?.ledgers[replica] = held.ledger
            }
            // A retry of what is already held. Its first answer may still be waiting for its
            // sync: answer only once everything submitted so far is durable.
            do {
                try await log.flush()
            } catch {
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the log failed: \(error)", zone: id.description)
            }
            return held.outcome
        case .append(let write):
            // The replica's first push (or its first since owners were recorded): its owner, in
            // the zone and server-wide, is on disk before anything of it is acknowledged.
            try claimReplica(replica, for: user, zone: id)
            if write.recordsOwner { try recordOwner(user, of: replica, in: state) }
            let now = currentLogTimestamp()
            let durable = DurableSignal()
            let positions: Range<LogPosition>
            do {
                positions = try log.submit(write.entries.map { LogEntry($0.transaction.bytes, timestamp: now) }) { durable.complete($0) }
            } catch let error as LogError where error.code == .entryTooLarge || error.code == .recordTooLarge {
                throw ZoneStorageError(.tooLarge, "zone \(id): \(error.message)", zone: id.description)
            } catch {
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the log refused the append: \(error)", zone: id.description)
            }
            addUsage(id, write.adding)
            zoneStates[id]?.ledgers[replica] = write.ledger
            // Positions are claimed in submit order with no suspension since, so the chain grows
            // in log order (a failed append rebuilds it from what is durable when the log is
            // reopened).
            for entry in write.entries { zoneStates[id]?.chain.append(entry.transaction.digest) }
            if positions.lowerBound != end {
                // The plan placed the entries elsewhere: what is in memory is rebuilt from the log.
                markBroken(id, epoch: epoch, error: ZoneStorageError(.storageFailure, "the log placed an append at \(positions.lowerBound), not \(end)"))
            }
            switch await durable.wait() {
            case .success(let result):
                let current = zoneStates[id]?.info.epoch == epoch
                // The reservation becomes the record's size on disk (compressed, framed).
                if current { addUsage(id, Int64(result.storedSize) - write.adding) }
                // Stamped once durable (what a pull of the zone may read): the database changes
                // name the zone from now on.
                if current && write.outcome.appended > 0 { database.touch(id) }
                var outcome = write.outcome
                if !current { outcome.fingerprint = nil }
                return outcome
            case .failure(let error):
                // The zone's bytes are measured again when its log is reopened.
                markBroken(id, epoch: epoch, error: error)
                throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): the append failed: \(error)", zone: id.description)
            }
        }
    }

    /// Records in the zone's `replicas.json` that `replica` belongs to `user`, synchronously (no
    /// suspension: a push checks and claims a replica in one step).
    func recordOwner(_ user: String, of replica: ReplicaID, in state: ZoneState) throws(ZoneStorageError) {
        var owners = state.ledgers.compactMapValues(\.owner)
        owners[replica] = user
        try ZoneLedgerFiles.saveOwners(owners, in: Self.logDirectory(in: directory, for: state.info))
    }
}

/// Carries the completion of a submitted append (called on the log's writer queue) to the task
/// that waits for it; either side may come first.
private final class DurableSignal: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<AppendResult, LogError>, Never>?)
        case done(Result<AppendResult, LogError>)
    }

    private let state = Mutex(State.waiting(nil))

    func complete(_ result: Result<AppendResult, LogError>) {
        let continuation = state.withLock { s -> CheckedContinuation<Result<AppendResult, LogError>, Never>? in
            guard case .waiting(let continuation) = s else { return nil }
            s = .done(result)
            return continuation
        }
        continuation?.resume(returning: result)
    }

    func wait() async -> Result<AppendResult, LogError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> Result<AppendResult, LogError>? in
                switch s {
                case .done(let result): return result
                case .waiting:
                    s = .waiting(continuation)
                    return nil
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

extension ZoneStorage {
    /// What a zone holds of each replica whose adds `transactions`' removes name (other than
    /// `replica`, the pusher), by `held` (the zone's ledger): ``AppendInputs/heldThrough``.
    package static func heldThrough(of transactions: [PushedTransaction], except replica: ReplicaID,
                                    _ held: (ReplicaID) -> UInt64?) -> [ReplicaID: UInt64] {
        var result: [ReplicaID: UInt64] = [:]
        for transaction in transactions {
            for named in transaction.namedAdds.keys where named != replica && result[named] == nil {
                if let sequence = held(named) { result[named] = sequence }
            }
        }
        return result
    }
}
