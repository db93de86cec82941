import StrataLog
import Synchronization

extension Store {
    /// Adopts a projection snapshot from another replica or a server (a zone's snapshot, when
    /// this store's change token has expired, or a healed zone's merged state): merges its whole
    /// state into this store's — nothing this store has is lost (unpushed edits stay), nothing the
    /// snapshot has is missed (remote deletes apply). Returns the number of objects whose visible
    /// state changed; observers get them as a remote change.
    ///
    /// The adoption is recorded in the log (an ``AdoptionRecord`` naming the state by its SHA-256,
    /// the state kept beside the log under that name), so that the log still names every state
    /// the store holds: a reopen, `strata verify`, `replay`, blame and `diff` replay it as the
    /// merge it was. A snapshot is then written, so a reopen need not merge it again.
    ///
    /// - Parameters:
    ///   - payload: the snapshot payload (the layout of the Strata format article).
    ///   - origin: what is adopted, for people reading the log (`zone alice/notes at position 42`).
    /// - Throws: ``StoreError/Code/corruptSnapshot`` (nothing changed), or a log error.
    @discardableResult
    @_spi(StrataInternals)
    public func adoptSnapshot(_ payload: [UInt8], origin: String = "a snapshot") async throws -> Int {
        // The state is on disk before the log names it (see `AdoptedStates`).
        let adopted = AdoptedStates(storeDirectory: directory)
        let contentHash = try adopted.keep(payload)
        let result: (Int, DurabilityWaiter)
        do {
            result = try core.withLock { core -> (Int, DurabilityWaiter) in
                if let failure = core.failure { throw failure }
                if core.closed { throw StoreError(.storeFailed, "the store is closed") }
                let other = Projection()
                try ProjectionCodec.decode(payload, into: other)
                other.schema = other.recordedSchema
                let record = AdoptionRecord(contentHash: contentHash, size: UInt64(payload.count), stateDigest: other.digest(),
                                            newestHLC: HLC(rawValue: other.maxHLC), origin: origin)
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
                // Events of this store's own replica that it did not author here come from another
                // copy of the store (a restored backup): never author those sequences again (the
                // server then tells the copies apart, and the one that pushes second forks).
                core.nextSequence = max(core.nextSequence, projection.highestSequence(of: core.replica) + 1)
                let changes = projection.commitBatch(report: true)
                return (changes.count, try submit([record.encoded()], origin: .remote, changes: changes, core: core))
            }
        } catch let error as StoreError where error.code == .corruptSnapshot {
            // Refused before the log named it: the kept copy goes (the next compaction would
            // remove it anyway).
            try? adopted.prune(keeping: [], only: contentHash)
            throw error
        }
        let (changes, waiter) = result
        try await waiter.wait()
        // A snapshot past the adoption: a reopen loads it instead of merging the state again.
        try await compact()
        return changes
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
