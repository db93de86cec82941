import StrataLog
import Synchronization
public import StrataCore

extension Store {
    /// The store's history by content (`HistoryDigests`): every event its log still holds —
    /// not those only a snapshot holds (the log before it retired), not an adoption record's
    /// state, not a withheld event, not a transaction a fork abandoned — fingerprinted without
    /// local-only attributes in its own replicas' events. What a device compares with a zone on a server (see
    /// `HTTPSyncTransport.zoneDigests`) or with another store (`DigestBisection`).
    ///
    /// Reads the whole log: about a second per million events.
    public func historyDigests() throws -> HistoryDigests {
        let (localOnly, identity) = core.withLock { ($0.projection.schema.localOnlyAttributes, $0.identity) }
        var builder = HistoryDigests.Builder()
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries where !AdoptionRecord.isAdoption(entry.payload) {
                    if !identity.lineage.isEmpty,
                       identity.isAbandoned(header: try TransactionHeader(decoding: entry.payload, position: entry.position), position: entry.position) {
                        continue
                    }
                    builder.add(try EventCodec.decodeRaw(entry.payload, position: entry.position), leavingOut: localOnly, own: identity.ownReplicas)
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        return builder.finish()
    }

    /// The store's state by object (`StateDigests`): each existing object's fingerprint — its
    /// entity, visible values (local-only attributes left out) and to-many members — sorted by
    /// ID. What a device compares with a zone's state on a server (see
    /// `HTTPSyncTransport.zoneStateDigests`) or with another store (`StateBisection`) to find
    /// the objects that differ, whatever each side's history still holds.
    ///
    /// Visits every object once, on a view of the store's state (see ``read(_:)``): commits go
    /// on meanwhile.
    public func stateDigests() -> StateDigests {
        read { $0.projection.stateDigests() }
    }
}
