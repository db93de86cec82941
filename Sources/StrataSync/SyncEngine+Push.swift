@_spi(StrataInternals) import Strata
import StrataCore
import Logging
import StrataProtocol

/// Pushing: the store's own transactions in batches the server accepts, and what a refusal leads
/// to (decided by the ``SyncStateMachine``: resume after a gap, smaller batches, a fork, holding
/// the edits of a reader).
extension SyncEngine {
    /// Pushes (see ``pushOrHold(_:)``) and returns a refusal the machine defers — the device's
    /// clock, when a sync was asked for once — instead of throwing it.
    func pushOrDefer(_ report: inout SyncReport, continuous: Bool) async throws -> SyncError? {
        assetUploadRefusal = nil
        do {
            try await pushOrHold(&report)
            return nil
        } catch let error as SyncError {
            defer { assetUploadRefusal = nil }
            let reported = error.code == .assetMissing ? assetUploadRefusal ?? error : error
            switch machine.next(after: .push(continuous: continuous), failed: error) {
            case .deferError: return reported
            case .fail: throw reported
            }
        }
    }

    /// Pushes, unless the caller may only read the zone: then the local transactions stay
    /// pending (counted in the report and the status, with why) and sync is pull-only. A push
    /// refused as forbidden (write access revoked meanwhile) is treated the same way.
    func pushOrHold(_ report: inout SyncReport) async throws {
        if canPush {
            switch try await pushAll(&report) {
            case .pushed:
                update { $0.blocked = nil }
                return
            case .held:
                canPush = false
            case .awaitingHeal:
                let waiting = try await unpushedEdits().count
                report.unpushable = waiting
                let reason = "zone \(zoneReference) must be healed from this device's state before its \(waiting) local transaction(s) can follow (the server lost history this store no longer holds as events)"
                pendingWritten()
                update { $0.pending = waiting; $0.blocked = waiting > 0 ? reason : nil }
                return
            }
        }
        cursor.bind(to: store.replicaID)
        // Edits only: the store's record of its schema is pushed once the caller may write, but
        // a reader is not blocked by it.
        let waiting = try await unpushedEdits().count
        report.unpushable = waiting
        let reason = "user may only read zone \(zoneReference): \(waiting) local transaction(s) wait for write access"
        pendingWritten()
        update { $0.pending = waiting; $0.blocked = waiting > 0 ? reason : nil }
    }

    /// How a push ended.
    enum PushEnd {
        /// Everything went out.
        case pushed
        /// The server refused it as forbidden: the edits wait for write access.
        case held
        /// The server expects sequences only the pending heal's state carries: the edits wait
        /// for the heal.
        case awaitingHeal
    }

