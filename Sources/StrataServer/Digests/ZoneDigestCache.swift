import StrataCore
import StrataLog

/// The history digests of zones (``HistoryDigests``), built from a zone's log on first use and
/// extended with what was appended since on later ones — so that the rounds of a device's
/// bisection cost a lookup each, not a read of the whole zone.
///
/// A masked device compares with what it may see: its digests are built over the transactions as
/// a pull with its mask answers them (withheld events have no fingerprint; its own replica's
/// transactions are not masked), so an entry belongs to a zone, a mask and, when masked, a
/// puller. A zone in a new life (deleted and created again: another epoch) starts a new entry.
/// An entry covers the zone from its newest snapshot on (what a new reader may pull: the history
/// before it only a device that pulled it then can have), and is built again when the zone
/// compacted since (so that what a compaction covered is not answered to a reader who could only
/// get the snapshot now),
/// and when the zone's history is no longer the one it was built from (restored from a backup:
/// the history chain's fingerprint at the entry's end differs, or the end moved back).
///
/// Memory: 40 bytes per event held (``SequenceDigests``, with each event's HLC); entries are dropped, least recently
/// used first, past `maxEvents` in all (the one just built is kept, whatever its size).
actor ZoneDigestCache {
    struct Key: Hashable, Sendable {
        var zone: ZoneID
        /// The download mask's canonical text ("" for none).
        var mask: String
        /// The pulling device's replica, for a masked key (its own transactions are not masked).
        var puller: ReplicaID?
    }

    private struct Entry: Sendable {
        var epoch: UInt64
        /// Where the entry's history starts: the zone's snapshot, or its log's start.
        var start: UInt64
        /// The next position to read, and the history chain's fingerprint there.
        var next: UInt64
        var chain: UInt64?
        var digests: HistoryDigests
        var events: Int
        var used: UInt64
    }

    private let storage: any ZoneStorage
    private let maxEvents: Int
    /// Transactions read per storage call while building.
    private let pageSize: Int
    private var entries: [Key: Entry] = [:]
    private var running: [Key: Task<Entry, any Error>] = [:]
    private var uses: UInt64 = 0

    init(storage: any ZoneStorage, maxEvents: Int = 16_000_000, pageSize: Int = 2_000) {
        self.storage = storage
        self.maxEvents = maxEvents
        self.pageSize = pageSize
    }

    /// The zone's digests through its current end, in life `epoch`.
    ///
    /// - Throws: ``ZoneStorageError`` from the storage (`zoneReset` when the zone's epoch is no
    ///   longer `epoch`), or `StoreError` for a transaction that does not decode.
    func digests(zone: ZoneID, epoch: UInt64, mask: DownloadMask?, puller: ReplicaID?) async throws -> HistoryDigests {
        let key = Key(zone: zone, mask: mask?.description ?? "", puller: mask == nil ? nil : puller)
        // One build or extension of a key at a time: a second request waits for the first's.
        while let task = running[key] { _ = await task.result }
        // Taken out while it is extended: its arrays are then extended in place, not copied.
        let start = entries.removeValue(forKey: key).flatMap { $0.epoch == epoch ? $0 : nil }
        let storage = storage
        let pageSize = pageSize
        let task = Task { try await Self.extend(start, zone: zone, epoch: epoch, mask: mask, puller: puller, storage: storage, pageSize: pageSize) }
        running[key] = task
        defer { running[key] = nil }
        var entry = try await task.value
        uses += 1
        entry.used = uses
        entries[key] = entry
        evict(keeping: key)
        return entry.digests
    }

    /// `entry` (or a new one) with the zone's transactions from its `next` position to the end.
    private static func extend(_ entry: Entry?, zone: ZoneID, epoch: UInt64, mask: DownloadMask?, puller: ReplicaID?,
                               storage: any ZoneStorage, pageSize: Int) async throws -> Entry {
        // The zone's history as a new reader may have it: from its snapshot on (before it, only a
        // device that pulled it then holds it), or from its log's start.
        let start = max(try await storage.startPosition(zone: zone), try await storage.snapshotPosition(zone: zone) ?? 0)
        var entry = entry
        if let kept = entry {
            let end = try await storage.endPosition(zone: zone)
            let chain = try await storage.fingerprint(zone: zone, at: kept.next)
            // Retired history, or another history than the one read: built again from the start.
            if start > kept.start || end < kept.next || chain != kept.chain { entry = nil }
        }
        var position = entry?.next ?? start
        var replicas = entry?.digests.replicas ?? [:]
        var events = entry?.events ?? 0
        entry = nil
        while true {
            try Task.checkCancellation()
            let page: ReadResult
            switch await read(storage, zone: zone, epoch: epoch, after: position, limit: pageSize) {
            case .success(let read):
                page = read
            case .failure(let error) where error.code == .positionRetired || error.code == .positionBeyondEnd:
                // Compacted or rewound meanwhile: read again from the start as it is now.
                return try await extend(nil, zone: zone, epoch: epoch, mask: mask, puller: puller, storage: storage, pageSize: pageSize)
            case .failure(let error):
                throw error
            }
            // Decoding and hashing a page is CPU work: off the server's cooperative threads.
            let transactions = page.transactions
            let pairs = try await BlockingIO.run { try Self.fingerprints(transactions, mask: mask, puller: puller) }
            for (replica, new) in pairs {
                events += new.count
                replicas[replica, default: SequenceDigests([])].add(new)
            }
            position = page.nextPosition
            if !page.moreComing { break }
        }
        let chain = try await storage.fingerprint(zone: zone, at: position)
        return Entry(epoch: epoch, start: start, next: position, chain: chain, digests: HistoryDigests(replicas: replicas), events: events, used: 0)
    }

    /// The fingerprints of a page's events by replica, as a pull with `mask` answers them.
    private static func fingerprints(_ transactions: [ZoneEntry], mask: DownloadMask?, puller: ReplicaID?) throws
        -> [ReplicaID: [SequenceDigests.Held]] {
        var pairs: [ReplicaID: [SequenceDigests.Held]] = [:]
        for transaction in transactions {
            var bytes = transaction.bytes
            if AdoptionRecord.isAdoption(bytes) { continue }
            if let mask, !mask.isEmpty {
                let own = try puller.map { try TransactionHeader(decoding: bytes).replica == $0 } ?? false
                if !own { bytes = try TransactionMask.apply(mask, to: bytes) }
            }
            let decoded = try EventCodec.decodeRaw(bytes, position: transaction.position)
            pairs[decoded.replica, default: []].append(contentsOf: decoded.fingerprints())
        }
        return pairs
    }

    private static func read(_ storage: any ZoneStorage, zone: ZoneID, epoch: UInt64, after position: UInt64,
                             limit: Int) async -> Result<ReadResult, ZoneStorageError> {
        do {
            return .success(try await storage.read(zone: zone, epoch: epoch, after: position, limit: limit))
        } catch {
            return .failure(error)
        }
    }

    private func evict(keeping kept: Key) {
        var total = entries.values.reduce(0) { $0 + $1.events }
        guard total > maxEvents else { return }
        for (key, entry) in entries.sorted(by: { $0.value.used < $1.value.used }) where key != kept {
            entries[key] = nil
            total -= entry.events
            if total <= maxEvents { return }
        }
    }

    /// Forgets a zone's entries (it was deleted).
    func forget(_ zone: ZoneID) {
        for key in entries.keys where key.zone == zone { entries[key] = nil }
    }
}
