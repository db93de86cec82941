import Foundation
import Logging
import Synchronization
public import StrataLog
import StrataCore

extension Store {
    /// Writes a snapshot of the projection (values, provenance, tombstones, each replica's applied
    /// sequences, the schema) covering every commit so far, then retires the log segments it
    /// covers — except those holding this store's transactions that sync has not pushed yet (see
    /// ``StoreOptions/retainsUnpushed``) — and keeps the two newest snapshots. Commits may go on
    /// meanwhile.
    ///
    /// While unpushed transactions are kept, the log is kept from the newest older snapshot that
    /// precedes them (and that snapshot with it), when there is one: a fork that re-authors them
    /// (`fork(keepingThrough:reason:restamp:)`) rebuilds the projection from a snapshot older
    /// than the first transaction it abandons.
    ///
    /// Stores also compact on their own (``StoreOptions/autoCompaction``); compactions run one at
    /// a time, so this waits for one that is running.
    ///
    /// - Throws: `StoreError` — the store failed or is closed, or a log error.
    @discardableResult
    public func compact() async throws -> SnapshotInfo {
        try await compact(automatic: false)
    }

    /// Waits until no automatic compaction is running (one started by a commit or an open that
    /// crossed ``StoreOptions/autoCompaction``'s thresholds). Returns at once when none runs. For
    /// tests and tools that must observe its result: apps need not call it, and ``close()`` waits
    /// for a running compaction anyway.
    public func waitForAutoCompaction() async {
        while let task = core.withLock({ $0.autoCompaction.task }) {
            await task.value
        }
    }

    /// The events and encoded (uncompressed) bytes of the transactions in the log past the newest
    /// snapshot: what the next open replays, and what ``StoreOptions/autoCompaction`` compares
    /// with its thresholds.
    public var historySinceSnapshot: (events: Int, bytes: Int) {
        core.withLock { ($0.autoCompaction.events, $0.autoCompaction.bytes) }
    }

    /// A compaction, one at a time. An automatic one also keeps this store's own transactions
    /// while no sync engine has pinned them (see ``AutoCompaction``).
    func compact(automatic: Bool) async throws -> SnapshotInfo {
        await compactionGate.enter()
        defer { compactionGate.leave() }
        if log.isShared {
            // The process that syncs records its pins on disk; this one's may be older.
            let pins = SyncPins.load(in: directory, replica: replicaID)
            core.withLock { core in if pins.replica == core.replica { core.syncPins = pins } }
        }
        // Shared by processes: in a turn that applies the others' commits first, so the
        // snapshot's position is where this projection really stands.
        let (payload, position, events, bytes) = try await locked(appending: false) { core, turn -> ([UInt8], UInt64, Int, Int) in
            if let failure = core.failure { throw failure }
            if core.closed { throw StoreError(.storeFailed, "the store is closed") }
            // Everything the projection holds has been submitted to the log, up to here, and
            // counted (`submit` counts under this lock).
            return (ProjectionCodec.encode(core.projection), turn?.nextPosition ?? log.nextPosition, core.autoCompaction.events, core.autoCompaction.bytes)
        }
        do {
            // Wait until those commits are durable: a snapshot never covers what a crash could undo.
            try await log.flush()
            let info = try log.writeSnapshot(payload, position: position)
            core.withLock { $0.autoCompaction.covered(events: events, bytes: bytes) }
            let keep = try firstUnpushedPosition(keepingUnpinned: automatic) ?? .max
            let base = keep < info.position ? try forkBase(atOrBelow: keep) : nil
            try log.retireSegments(coveredBy: info, keepingFrom: base?.position ?? keep)
            try pruneSnapshots(keeping: base)
            // Shared by processes: another may have written a state it has not yet recorded.
            try log.whileAlone { try pruneAdoptedStates() }
            // Assets that only retired history named go with it (after the grace period).
            let grace = assetFetching.withLock { $0.collectionGrace }
            do {
                try await collectUnreferencedAssets(grace: grace)
            } catch {
                logger.warning("asset collection after compaction failed; assets stay until the next one", metadata: ["error": "\(error)"])
            }
            return info
        } catch let error as LogError {
            throw StoreError(error)
        }
    }

