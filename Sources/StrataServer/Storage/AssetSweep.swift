package import StrataCore
import Synchronization

/// What one ``AssetStorage/sweepAssets(grace:)`` removed.
public struct AssetSweepReport: Sendable, Hashable {
    /// Links of zones to assets no longer named and not confirmed within the grace.
    public var links: Int
    /// Owners' manifests no zone linked any more.
    public var manifests: Int
    /// Chunks no remaining manifest and no upload named.
    public var chunks: Int
    /// Uploads untouched for longer than the grace (abandoned).
    public var uploads: Int
    /// The bytes of the chunks removed: what left the owners' stored bytes.
    public var bytesFreed: Int64

    public init(links: Int = 0, manifests: Int = 0, chunks: Int = 0, uploads: Int = 0, bytesFreed: Int64 = 0) {
        self.links = links
        self.manifests = manifests
        self.chunks = chunks
        self.uploads = uploads
        self.bytesFreed = bytesFreed
    }

    /// Adds another sweep's counts to these.
    public mutating func add(_ other: AssetSweepReport) {
        links += other.links
        manifests += other.manifests
        chunks += other.chunks
        uploads += other.uploads
        bytesFreed += other.bytesFreed
    }
}

/// The time a storage stamps asset confirmations with and sweeps by: the wall clock (milliseconds
/// since 1970, so that stamps outlive the process and compare across PostgreSQL instances), never
/// going backwards within one storage. A wall clock set back would otherwise stamp a confirmation
/// earlier than one it already made, and once set right again make that link look older than it
/// is: here the stamp is the latest reading seen, so ages only ever come out shorter.
package final class AssetTimeline: Sendable {
    private let reading: Mutex<@Sendable () -> UInt64>
    private let latest = Mutex<UInt64>(0)

    package init(_ wallMilliseconds: @escaping @Sendable () -> UInt64 = ServerClock.systemWallMilliseconds) {
        reading = Mutex(wallMilliseconds)
    }

    /// Reads time from `wallMilliseconds` from now on (a storage's options, set after creation).
    package func use(_ wallMilliseconds: @escaping @Sendable () -> UInt64) {
        reading.withLock { $0 = wallMilliseconds }
    }

    /// The latest wall-clock reading so far, in milliseconds since 1970.
    package func now() -> UInt64 {
        let read = reading.withLock { $0 }
        let value = read()
        return latest.withLock { latest in
            latest = max(latest, value)
            return latest
        }
    }

    /// `grace` in whole milliseconds (at least 0).
    package static func milliseconds(_ grace: Duration) -> UInt64 {
        let (seconds, attoseconds) = grace.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds).multipliedReportingOverflow(by: 1000).partialValue &+ UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
    }
}

extension ZoneStorage {
    /// The assets zone `zone`'s retained history names: every transaction of its log from its
    /// start position, and its newest snapshot; `nil` when that cannot be known this time (the
    /// zone deleted or compacted while it was read, or a transaction or snapshot that does not
    /// decode), and then none of the zone's links may be removed.
    ///
    /// The log is read before the snapshot: a compaction in between retires transactions
    /// already read into a snapshot read afterwards, so nothing falls between the two. A push
    /// appended after the read confirmed its assets (``AssetStorage/unheldAssets(zone:user:assets:)``)
    /// moments before, so the grace keeps them.
    ///
    /// A deleted object's assets count until its delete is older than `deletedBefore`
    /// (milliseconds since 1970; the sweep's now minus its grace): deleting a note frees its photo.
    package func assetsNamedByHistory(of zone: ZoneInfo, forgettingDeletedBefore deletedBefore: UInt64? = nil) async -> Set<AssetHash>? {
        var named = Set<AssetHash>()
        do {
            var position = try await startPosition(zone: zone.id)
            while true {
                let result = try await read(zone: zone.id, epoch: zone.epoch, after: position, limit: 256)
                guard result.epoch == zone.epoch else { return nil }
                for entry in result.transactions {
                    named.formUnion(try TransactionSummary(validating: entry.bytes).namedAssets)
                }
                guard result.moreComing, result.nextPosition > position else { break }
                position = result.nextPosition
            }
            if let snapshot = try await snapshot(zone: zone.id) {
                guard snapshot.epoch == zone.epoch else { return nil }
                named.formUnion(try ProjectionCodec.assetsNamed(inSnapshot: snapshot.payload, forgettingDeletedBefore: deletedBefore))
            }
        } catch {
            return nil
        }
        return named
    }
}
