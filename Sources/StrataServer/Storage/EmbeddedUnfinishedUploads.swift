import StrataCore
import StrataLog
import Synchronization

/// The embedded storage's unfinished asset uploads, counted per uploader and per zone for
/// ``UnfinishedUploadLimits``: the upload files (`<owner>/zones/<zone>/uploads/<uploader>/<asset>`)
/// found on open, then kept as uploads begin, complete, are dropped by a sweep, or go with their
/// zone.
final class EmbeddedUnfinishedUploads: Sendable {
    /// What one upload counts against: its zone's directory and its uploader's directory name.
    private struct Counted: Sendable, Hashable {
        var zone: String
        var uploader: String
    }

    /// By upload file path.
    private let uploads: Mutex<[String: Counted]>

    /// Measures the uploads under `root` (the `assets/` directory).
    init(root: String) throws(ZoneStorageError) {
        var found: [String: Counted] = [:]
        for owner in try DurableFile.list(root) {
            let zones = DurableFile.join(DurableFile.join(root, owner), "zones")
            guard DurableFile.isDirectory(zones) else { continue }
            for zone in try DurableFile.list(zones) {
                let zoneDirectory = DurableFile.join(zones, zone)
                let uploads = DurableFile.join(zoneDirectory, "uploads")
                guard DurableFile.isDirectory(uploads) else { continue }
                for uploader in try DurableFile.list(uploads) {
                    let directory = DurableFile.join(uploads, uploader)
                    // A file right in `uploads/` is of the layout before uploads were per uploader:
                    // nobody resumes it (the sweep drops it), so it counts against nobody.
                    guard DurableFile.isDirectory(directory) else { continue }
                    for name in try DurableFile.list(directory) where AssetHash(hex: name) != nil {
                        found[DurableFile.join(directory, name)] = Counted(zone: zoneDirectory, uploader: uploader)
                    }
                }
            }
        }
        uploads = Mutex(found)
    }

    /// Whether the upload at `path` is counted.
    func contains(_ path: String) -> Bool { uploads.withLock { $0[path] != nil } }

    /// Counts a new upload at `path` — refused when it would pass `limits` — in one step with the
    /// check, so that two begins at once cannot both take the last place. An upload already
    /// counted (begun again) passes.
    func reserve(_ path: String, zone: ZoneInfo, zoneDirectory: String, uploader: String, asset: AssetHash,
                 limits: UnfinishedUploadLimits) throws(ZoneStorageError) {
        let counted = Counted(zone: zoneDirectory, uploader: EmbeddedAssets.ownerDirectoryName(uploader))
        try uploads.withLock { (uploads) throws(ZoneStorageError) in
            guard uploads[path] == nil else { return }
            if limits.perUser > 0 {
                let count = uploads.values.reduce(0) { $0 + ($1.uploader == counted.uploader ? 1 : 0) }
                if count >= limits.perUser {
                    throw UnfinishedUploadLimits.refusal("unfinishedUploadsPerUser", limit: limits.perUser, count: count, asset: asset, zone: zone.id, user: uploader)
                }
            }
            // The zone's cap counts the other users' uploads and never refuses its owner (bounded
            // by the per-user cap): else a few grantees could fill it and lock the owner out of
            // uploads into their own zone.
            let owner = EmbeddedAssets.ownerDirectoryName(zone.owner)
            if limits.perZone > 0, counted.uploader != owner {
                let count = uploads.values.reduce(0) { $0 + ($1.zone == counted.zone && $1.uploader != owner ? 1 : 0) }
                if count >= limits.perZone {
                    throw UnfinishedUploadLimits.refusal("unfinishedUploadsPerZone", limit: limits.perZone, count: count, asset: asset, zone: zone.id, user: uploader)
                }
            }
            uploads[path] = counted
        }
    }

    /// Stops counting the upload at `path` (completed, dropped, or never written).
    func forget(_ path: String) {
        _ = uploads.withLock { $0.removeValue(forKey: path) }
    }

    /// Stops counting the uploads of zone directories `keep` does not hold.
    func forgetZones(except keep: Set<String>) {
        uploads.withLock { uploads in uploads = uploads.filter { keep.contains($0.value.zone) } }
    }

    /// Stops counting the uploads of the zone directory `zoneDirectory`.
    func forgetZone(_ zoneDirectory: String) {
        uploads.withLock { uploads in uploads = uploads.filter { $0.value.zone != zoneDirectory } }
    }
}