    /// The newest snapshot, at or below `position` (the first transaction kept for sync) and
    /// within the retained log, that the store's lineage does not taint and that verifies: where
    /// a fork of the kept transactions would rebuild the projection from.
    private func forkBase(atOrBelow position: UInt64) throws -> SnapshotInfo? {
        let identity = core.withLock { $0.identity }
        let start = log.startPosition
        for info in try log.snapshots() where info.position <= position && info.position >= start {
            if identity.isTainted(snapshotAt: info.position) { continue }
            if (try? log.readSnapshot(info)) != nil { return info }
        }
        return nil
    }

    /// Deletes the adopted states that no adoption record in the retained log names any more
    /// (their effect is in the snapshots that replaced those entries), and temporary files of
    /// interrupted writes. The retained log is read only while some state is kept: after an
    /// adoption, until the segment holding its record is retired. Runs under the compaction gate,
    /// which an adoption holds from writing its state until its record is durable.
    private func pruneAdoptedStates() throws {
        let adopted = AdoptedStates(storeDirectory: directory)
        guard !adopted.isEmpty else { return }
        var named: Set<String> = []
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries where AdoptionRecord.isAdoption(entry.payload) {
                    named.insert(try AdoptionRecord(decoding: entry.payload, position: entry.position).contentHash)
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        try adopted.prune(keeping: named)
    }

    /// Deletes the snapshots older than the two newest that verify, except `base`.
    private func pruneSnapshots(keeping base: SnapshotInfo?) throws {
        guard let base else {
            try log.pruneSnapshots(keeping: 2)
            return
        }
        // Shared by processes: under the commit lock, which an opening process holds while it
        // reads a snapshot.
        try log.withCommitLock { try pruneSnapshots(keeping: base, above: 2) }
    }

    private func pruneSnapshots(keeping base: SnapshotInfo, above kept: Int) throws {
        var valid = 0
        for info in try log.snapshots() {
            if info.position == base.position {
                valid += 1
            } else if valid >= kept {
                do {
                    try FileManager.default.removeItem(atPath: info.path)
                } catch {
                    throw StoreError(.storeFailed, "cannot delete the old snapshot \(info.path): \(error)")
                }
            } else if (try? log.readSnapshot(info)) != nil {
                valid += 1
            }
        }
    }

    // MARK: Automatic compaction

    /// Starts a background compaction when the history past the newest snapshot exceeds the
    /// store's ``StoreOptions/autoCompaction`` thresholds and none runs.
    func startAutoCompactionIfDue() {
        core.withLock { startAutoCompactionIfDue(core: $0) }
    }

    /// The same, under the store's lock. The compaction runs in a task of its own: the caller
    /// (a commit) does not wait for it.
    func startAutoCompactionIfDue(core: StoreCore) {
        guard core.autoCompaction.task == nil,
              core.autoCompaction.isDue(closed: core.closed, failed: core.failure != nil) else { return }
        core.autoCompaction.task = Task.detached(priority: .utility) { [self] in
            await runAutoCompaction()
        }
    }

    /// Compacts until the history past the newest snapshot is under the thresholds again (commits
    /// may have crossed them anew meanwhile), then clears the task — under the lock where commits
    /// check, so that a crossing is never missed.
    private func runAutoCompaction() async {
        while true {
            var failed = false
            do {
                let info = try await compact(automatic: true)
                logger.debug("compacted automatically", metadata: ["store": "\(directory)", "snapshot": "\(info.name)"])
            } catch {
                let closed = core.withLock { $0.closed }
                if !closed {
                    logger.error("automatic compaction failed; the store tries again later", metadata: [
                        "store": "\(directory)", "error": "\(error)",
                    ])
                }
                failed = true
            }
            let again = core.withLock { core -> Bool in
                if failed {
                    core.autoCompaction.failedAt = (core.autoCompaction.events, core.autoCompaction.bytes)
                } else if core.autoCompaction.isDue(closed: core.closed, failed: core.failure != nil) {
                    // The commits made during this compaction crossed a threshold again.
                    return true
                }
                core.autoCompaction.task = nil
                return false
            }
            if !again { return }
        }
    }
}
