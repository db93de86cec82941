import StrataCore
import StrataLog
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the embedded storage's asset sweep needs beyond the files: when each link and upload was
/// last confirmed, and a lock per owner that keeps a sweep of the owner apart from the owner's
/// uploads and pushes' checks.
///
/// Confirmations are kept in memory, not in the files: one process owns the data directory, and
/// a link or upload not confirmed since the process started counts as confirmed when a sweep
/// first sees it. A restart so only ever delays a removal by one grace, never hastens one, and a
/// push's check writes nothing to disk.
final class EmbeddedAssetSweep: Sendable {
    let timeline: AssetTimeline
    /// The last confirmation of each link (its `held/` path) and upload (its `uploads/` path), in
    /// milliseconds of ``timeline``.
    private let confirmed = Mutex<[String: UInt64]>([:])
    /// Per owner directory: how many uploads or checks are under way, and whether a sweep holds
    /// (or waits for) the owner.
    private let owners = Mutex<[String: OwnerUse]>([:])
    /// One sweep at a time.
    private let sweeping = Mutex(false)

    private struct OwnerUse {
        var users = 0
        var swept = false
    }

    init(timeline: AssetTimeline) {
        self.timeline = timeline
    }

    /// Records that the link or upload at `path` is needed now.
    func confirm(_ path: String) {
        let now = timeline.now()
        confirmed.withLock { $0[path] = max($0[path] ?? 0, now) }
    }

    /// Whether the link or upload at `path` was last confirmed at least `grace` before `now`; one
    /// never confirmed in this process counts as confirmed at `now`.
    func expired(_ path: String, now: UInt64, grace: UInt64) -> Bool {
        let at = confirmed.withLock { map -> UInt64 in
            if let at = map[path] { return at }
            map[path] = now
            return now
        }
        return now >= at && now - at >= grace
    }

    /// Forgets `path`'s confirmation (removed; or named by history, which keeps it anyway).
    func forget(_ path: String) {
        _ = confirmed.withLock { $0.removeValue(forKey: path) }
    }

    /// Runs `body` (an upload's step, a push's check) while no sweep of the owner runs; many at
    /// once for one owner.
    func sharing<T>(_ ownerDirectory: String, _ body: () throws(ZoneStorageError) -> T) throws(ZoneStorageError) -> T {
        while !owners.withLock({ map -> Bool in
            var use = map[ownerDirectory] ?? OwnerUse()
            guard !use.swept else { return false }
            use.users += 1
            map[ownerDirectory] = use
            return true
        }) { Self.pause() }
        defer {
            owners.withLock { map in
                map[ownerDirectory]?.users -= 1
                if let use = map[ownerDirectory], use.users == 0, !use.swept { map[ownerDirectory] = nil }
            }
        }
        return try body()
    }

    /// Runs `body` (the sweep of one owner) alone: new uploads and checks of the owner wait from
    /// now on, and those under way are waited for.
    func exclusive<T>(_ ownerDirectory: String, _ body: () throws(ZoneStorageError) -> T) throws(ZoneStorageError) -> T {
        owners.withLock { $0[ownerDirectory, default: OwnerUse()].swept = true }
        while owners.withLock({ ($0[ownerDirectory]?.users ?? 0) > 0 }) { Self.pause() }
        defer {
            owners.withLock { map in
                map[ownerDirectory]?.swept = false
                if let use = map[ownerDirectory], use.users == 0 { map[ownerDirectory] = nil }
            }
        }
        return try body()
    }

    /// Runs `body` unless another sweep runs (then nothing is swept: that one does it).
    func alone(_ body: () throws(ZoneStorageError) -> AssetSweepReport) throws(ZoneStorageError) -> AssetSweepReport {
        guard sweeping.withLock({ running -> Bool in
            guard !running else { return false }
            running = true
            return true
        }) else { return AssetSweepReport() }
        defer { sweeping.withLock { $0 = false } }
        return try body()
    }

    private static func pause() {
        // (`usleep`, not `nanosleep`: which module's `timespec` the compiler picks on Linux
        // depends on the order it loads them in.)
        _ = usleep(200)
    }
}

extension EmbeddedAssets {
    /// Sweeps every owner's assets (``AssetStorage/sweepAssets(grace:)``). `named` holds, by zone
    /// directory (``zoneDirectory(_:)``), the assets each zone's retained history names; the links
    /// of a zone directory not in it (a zone whose history could not be read, or created since)
    /// are all kept. `now` was read before the histories were: a link confirmed since (a push's
    /// check whose transaction the histories may miss) is younger than the grace.
    func sweep(named: [String: Set<AssetHash>], state: EmbeddedAssetSweep, now: UInt64, grace: UInt64) throws(ZoneStorageError) -> AssetSweepReport {
        var report = AssetSweepReport()
        for ownerName in try DurableFile.list(root) {
            let owner = DurableFile.join(root, ownerName)
            guard DurableFile.isDirectory(owner) else { continue }
            let swept = try state.exclusive(owner) { () throws(ZoneStorageError) -> AssetSweepReport in
                try sweepOwner(owner, named: named, state: state, now: now, grace: grace)
            }
            if swept.bytesFreed != 0 { usage.withLock { $0[ownerName, default: 0] -= swept.bytesFreed } }
            report.add(swept)
        }
        return report
    }

