import StrataCore
import StrataLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes each owner's zones store, for the stored-bytes quota: measured on open and kept
/// up to date by every change.
extension EmbeddedZoneStorage {
    /// The bytes the zones of `owner` occupy: a counter, measured on open and kept by every change.
    public func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64 {
        try checkOpen()
        return (usage[owner] ?? 0) + assets.storedBytes(owner: owner)
    }

    /// Adds `bytes` (which may be negative) to the zone's and its owner's stored bytes.
    func addUsage(_ id: ZoneID, _ bytes: Int64) {
        guard zoneStates[id] != nil else { return }
        zoneStates[id]?.storedBytes += bytes
        usage[id.owner, default: 0] += bytes
    }

    /// Measures the zone's bytes again (after a compaction or a merge changed its files).
    func remeasure(_ id: ZoneID) {
        guard let state = zoneStates[id] else { return }
        addUsage(id, Self.measure(state.log) - state.storedBytes)
    }

    /// The bytes of a zone's log segments (held in memory by the log) and snapshot files.
    static func measure(_ log: SegmentLog) -> Int64 {
        var bytes = log.segments().reduce(Int64(0)) { $0 + $1.byteSize }
        for snapshot in (try? log.snapshots()) ?? [] {
            var info = stat()
            if stat(snapshot.path, &info) == 0 { bytes += Int64(info.st_size) }
        }
        return bytes
    }
}
