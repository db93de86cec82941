public import StrataCore
public import StrataProtocol

/// What a zone holds beside its log entries — its metadata, snapshot, every replica's ledger
/// (owner, highest sequence, the digests of held transactions, retired ones included) and its
/// history chain — so that another backend can take the zone over exactly: same epoch, merges,
/// positions, tokens and fork checks (`strata migrate`).
package struct ZoneExport: Sendable {
    package var info: ZoneInfo
    /// The first position the log holds, and its end.
    package var start: UInt64
    package var end: UInt64
    package var snapshot: ZoneSnapshot?
    package var ledgers: [ReplicaID: ReplicaLedger]
    /// The history chain at `start`, `start + 1`, … `end`.
    package var chain: [UInt64]
}

extension EmbeddedZoneStorage {
    /// The zone's ``ZoneExport``; its log entries are read with ``read(zone:epoch:after:limit:)``.
    package func export(zone id: ZoneID) async throws(ZoneStorageError) -> ZoneExport {
        try await exportState(id)
    }
}

/// A summary of a zone that two storages holding the same zone agree on: its metadata, the
/// positions its log holds, the fingerprint of its whole history, its replicas and the digest of
/// its state (snapshot and log replayed). `strata migrate` compares them after a copy.
public struct ZoneDigest: Sendable, Hashable, CustomStringConvertible {
    public var info: ZoneInfo
    public var start: UInt64
    public var end: UInt64
    public var fingerprint: UInt64?
    public var replicas: [ReplicaInfo]
    /// `ProjectionBuilder.digest()` of the zone's state at its end.
    public var state: String

    /// Reads the zone from `storage` (its whole retained log).
    public init(zone id: ZoneID, in storage: any ZoneStorage) async throws {
        guard let info = try await storage.zone(id) else { throw ZoneStorageError(.zoneNotFound, "no zone \(id)", zone: id.description) }
        self.info = info
        start = try await storage.startPosition(zone: id)
        end = try await storage.endPosition(zone: id)
        fingerprint = try await storage.fingerprint(zone: id, at: end)
        replicas = try await storage.replicas(zone: id)
        var builder = ProjectionBuilder()
        var position = start
        if let snapshot = try await storage.snapshot(zone: id) {
            builder = try ProjectionBuilder(snapshot: snapshot.payload)
            position = snapshot.position
        }
        while position < end {
            let page = try await storage.read(zone: id, epoch: info.epoch, after: position, limit: 1000)
            for entry in page.transactions { _ = try builder.apply(encoded: entry.bytes) }
            guard page.nextPosition > position else { break }
            position = page.nextPosition
        }
        state = builder.digest()
    }

    public var description: String {
        "zone \(info.id): positions \(start)..<\(end), history \(fingerprint.map { String($0, radix: 16) } ?? "none"), \(replicas.count) replicas, state \(state)"
    }
}