    func pushAll(_ report: inout SyncReport) async throws -> PushEnd {
        cursor.bind(to: store.replicaID)
        var pending = try await unpushed()
        // Which of them are edits (the status counts those; schema records go out uncounted).
        var edits = try await unpushedEdits()
        let editCount = edits.count
        pendingWritten()
        update { $0.phase = .pushing; $0.pending = editCount }
        var batchLimit = max(1, options.pushBatchSize)
        var reuploaded = false
        var progress = SyncStateMachine.PushProgress(batchSize: 0, replica: store.replicaID, acknowledged: cursor.acknowledged)
        while !pending.isEmpty {
            let (batch, encoded) = try nextBatch(of: pending, count: batchLimit)
            progress.batchSize = batch.count
            progress.firstSequences = batch.first?.sequences
            progress.replica = store.replicaID
            progress.acknowledged = cursor.acknowledged
            // The assets the batch names go first: the server takes no transaction naming bytes
            // it does not hold.
            let named = Self.assetsNamed(byTransactions: encoded)
            try await uploadAssets(named)
            let outcome: Reply<PushAnswer>
            do {
                outcome = try await ask(.push(progress), { try await self.transport.push(zone: self.zoneReference, transactions: encoded, epoch: self.cursor.lifeEpoch) })
            } catch let refusal as SyncError where refusal.code == .assetMissing && !reuploaded {
                // The zone lost an asset this engine uploaded (a server restored from a backup,
                // a link swept): `ask` forgot what the refusal names as held (see
                // `zoneLacksAssets`); upload again, once per push.
                reuploaded = true
                continue
            }
            switch outcome {
            case .answered(let result):
                // The zone's history names the batch's assets now: they may leave the device.
                zoneKeeps(named)
                // Only what this batch holds counts as acknowledged: the server's count may
                // include sequences another copy of this store pushed (with other content), which
                // the next push of ours must meet — and be refused as a fork — rather than skip.
                let batchEnd = batch.last?.sequences.upperBound ?? 0
                cursor.acknowledged = max(cursor.acknowledged, min(result.acknowledged, batchEnd))
                // A push taken from `acknowledged + 1` on: the server held exactly that (else
                // it answers `sequenceGap`), so the count is confirmed.
                cursorVerified = true
                try cursor.save(store: store, zone: zoneReference)
                report.pushedTransactions += batch.count
                let done = batch.count
                var editsDone = 0
                for transaction in batch where edits.removeValue(forKey: transaction.position) != nil { editsDone += 1 }
                pendingWritten()
                update { $0.pushed += done; $0.pending = max(0, $0.pending - editsDone) }
                pending.removeFirst(min(batch.count, pending.count))
                if next(after: .push(progress), answered: .pushed(remaining: pending.count)) == .done { return .pushed }
            case .redirected(.resumePush(let expected), _):
                cursor.acknowledged = min(cursor.acknowledged, expected - 1)
                cursor.pulledBack = min(cursor.pulledBack, cursor.acknowledged)
                try cursor.save(store: store, zone: zoneReference)
                pending = try await unpushed()
                edits = try await unpushedEdits()
                // The log must still hold the sequence the server expects, else pushing again
                // would meet the same gap forever: say what is missing instead.
                if let first = pending.first?.sequences.lowerBound, first != expected {
                    // A heal still pending (refused this sync for what it can wait out: a state
                    // stamped ahead, an asset) is what closes this gap — its state claims what
                    // the log compacted away. The edits wait for it instead of failing every sync.
                    if cursor.healPending { return .awaitingHeal }
                    throw SyncError(.store, "the server expects sequence \(expected) of replica \(store.replicaID), which this store's log no longer holds (compacted away before it was pushed); it starts again at \(first)")
                }
            case .redirected(.splitBatch(let count), _):
                batchLimit = count
            case .redirected(.fork(let kept, let reason, let restamp), let refusal):
                if restamp { progress.restamped = true } else { progress.forks += 1 }
                report.forks.append(try await fork(keepingThrough: kept, reason: reason, restamp: restamp, after: refusal))
                pending = try await unpushed()
                edits = try await unpushedEdits()
            case .redirected(.holdPushes, _):
                return .held
            case .redirected(.startOver, let refusal):
                // Starting over pushes again, against the new zone — once per push.
                guard !startingOverFromPush else { throw refusal }
                startingOverFromPush = true
                defer { startingOverFromPush = false }
                try await startOver(after: refusal, &report)
                return .pushed
            case .redirected(_, let refusal):
                throw refusal
            }
        }
        return .pushed
    }

    /// The next push: at most `count` transactions from the front of `pending`, and no more bytes
    /// than the server accepts in a body (it advertises the limit). A single transaction larger
    /// than that is named in a typed error rather than sent to be refused.
    func nextBatch(of pending: [PendingTransaction], count: Int) throws -> (batch: [PendingTransaction], encoded: [[UInt8]]) {
        let maxBytes = limits?.maxPushBytes ?? .max
        var batch: [PendingTransaction] = []
        var encoded: [[UInt8]] = []
        var bytes = 0
        for transaction in pending.prefix(count) {
            let body = transaction.bytes
            // A frame is the bytes and a varint of their length (at most 10 bytes).
            let framed = body.count + 10
            if batch.isEmpty, framed > maxBytes {
                let sequences = "\(transaction.sequences.lowerBound)...\(transaction.sequences.upperBound)"
                throw SyncError(.tooLarge, "the transaction of replica \(transaction.replica) with sequences \(sequences) is \(body.count) bytes; the server accepts pushes of at most \(maxBytes) bytes, so it cannot be pushed")
            }
            if !batch.isEmpty, bytes + framed > maxBytes { break }
            batch.append(transaction)
            encoded.append(body)
            bytes += framed
        }
        return (batch, encoded)
    }
}
