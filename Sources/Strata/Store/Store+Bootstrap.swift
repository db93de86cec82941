import Logging
import StrataLog
import Synchronization
import StrataCore

extension Store {
    /// Adopts a projection snapshot from another replica or a server (a zone's snapshot, when
    /// this store's change token has expired, or a healed zone's merged state): merges its whole
    /// state into this store's — nothing this store has is lost (unpushed edits stay), nothing the
    /// snapshot has is missed (remote deletes apply). Returns the number of objects whose visible
    /// state changed; observers get them as a remote change.
    ///
    /// The adoption is recorded in the log (an `AdoptionRecord` naming the state by its SHA-256,
    /// the state kept beside the log under that name), so that the log still names every state
    /// the store holds: a reopen, `strata verify`, `replay`, blame and `diff` replay it as the
    /// merge it was. A snapshot is then written, so a reopen need not merge it again.
    ///
    /// - Parameters:
    ///   - payload: the snapshot payload (the layout of the Strata format article).
    ///   - origin: what is adopted, for people reading the log (`zone alice/notes at position 42`).
    /// - Throws: `StoreError.Code.corruptSnapshot` (nothing changed), or a log error.
    @discardableResult
    @_spi(StrataInternals)
    public func adoptSnapshot(_ payload: [UInt8], origin: String = "a snapshot") async throws -> Int {
        try requireExclusive("adopting a snapshot")
        // The state is on disk before the log names it (see `AdoptedStates`). No compaction runs
        // from here until the record naming it is durable: a compaction prunes the states no
        // record names, and would take this one before its record is appended.
        await compactionGate.enter()
        var gateHeld = true
        defer { if gateHeld { compactionGate.leave() } }
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
        }
        // (A payload refused above leaves its kept copy to the next compaction, which removes
        // what no record names: an earlier record may name the same bytes.)
        let (changes, waiter) = result
        try await waiter.wait()
        gateHeld = false
        compactionGate.leave()
        // A snapshot past the adoption: a reopen loads it instead of merging the state again.
        // The adoption is durable already: a compaction that fails now only makes the next
        // open merge the state again from `adopted/`.
        do {
            try await compact()
        } catch {
            logger.warning("could not compact after adopting a snapshot; the next open merges it again", metadata: [
                "store": "\(directory)", "error": "\(error)",
            ])
        }
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
