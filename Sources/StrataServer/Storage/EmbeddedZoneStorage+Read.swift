import Foundation
public import StrataCore
public import StrataProtocol
import StrataLog
import Logging

/// Reads: the log's transactions, positions, replicas, fingerprints and snapshots, and the
/// zone's export.
extension EmbeddedZoneStorage {
    /// The zone's transactions from a position on, from its log (see the protocol's
    /// `read(zone:epoch:after:limit:)` for the errors).
    public nonisolated func read(zone id: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
        guard limit > 0 else { throw ZoneStorageError(.invalidArgument, "the limit must be positive, got \(limit)", zone: id.description) }
        let (log, zoneEpoch) = try await readHandle(id)
        if let epoch, epoch != zoneEpoch {
            throw ZoneStorageError(.zoneReset, "zone \(id) was reset: its epoch is \(Self.hex(zoneEpoch)), not \(Self.hex(epoch))", zone: id.description)
        }
        let start = log.startPosition
        let end = log.endPosition
        guard position >= start else {
            throw ZoneStorageError(.positionRetired, "zone \(id): position \(position) was retired; the zone's history starts at \(start)", zone: id.description)
        }
        guard position <= end else {
            throw ZoneStorageError(.positionBeyondEnd, "zone \(id): position \(position) is past the end of the log (\(end))", zone: id.description)
        }
        let entries: [StoredEntry]
        do {
            // A page can be megabytes to read and decompress: off the cooperative pool, which the
            // server's other requests need meanwhile.
            entries = try await BlockingIO.run { try log.entries(from: position, limit: limit) }
        } catch {
            // Deleted (the log closed) or reset while reading?
            guard let current = try await zone(id) else { throw Self.notFound(id) }
            if current.epoch != zoneEpoch {
                throw ZoneStorageError(.zoneReset, "zone \(id) was reset while it was read", zone: id.description)
            }
            throw ZoneStorageError(.storageFailure, "zone \(id): reading from position \(position) failed: \(error)", zone: id.description)
        }
        let next = entries.last.map { $0.position + 1 } ?? position
        return ReadResult(epoch: zoneEpoch,
                          transactions: entries.map { ZoneEntry(position: $0.position, bytes: $0.payload) },
                          nextPosition: next, moreComing: next < log.endPosition)
    }

    public func endPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).log.endPosition
    }

    public func startPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).log.startPosition
    }

    public func replicas(zone id: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] {
        try await usableZone(id).ledgers.map { ReplicaInfo(replica: $0.key, user: $0.value.owner, acknowledged: $0.value.acknowledged) }
            .sorted { $0.replica < $1.replica }
    }

    /// The position of the zone's newest snapshot, or `nil` when it has none.
    public func snapshotPosition(zone id: ZoneID) async throws(ZoneStorageError) -> UInt64? {
        let state = try await usableZone(id)
        do {
            return try state.log.snapshots().map(\.position).max()
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): listing its snapshots failed: \(error)", zone: id.description)
        }
    }

    /// The zone's newest snapshot, or `nil` when it was never compacted.
    public func snapshot(zone id: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? {
        let state = try await usableZone(id)
        do {
            guard let snapshot = try state.log.latestValidSnapshot().snapshot else { return nil }
            return ZoneSnapshot(epoch: state.info.epoch, position: snapshot.info.position, payload: snapshot.payload)
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): reading its snapshot failed: \(error)", zone: id.description)
        }
    }

    /// The fingerprint of the zone's history before `position`: its `HistoryChain` value (see
    /// ``ZoneStorage/fingerprint(zone:at:)``).
    public func fingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        return try await usableZone(id).chain.value(at: position)
    }

    /// 64 bits of the digest of the transaction at `position - 1`: what version 3 tokens carry
    /// (see ``ZoneStorage/lastTransactionFingerprint(zone:at:)``).
    public func lastTransactionFingerprint(zone id: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
        guard position > 0 else { return nil }
        let state = try await usableZone(id)
        for ledger in state.ledgers.values {
            if let held = ledger.held(atPosition: position - 1) { return held.digest.high }
        }
        return nil
    }

    /// The highest sequence the zone holds for `replica` (0 when none).
    public func acknowledged(zone id: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
        try await usableZone(id).ledgers[replica]?.acknowledged ?? 0
    }

    /// The zone's export (see ``ZoneExport``).
    func exportState(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneExport {
        let state = try await usableZone(id)
        let start = state.log.startPosition, end = state.log.endPosition
        let snapshot: ZoneSnapshot?
        do {
            snapshot = try state.log.latestValidSnapshot().snapshot.map {
                ZoneSnapshot(epoch: state.info.epoch, position: $0.info.position, payload: $0.payload)
            }
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(id): reading its snapshot failed: \(error)", zone: id.description)
        }
        var chain: [UInt64] = []
        for position in start...end {
            guard let value = state.chain.value(at: position) else {
                throw ZoneStorageError(.storageFailure, "zone \(id): its history chain does not cover position \(position)", zone: id.description)
            }
            chain.append(value)
        }
        return ZoneExport(info: state.info, start: start, end: end, snapshot: snapshot, ledgers: state.ledgers, chain: chain)
    }

    func readHandle(_ name: ZoneID) async throws(ZoneStorageError) -> (SegmentLog, UInt64) {
        let state = try await usableZone(name)
        return (state.log, state.info.epoch)
    }
}
