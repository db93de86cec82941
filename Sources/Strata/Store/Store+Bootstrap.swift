import StrataLog
import Synchronization

extension Store {
    /// Adopts a projection snapshot from another replica or a server (a zone's snapshot, when
    /// this store's change token has expired): merges its whole state into this store's — nothing
    /// this store has is lost (unpushed edits stay), nothing the snapshot has is missed (remote
    /// deletes apply) — then writes a store snapshot so the merged state survives a restart.
    /// Returns the number of objects whose visible state changed; observers get them as a remote
    /// change.
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` (nothing changed), or a log error.
    @discardableResult
    @_spi(StrataInternals)
    public func adoptSnapshot(_ payload: [UInt8]) async throws -> Int {
        let changes = try core.withLock { core -> [ObjectChange] in
            if let failure = core.failure { throw failure }
            let other = Projection()
            try ProjectionCodec.decode(payload, into: other)
            let projection = core.projection
            projection.beginBatch()
            do {
                try projection.merge(from: other)
            } catch {
                projection.rollbackBatch()
                throw error
            }
            core.projection.schema = projection.recordedSchema.merged(with: projection.schema)
            core.clock.observe(HLC(rawValue: projection.maxHLC))
            // Events of this store's own replica that it did not author here come from another copy
            // of the store (a restored backup): never author those sequences again (the server
            // then tells the copies apart, and the one that pushes second forks).
            core.nextSequence = max(core.nextSequence, projection.highestSequence(of: core.replica) + 1)
            return projection.commitBatch(report: true)
        }
        // The merged state is not in this store's log as events: a snapshot of it is what a reopen
        // loads (until it is written, a crash simply loses the adoption and the sync repeats it).
        try await compact()
        deliver(ChangeSet(origin: .remote, positions: segmentLog.endPosition..<segmentLog.endPosition, changes: changes))
        return changes.count
    }

    /// The store's whole state as a projection snapshot payload (what `adoptSnapshot(_:)` of
    /// another store merges): every value with the event that set it, tombstones, set adds and
    /// removes, the applied sequences. Sync uploads it to heal a zone that lost history this store
    /// has (a server restored from a backup, a zone recreated), including history compacted away
    /// here and events other devices authored.
    @_spi(StrataInternals)
    public func statePayload() throws -> [UInt8] {
        try core.withLock { core in
            if let failure = core.failure { throw failure }
            return ProjectionCodec.encode(core.projection)
        }
    }
}
