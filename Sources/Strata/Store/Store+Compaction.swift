import Synchronization
public import StrataLog

extension Store {
    /// Writes a snapshot of the projection (values, provenance, tombstones, each replica's applied
    /// sequences, the schema) covering every commit so far, then retires the log segments it
    /// covers — except those holding this store's transactions that sync has not pushed yet (see
    /// ``StoreOptions/retainsUnpushed``) — and keeps the two newest snapshots. Commits may go on
    /// meanwhile.
    @discardableResult
    public func compact() async throws -> SnapshotInfo {
        let (payload, position) = try core.withLock { core -> ([UInt8], UInt64) in
            if let failure = core.failure { throw failure }
            // Everything the projection holds has been submitted to the log, up to here.
            return (ProjectionCodec.encode(core.projection), log.nextPosition)
        }
        do {
            // Wait until those commits are durable: a snapshot never covers what a crash could undo.
            try await log.flush()
            let info = try log.writeSnapshot(payload, position: position)
            try log.retireSegments(coveredBy: info, keepingFrom: try firstUnpushedPosition() ?? .max)
            try log.pruneSnapshots(keeping: 2)
            return info
        } catch let error as LogError {
            throw StoreError(error)
        }
    }
}
