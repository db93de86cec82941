import StrataCore
import StrataLog
import StrataProtocol

/// The digest of a zone's state at a position (`ProjectionBuilder.digest()`, the same canonical
/// SHA-256 a device's `Store.digest()` gives), which the device registry compares a device's
/// report with.
///
/// Each zone's state is kept as a projection (its snapshot, then its log replayed) and moved
/// forward as devices report later positions, so that the devices of a zone, which report where
/// their syncs end — mostly the zone's end — cost one replay of what was appended since, plus one
/// digest per position. Digests already computed are remembered (the newest `keptDigests` per
/// zone): every device reporting the same position costs a lookup. A report of a position behind
/// the kept projection is answered by a replay from the snapshot that is not kept.
///
/// A projection is built again when it no longer describes the zone: another life (epoch),
/// another snapshot (a compaction or a merged device state), or another history at its position
/// (a server restored from a backup: the history chain differs there).
///
/// Memory: one projection per zone (and its state by object at up to two positions, for remote
/// diffs), dropped least recently used first past `maxEvents` events and objects in all (the one
/// just used is kept, whatever its size).
actor ZoneStateDigests {
    /// Why a state could not be computed at a position.
    enum Unavailable: Error, Sendable {
        /// The position is before the zone's snapshot: what the zone held there is compacted.
        case compacted(snapshot: UInt64)
        /// The position is behind the kept projection and the zone's state was replayed from its
        /// snapshot within the last ``ZoneStateDigests/replayInterval``: not again so soon.
        case behind(kept: UInt64)
    }

    /// A zone's life and, within it, its generation (the newest device state merged into it):
    /// a merge replaces the zone's state at a position without appending anything there.
    private struct Key: Hashable {
        var zone: ZoneID
        var epoch: UInt64
        var generation: UInt64
    }

    /// A state by object, and when it was last used.
    private struct KeptObjects {
        var state: StateDigests
        var used: UInt64
    }

    private struct Entry {
        var builder: BuilderBox
        /// The snapshot the projection started from (`nil`: the log's start), and the position
        /// it has applied through.
        var base: UInt64?
        var next: UInt64
        var chain: UInt64?
        var digests: [UInt64: String]
        /// The state by object at a position or two (a remote diff's rounds ask at one).
        var objects: [UInt64: KeptObjects] = [:]
        var used: UInt64
        /// When a position behind ``next`` was last replayed from the snapshot.
        var replayedBehind: Duration?
    }

    /// How often, at most, a zone's state is replayed from its snapshot for a position behind its
    /// kept projection: a device reporting an old position is answered `unverified` in between,
    /// so that reports cycling through old tokens cost the server one replay a minute per zone.
    static let replayInterval: Duration = .seconds(60)
    private let now: @Sendable () -> Duration

    private let storage: any ZoneStorage
    private let maxEvents: UInt64
    private let keptDigests: Int
    private let pageSize: Int
    private var entries: [Key: Entry] = [:]
    private var busy: Set<Key> = []
    private var waiters: [Key: [CheckedContinuation<Void, Never>]] = [:]
    private var uses: UInt64 = 0
    /// How many times each zone was forgotten (deleted): a computation under way when it was
    /// does not put the deleted zone's projection back.
    private var forgets: [ZoneID: UInt64] = [:]

    init(storage: any ZoneStorage, maxEvents: UInt64 = 8_000_000, keptDigests: Int = 64, pageSize: Int = 2_000,
         now: @escaping @Sendable () -> Duration = ServerClock.system.elapsed) {
        self.storage = storage
        self.now = now
        self.maxEvents = maxEvents
        self.keptDigests = keptDigests
        self.pageSize = pageSize
    }

    /// The digest of the zone's state through `position` (the transactions before it), in life
    /// `epoch`.
    ///
    /// - Throws: ``Unavailable`` when the zone's snapshot is past `position`;
    ///   ``ZoneStorageError`` from the storage; `StoreError` for a transaction or snapshot that
    ///   does not decode.
    func digest(zone: ZoneID, epoch: UInt64, generation: UInt64, at position: UInt64) async throws -> String {
        guard case .digest(let digest) = try await state(zone: zone, epoch: epoch, generation: generation, at: position, kind: .digest) else {
            throw ServerError(.internalError, "zone \(zone): the state's digest was asked for and something else computed")
        }
        return digest
    }

    /// The zone's state by object (``StateDigests``) through `position`, in life `epoch`: what a
    /// remote diff bisects. Throws as ``digest(zone:epoch:generation:at:)`` does.
    func objects(zone: ZoneID, epoch: UInt64, generation: UInt64, at position: UInt64) async throws -> StateDigests {
        guard case .objects(let objects) = try await state(zone: zone, epoch: epoch, generation: generation, at: position, kind: .objects) else {
            throw ServerError(.internalError, "zone \(zone): the state by object was asked for and something else computed")
        }
        return objects
    }

    /// What is computed from a projection.
    private enum Kind { case digest, objects }
    private enum Computed {
        case digest(String)
        case objects(StateDigests)
    }

    /// How many positions' state by object an entry keeps.
    private static let keptObjectStates = 2

    private static func known(_ entry: Entry, at position: UInt64, _ kind: Kind) -> Computed? {
        switch kind {
        case .digest: entry.digests[position].map(Computed.digest)
        case .objects: entry.objects[position].map { Computed.objects($0.state) }
        }
    }

    private func remember(_ computed: Computed, at position: UInt64, in entry: inout Entry) {
        switch computed {
        case .digest(let digest):
            entry.digests[position] = digest
            if entry.digests.count > keptDigests, let oldest = entry.digests.keys.min() { entry.digests[oldest] = nil }
        case .objects(let objects):
            // The least recently used goes, never the one just computed: a comparison pinned to
            // an older position keeps its state while newer ones are asked for.
            entry.objects[position] = KeptObjects(state: objects, used: uses)
            if entry.objects.count > Self.keptObjectStates,
               let stale = entry.objects.filter({ $0.key != position }).min(by: { $0.value.used < $1.value.used })?.key {
                entry.objects[stale] = nil
            }
        }
    }

    private static func compute(_ kind: Kind, _ builder: BuilderBox) async throws -> Computed {
        switch kind {
        case .digest: .digest(try await digest(builder))
        case .objects: .objects(try await BlockingIO.run { builder.value.stateDigests() })
        }
    }

    private func state(zone: ZoneID, epoch: UInt64, generation: UInt64, at position: UInt64, kind: Kind) async throws -> Computed {
        let key = Key(zone: zone, epoch: epoch, generation: generation)
        // One computation per zone at a time: a second report waits for the first's projection.
        while busy.contains(key) {
            await withCheckedContinuation { waiters[key, default: []].append($0) }
        }
        busy.insert(key)
        let life = forgets[zone, default: 0]
        defer {
            busy.remove(key)
            for waiter in waiters.removeValue(forKey: key) ?? [] { waiter.resume() }
        }
        // The snapshot's position only: its payload is read when a projection is built.
        let snapshotPosition = try await storage.snapshotPosition(zone: zone)
        if let snapshotPosition, snapshotPosition > position { throw Unavailable.compacted(snapshot: snapshotPosition) }
        var entry = entries.removeValue(forKey: key)
        if let kept = entry {
            let chain = try await storage.fingerprint(zone: zone, at: kept.next)
            if kept.base != snapshotPosition || chain != kept.chain { entry = nil }
        }
        uses += 1
        if var kept = entry, let known = Self.known(kept, at: position, kind) {
            kept.used = uses
            kept.objects[position]?.used = uses
            keep(kept, key, life)
            return known
        }
        if var kept = entry, kept.next <= position {
            // Forward from the kept projection, which is kept.
            kept.next = try await Self.apply(zone: zone, epoch: epoch, from: kept.next, to: position, into: kept.builder, storage: storage, pageSize: pageSize)
            kept.chain = try await storage.fingerprint(zone: zone, at: kept.next)
            let computed = try await Self.compute(kind, kept.builder)
            remember(computed, at: position, in: &kept)
            kept.used = uses
            keep(kept, key, life)
            evict(keeping: key)
            return computed
        }
        // A new projection (none kept, or the kept one is past `position`: then at most once per
        // `replayInterval`).
        if var kept = entry {
            if let last = kept.replayedBehind, now() - last < Self.replayInterval {
                keep(kept, key, life)
                throw Unavailable.behind(kept: kept.next)
            }
            kept.replayedBehind = now()
            entry = kept
        }
        let snapshot = try await storage.snapshot(zone: zone)
        if let snapshot, snapshot.position > position { throw Unavailable.compacted(snapshot: snapshot.position) }
        let builder: BuilderBox
        let start: UInt64
        if let snapshot {
            builder = BuilderBox(try ProjectionBuilder(snapshot: snapshot.payload))
            start = snapshot.position
        } else {
            builder = BuilderBox(ProjectionBuilder())
            start = try await storage.startPosition(zone: zone)
        }
        let next = try await Self.apply(zone: zone, epoch: epoch, from: start, to: position, into: builder, storage: storage, pageSize: pageSize)
        let computed = try await Self.compute(kind, builder)
        if var kept = entry {
            // The kept projection is further on: it stays; this result is remembered beside it.
            remember(computed, at: position, in: &kept)
            kept.used = uses
            keep(kept, key, life)
        } else {
            let chain = try await storage.fingerprint(zone: zone, at: next)
            var fresh = Entry(builder: builder, base: snapshot?.position, next: next, chain: chain, digests: [:], used: uses, replayedBehind: nil)
            remember(computed, at: position, in: &fresh)
            keep(fresh, key, life)
        }
        evict(keeping: key)
        return computed
    }

    /// Applies the zone's transactions at positions `from..<to` to `builder`; returns the
    /// position reached (`to`, or the zone's end when it holds less).
    private static func apply(zone: ZoneID, epoch: UInt64, from: UInt64, to: UInt64, into builder: BuilderBox,
                              storage: any ZoneStorage, pageSize: Int) async throws -> UInt64 {
        var position = from
        while position < to {
            try Task.checkCancellation()
            let page = try await storage.read(zone: zone, epoch: epoch, after: position, limit: Int(min(UInt64(pageSize), to - position)))
            let entries = page.transactions.filter { $0.position < to }
            // Decoding and applying a page is CPU work: off the server's cooperative threads.
            try await BlockingIO.run { for entry in entries { _ = try builder.value.apply(encoded: entry.bytes) } }
            guard page.nextPosition > position else { break }
            position = page.nextPosition
            if !page.moreComing { break }
        }
        // A token's position was checked against the zone's end before: a zone that holds less
        // now was rewound meanwhile (a restore), and has no state there.
        guard position >= to else {
            throw ZoneStorageError(.positionBeyondEnd, "zone \(zone) holds no transactions through position \(to) (it ends at \(position))", zone: zone.description)
        }
        return position
    }

    private static func digest(_ builder: BuilderBox) async throws -> String {
        try await BlockingIO.run { builder.value.digest() }
    }

    private func evict(keeping kept: Key) {
        // A kept state by object counts as many events as it holds objects (56 bytes an object,
        // about what a projection spends on an event).
        func weight(_ entry: Entry) -> UInt64 {
            entry.builder.value.eventCount + entry.objects.values.reduce(UInt64(0)) { $0 + UInt64($1.state.count) }
        }
        var total = entries.values.reduce(UInt64(0)) { $0 + weight($1) }
        guard total > maxEvents else { return }
        for (key, entry) in entries.sorted(by: { $0.value.used < $1.value.used }) where key != kept {
            entries[key] = nil
            total -= min(total, weight(entry))
            if total <= maxEvents { return }
        }
    }

    /// Keeps `entry` for `key`, unless its zone was forgotten since the computation began (in
    /// life `life`).
    private func keep(_ entry: Entry, _ key: Key, _ life: UInt64) {
        guard forgets[key.zone, default: 0] == life else { return }
        entries[key] = entry
    }

    /// Forgets a zone's projections (it was deleted).
    func forget(_ zone: ZoneID) {
        forgets[zone, default: 0] += 1
        for key in entries.keys where key.zone == zone { entries[key] = nil }
    }
}

/// A projection handed to the blocking-I/O queue: only ever used by the one computation of its
/// zone under way (``ZoneStateDigests`` runs one per zone at a time), never concurrently.
private final class BuilderBox: @unchecked Sendable {
    let value: ProjectionBuilder
    init(_ value: ProjectionBuilder) { self.value = value }
}