    /// One owner's sweep, under its exclusive lock: links, then manifests, then chunks, each step
    /// made durable before the next (a crash must never bring back a manifest whose chunks are
    /// gone).
    private func sweepOwner(_ owner: String, named: [String: Set<AssetHash>], state: EmbeddedAssetSweep, now: UInt64, grace: UInt64) throws(ZoneStorageError) -> AssetSweepReport {
        var report = AssetSweepReport()
        var linked = Set<AssetHash>()
        var neededChunks = Set<AssetHash>()
        // A manifest or upload that does not decode names chunks nobody can tell: keep them all.
        var keepAllChunks = false
        let zones = DurableFile.join(owner, "zones")
        for zoneName in try Self.listIfPresent(zones) {
            let zone = DurableFile.join(zones, zoneName)
            let history = named[zone]
            let held = DurableFile.join(zone, "held")
            var changed = false
            for name in try Self.listIfPresent(held) {
                guard let asset = AssetHash(hex: name) else { continue }
                let path = DurableFile.join(held, name)
                if let history, !history.contains(asset), state.expired(path, now: now, grace: grace) {
                    try DurableFile.removeTree(path)
                    state.forget(path)
                    report.links += 1
                    changed = true
                } else {
                    if history?.contains(asset) == true { state.forget(path) }
                    linked.insert(asset)
                }
            }
            if changed { try DurableFile.syncDirectory(held) }
            // `uploads/<uploader>/<asset>`; an upload file right in `uploads/` is of the layout
            // before uploads were per uploader: nobody resumes it, the grace takes it.
            let uploads = DurableFile.join(zone, "uploads")
            // (An uploader's directory is told from such a file by its kind, not its name: the
            // hex of a 32-byte user name reads as a hash.)
            var directories = [uploads]
            for name in try Self.listIfPresent(uploads) where DurableFile.isDirectory(DurableFile.join(uploads, name)) {
                directories.append(DurableFile.join(uploads, name))
            }
            for directory in directories {
                changed = false
                for name in try Self.listIfPresent(directory) {
                    guard let asset = AssetHash(hex: name) else { continue }
                    let path = DurableFile.join(directory, name)
                    if directory == uploads, DurableFile.isDirectory(path) { continue }
                    if state.expired(path, now: now, grace: grace) {
                        try DurableFile.removeTree(path)
                        state.forget(path)
                        unfinished.forget(path)
                        report.uploads += 1
                        changed = true
                    } else if let manifest = Self.uploadManifest(path, asset) {
                        neededChunks.formUnion(manifest.chunks)
                    } else {
                        keepAllChunks = true
                    }
                }
                if changed { try DurableFile.syncDirectory(directory) }
            }
        }
        let manifests = DurableFile.join(owner, "manifests")
        var changed = false
        for name in try Self.listIfPresent(manifests) {
            guard let asset = AssetHash(hex: name) else { continue }
            let path = DurableFile.join(manifests, name)
            if !linked.contains(asset) {
                try DurableFile.removeTree(path)
                report.manifests += 1
                changed = true
            } else if let bytes = try DurableFile.read(path), let manifest = AssetManifest.decode(bytes, expecting: asset) {
                neededChunks.formUnion(manifest.chunks)
            } else {
                keepAllChunks = true
            }
        }
        if changed { try DurableFile.syncDirectory(manifests) }
        guard !keepAllChunks else { return report }
        let chunks = DurableFile.join(owner, "chunks")
        for fan in try Self.listIfPresent(chunks) {
            let directory = DurableFile.join(chunks, fan)
            changed = false
            for name in try Self.listIfPresent(directory) {
                guard let chunk = AssetHash(hex: name), !neededChunks.contains(chunk) else { continue }
                let path = DurableFile.join(directory, name)
                let size = FileSystem.fileSize(path) ?? 0
                try DurableFile.removeTree(path)
                report.chunks += 1
                report.bytesFreed += size
                changed = true
            }
            if changed { try DurableFile.syncDirectory(directory) }
        }
        return report
    }

    /// The names in `directory`; none when it is absent or went away while listed (a zone deleted
    /// meanwhile), an error when it is there but cannot be listed (then nothing of the owner may
    /// be judged unlinked).
    private static func listIfPresent(_ directory: String) throws(ZoneStorageError) -> [String] {
        guard DurableFile.isDirectory(directory) else { return [] }
        do {
            return try DurableFile.list(directory)
        } catch {
            if !DurableFile.isDirectory(directory) { return [] }
            throw error
        }
    }

    /// The manifest an upload file starts with (its length, then the manifest); `nil` when it
    /// does not decode.
    private static func uploadManifest(_ path: String, _ asset: AssetHash) -> AssetManifest? {
        guard let bytes = try? DurableFile.read(path), bytes.count >= 4 else { return nil }
        let length = Int(UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24)
        guard length <= bytes.count - 4 else { return nil }
        return AssetManifest.decode(Array(bytes[4..<4 + length]), expecting: asset)
    }
}
