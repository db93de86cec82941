import Foundation
import StrataCore
import StrataProtocol
import StrataLog
import Logging

/// Compaction: a snapshot of the zone's state, the digests below it kept, the segments it
/// covers retired.
extension EmbeddedZoneStorage {
    /// Snapshots a zone's state (a projection of its transactions, `StrataCore`'s `ProjectionBuilder`) at the position
    /// `retaining` transactions before its end, and retires the log segments wholly below it.
    /// Clients whose change token points into retired history get `410 tokenExpired` and
    /// bootstrap from ``snapshot(zone:)``. The digests of the transactions below the snapshot are
    /// written first (`retired-digests`), so that retries of retired transactions are still
    /// checked for forks.
    @discardableResult
    public func compact(zone id: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
        let state = try await usableZone(id)
        let end = state.log.endPosition
        let cutoff = end > retaining ? end - retaining : 0
        do {
            let payload = try Self.projection(of: state.log, through: cutoff).snapshotPayload()
            try writeSnapshot(payload, at: cutoff, of: state)
            remeasure(id)
            logger.info("zone compacted", metadata: ["zone": "\(id)", "position": "\(cutoff)", "start": "\(state.log.startPosition)"])
            return ZoneSnapshot(epoch: state.info.epoch, position: cutoff, payload: payload)
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure, "zone \(id): compaction failed: \(error)", zone: id.description)
        }
    }

    /// The zone's state through `position`: its newest usable snapshot, then the log.
    static func projection(of log: SegmentLog, through position: UInt64) throws -> ProjectionBuilder {
        var builder = ProjectionBuilder()
        var from = log.startPosition
        if let previous = try log.latestValidSnapshot().snapshot, previous.info.position <= position, previous.info.position >= from {
            builder = try ProjectionBuilder(snapshot: previous.payload)
            from = previous.info.position
        }
        if from < position {
            var cursor = try log.records(from: from)
            reading: while let record = try cursor.next() {
                for entry in record.entries where entry.position >= from {
                    if entry.position >= position { break reading }
                    try builder.apply(encoded: entry.payload)
                }
            }
        }
        return builder
    }

    /// Writes a snapshot of the zone at `position`, then the digests of what lies below it, then
    /// retires the segments it covers.
    func writeSnapshot(_ payload: [UInt8], at position: UInt64, of state: ZoneState) throws {
        let info = try state.log.writeSnapshot(payload, position: position)
        try ZoneLedgerFiles.saveRetiredDigests(state.ledgers, below: position, in: Self.logDirectory(in: directory, for: state.info))
        try state.log.retireSegments(coveredBy: info)
        zoneStates[state.info.id]?.chain.drop(below: state.log.startPosition)
        try state.log.pruneSnapshots(keeping: 2)
    }
}
