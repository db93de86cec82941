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

/// The embedded storage's asset files, under `assets/` in the data directory (the rules are
/// ``AssetStorage``'s):
///
/// - `<owner>/chunks/<2 hex>/<chunk sha256>`: a chunk's bytes, stored once per owner (`<owner>` is
///   the owner's name as hex UTF-8: any user name makes a safe directory name; for a name of more
///   than 127 bytes, whose hex no file system takes as a name, `~` and the SHA-256 of the name).
/// - `<owner>/manifests/<asset sha256>`: the manifest of a complete, verified asset of the owner.
/// - `<owner>/zones/<zone name as hex>-<epoch>/held/<asset sha256>`: an empty file per asset the
///   zone holds. A zone's life (its epoch) is in the name, so that a zone deleted and created
///   again never inherits its previous life's links, even when a crash kept them.
/// - `<owner>/zones/<…>/uploads/<uploader>/<asset sha256>`: an upload in progress by one user
///   (`<uploader>` named as `<owner>` is): its manifest, then the index (`u32`) of each chunk
///   received. Per uploader, so that nothing one user begins can reset or block another's upload
///   of the same asset (a manifest is the uploader's claim until the whole asset verifies).
///
/// Every file that acknowledges something is written durably (temporary file, fsync, rename,
/// fsync of the directory) before the request that made it is answered. Blocking file work runs
/// on `BlockingIO`'s threads, never on the storage actor or the cooperative pool.
final class EmbeddedAssets: Sendable {
    let root: String
    /// Bytes of chunks per owner (for quotas), measured on open; keyed by the owner's directory
    /// name (``ownerDirectoryName(_:)``), which a hashed one cannot be read back from.
    let usage: Mutex<[String: Int64]>
    /// Serializes the changes of one upload (its chunk list), by path.
    private let uploadLocks = Mutex<Set<String>>([])
    /// The unfinished uploads, counted for ``UnfinishedUploadLimits``.
    let unfinished: EmbeddedUnfinishedUploads

    init(dataDirectory: String) throws(ZoneStorageError) {
        root = DurableFile.join(dataDirectory, "assets")
        try DurableFile.makeDirectories(root)
        var measured: [String: Int64] = [:]
        for ownerDirectory in try DurableFile.list(root) {
            guard ownerDirectory.hasPrefix("~") || Self.unhex(ownerDirectory) != nil else { continue }
            let chunks = DurableFile.join(DurableFile.join(root, ownerDirectory), "chunks")
            guard DurableFile.isDirectory(chunks) else { continue }
            var bytes: Int64 = 0
            for fan in try DurableFile.list(chunks) {
                let directory = DurableFile.join(chunks, fan)
                for name in try DurableFile.list(directory) {
                    // A chunk a crash left half written under its temporary name: never renamed
                    // into place, never acknowledged.
                    if name.hasSuffix(".tmp") {
                        try? FileSystem.remove(DurableFile.join(directory, name))
                        continue
                    }
                    bytes += FileSystem.fileSize(DurableFile.join(directory, name)) ?? 0
                }
            }
            measured[ownerDirectory] = bytes
        }
        usage = Mutex(measured)
        unfinished = try EmbeddedUnfinishedUploads(root: root)
    }

    /// The bytes of `owner`'s chunks.
    func storedBytes(owner: String) -> Int64 {
        let key = Self.ownerDirectoryName(owner)
        return usage.withLock { $0[key] ?? 0 }
    }

    // MARK: Paths

    func ownerDirectory(_ owner: String) -> String { DurableFile.join(root, Self.ownerDirectoryName(owner)) }

    /// The owner's name as hex UTF-8, or `~` and the name's SHA-256 when that hex would be longer
    /// than a file name may be (255 bytes: names of more than 127 bytes, which a users file
    /// allows; their uploads failed with `ENAMETOOLONG`). Hex never starts with `~`.
    static func ownerDirectoryName(_ owner: String) -> String {
        let hex = Self.hex(owner)
        return hex.utf8.count <= 254 ? hex : "~" + AssetHash.of(Array(owner.utf8)).hex
    }
    func chunkPath(_ owner: String, _ chunk: AssetHash) -> String {
        let hex = chunk.hex
        return ownerDirectory(owner) + "/chunks/" + String(hex.prefix(2)) + "/" + hex
    }
    func manifestPath(_ owner: String, _ asset: AssetHash) -> String { ownerDirectory(owner) + "/manifests/" + asset.hex }
    func zoneDirectory(_ zone: ZoneInfo) -> String {
        ownerDirectory(zone.owner) + "/zones/" + Self.hex(zone.name) + "-" + String(zone.epoch, radix: 16)
    }
    func heldPath(_ zone: ZoneInfo, _ asset: AssetHash) -> String { zoneDirectory(zone) + "/held/" + asset.hex }
    func uploadPath(_ zone: ZoneInfo, _ asset: AssetHash, uploader: String) -> String {
        zoneDirectory(zone) + "/uploads/" + Self.ownerDirectoryName(uploader) + "/" + asset.hex
    }

    // MARK: Reads

    /// The owner's manifest of a complete asset.
    func ownerManifest(_ owner: String, _ asset: AssetHash) throws(ZoneStorageError) -> AssetManifest? {
        guard let bytes = try DurableFile.read(manifestPath(owner, asset)) else { return nil }
        guard let manifest = AssetManifest.decode(bytes, expecting: asset) else {
            throw ZoneStorageError(.storageFailure, "the manifest of asset \(asset) of \(owner) (\(manifestPath(owner, asset))) does not decode")
        }
        return manifest
    }

    /// The manifest when `zone` holds the asset.
    func held(_ zone: ZoneInfo, _ asset: AssetHash) throws(ZoneStorageError) -> AssetManifest? {
        guard FileSystem.exists(heldPath(zone, asset)) else { return nil }
        return try ownerManifest(zone.owner, asset)
    }

    /// Chunk `index` when `zone` holds the asset.
    func chunk(_ zone: ZoneInfo, _ asset: AssetHash, index: Int) throws(ZoneStorageError) -> [UInt8]? {
        guard let manifest = try held(zone, asset), index >= 0, index < manifest.chunks.count else { return nil }
        guard let bytes = try DurableFile.read(chunkPath(zone.owner, manifest.chunks[index])) else {
            throw ZoneStorageError(.storageFailure, "chunk \(index) (\(manifest.chunks[index])) of asset \(asset) of \(zone.owner) is missing from \(root)")
        }
        // A chunk damaged on disk is never served as the asset: the client would refuse it anyway.
        guard bytes.count == manifest.chunkLength(index), AssetHash.of(bytes) == manifest.chunks[index] else {
            throw ZoneStorageError(.storageFailure, "chunk \(index) (\(manifest.chunks[index])) of asset \(asset) of \(zone.owner) is damaged on disk")
        }
        return bytes
    }

    /// The assets `zone` holds, in order (`strata migrate` copies them).
    func heldAssets(_ zone: ZoneInfo) throws(ZoneStorageError) -> [AssetHash] {
        let directory = zoneDirectory(zone) + "/held"
        guard DurableFile.isDirectory(directory) else { return [] }
        return try DurableFile.list(directory).compactMap { AssetHash(hex: $0) }.sorted()
    }

    // MARK: Links

    /// Makes `zone` hold an asset its owner holds (the owner's push naming it).
    func link(_ zone: ZoneInfo, _ asset: AssetHash) throws(ZoneStorageError) {
        let path = heldPath(zone, asset)
        guard !FileSystem.exists(path) else { return }
        try DurableFile.makeDirectories(DurableFile.parent(of: path))
        // An empty file is whole the moment it exists: made in place, then its directory synced
        // (one fsync rather than the file's, a rename and the directory's).
        do {
            _ = try PositionalFile.open(path, write: true, create: true)
        } catch let error as LogError {
            throw ZoneStorageError(DurableFile.isDiskFull(error.errno) ? .storageFull : .storageFailure, error.description)
        } catch {
            throw ZoneStorageError(.storageFailure, "\(error)")
        }
        try DurableFile.syncDirectory(DurableFile.parent(of: path))
    }

    /// Removes the links and uploads of zone lives other than `alive` (deleted zones, or a
    /// crash between a deletion and this cleanup).
    func removeZones(except alive: [ZoneInfo]) throws(ZoneStorageError) {
        let keep = Set(alive.map(zoneDirectory))
        for ownerDirectory in try DurableFile.list(root) {
            let zones = DurableFile.join(DurableFile.join(root, ownerDirectory), "zones")
            guard DurableFile.isDirectory(zones) else { continue }
            for name in try DurableFile.list(zones) where !keep.contains(DurableFile.join(zones, name)) {
                try DurableFile.removeTree(DurableFile.join(zones, name))
            }
        }
        unfinished.forgetZones(except: keep)
    }

    /// Drops a deleted zone's links and uploads.
    func removeZone(_ zone: ZoneInfo) throws(ZoneStorageError) {
        try DurableFile.removeTree(zoneDirectory(zone))
        unfinished.forgetZone(zoneDirectory(zone))
    }

    // MARK: Uploads

    /// Starts or looks up an upload; see ``AssetStorage/beginAssetUpload(zone:user:manifest:storedBytesLimit:unfinishedLimits:)``.
    func begin(_ zone: ZoneInfo, user: String, manifest: AssetManifest, limit: Int64?,
               unfinishedLimits: UnfinishedUploadLimits = .none) throws(ZoneStorageError) -> AssetUploadState {
        if try held(zone, manifest.sha256) != nil {
            try dropFinished(uploadPath(zone, manifest.sha256, uploader: user))
            return AssetUploadState(missing: [], complete: true)
        }
        let ownerWide = user == zone.owner
        // The owner's own upload of an asset it holds elsewhere: linked without a byte sent.
        if ownerWide, try ownerManifest(zone.owner, manifest.sha256) != nil {
            try link(zone, manifest.sha256)
            try dropFinished(uploadPath(zone, manifest.sha256, uploader: user))
            return AssetUploadState(missing: [], complete: true)
        }
        let path = uploadPath(zone, manifest.sha256, uploader: user)
        return try withUploadLock(path) { () throws(ZoneStorageError) -> AssetUploadState in
            // The user's own upload begun with another manifest of the asset (one of the two is
            // wrong: the manifest follows from the bytes) is replaced, so that an abandoned
            // upload with a wrong manifest never blocks the asset. Another user's upload is
            // another file: never touched.
            var received = try readUpload(path, manifest.sha256).flatMap { $0.manifest == manifest ? $0.received : nil }
            if received == nil {
                try checkQuota(zone.owner, adding: Int64(clamping: manifest.byteCount), limit: limit)
                let counted = unfinished.contains(path)
                try unfinished.reserve(path, zone: zone, zoneDirectory: zoneDirectory(zone), uploader: user, asset: manifest.sha256, limits: unfinishedLimits)
                do throws(ZoneStorageError) {
                    try DurableFile.makeDirectories(DurableFile.parent(of: path))
                    let encoded = manifest.encoded
                    var bytes: [UInt8] = []
                    withUnsafeBytes(of: UInt32(encoded.count).littleEndian) { bytes.append(contentsOf: $0) }
                    try DurableFile.writeAtomically(bytes + encoded, to: path)
                } catch {
                    if !counted { unfinished.forget(path) }
                    throw error
                }
                received = []
            }
            let got = received ?? []
            let missing = (0..<manifest.chunks.count).filter { index in
                if got.contains(index) { return false }
                // The owner's chunks count as there for the owner (dedup across its assets).
                return !(ownerWide && FileSystem.exists(chunkPath(zone.owner, manifest.chunks[index])))
            }
            // Those the owner had are recorded as received, once: the chunk requests then look
            // at the upload's own list only (a check of every chunk file per request made an
            // upload of n chunks cost n² file lookups).
            let lacking = Set(missing)
            let alreadyThere = (0..<manifest.chunks.count).filter { !got.contains($0) && !lacking.contains($0) }
            if !alreadyThere.isEmpty { try appendReceived(path, alreadyThere) }
            guard missing.isEmpty else { return AssetUploadState(missing: missing, complete: false) }
            // Nothing to send (an asset of no bytes, or every chunk received before a crash that
            // came before the completion): completed now, or no chunk could ever complete it.
            try complete(zone, manifest, upload: path)
            try DurableFile.removeTree(path)
            unfinished.forget(path)
            return AssetUploadState(missing: [], complete: true)
        }
    }

    /// Keeps one chunk of an upload; completes the upload with the last one.
    func put(_ zone: ZoneInfo, user: String, asset: AssetHash, index: Int, bytes: [UInt8], limit: Int64?) throws(ZoneStorageError) -> AssetUploadState {
        if try held(zone, asset) != nil {
            try dropFinished(uploadPath(zone, asset, uploader: user))
            return AssetUploadState(missing: [], complete: true)
        }
        let path = uploadPath(zone, asset, uploader: user)
        // The chunk is checked and stored outside the upload's lock (a chunk file has a lock of
        // its own): a client keeps several chunks of one upload in flight, and their hashing and
        // fsyncs overlap; the lock covers the chunk list and the completion only.
        guard let begun = try readUpload(path, asset) else {
            // Completed by another request of this upload since the check above (a chunk sent
            // again after its answer was lost): the zone holds it, as the first check would say.
            if try held(zone, asset) != nil { return AssetUploadState(missing: [], complete: true) }
            throw ZoneStorageError(.invalidArgument, "no upload of asset \(asset) into zone \(zone.id) by \(user) was begun (send its manifest first)", zone: zone.id.description)
        }
        let manifest = begun.manifest
        guard index >= 0, index < manifest.chunks.count else {
            throw ZoneStorageError(.invalidArgument, "asset \(asset) has \(manifest.chunks.count) chunks; there is no chunk \(index)", zone: zone.id.description)
        }
        guard bytes.count == manifest.chunkLength(index) else {
            throw ZoneStorageError(.assetMismatch, "chunk \(index) of asset \(asset) is \(bytes.count) bytes; the manifest says \(manifest.chunkLength(index))", zone: zone.id.description)
        }
        let chunkHash = AssetHash.of(bytes)
        guard chunkHash == manifest.chunks[index] else {
            throw ZoneStorageError(.assetMismatch, "chunk \(index) of asset \(asset) does not match its hash \(manifest.chunks[index]) (got \(chunkHash)); nothing was kept", zone: zone.id.description)
        }
        if !begun.received.contains(index) {
            try storeChunk(bytes, chunkPath(zone.owner, chunkHash), owner: zone.owner, limit: limit, byOwner: user == zone.owner)
        }
        return try withUploadLock(path) { () throws(ZoneStorageError) -> AssetUploadState in
            // Read again under the lock: another chunk's request may have completed the upload
            // (its file is gone, the zone holds the asset), or the user begun it again.
            guard let upload = try readUpload(path, asset), upload.manifest == manifest else {
                if try held(zone, asset) != nil { return AssetUploadState(missing: [], complete: true) }
                throw ZoneStorageError(.invalidArgument, "no upload of asset \(asset) into zone \(zone.id) by \(user) with this chunk list is under way (it was begun again; send its manifest first)", zone: zone.id.description)
            }
            var received = upload.received
            if !received.contains(index) {
                // The owner's chunk files say what the owner's upload holds (a begin after a
                // crash counts them), so the owner's list need not be fsynced; another user's
                // list is what proves they sent the chunk.
                try appendReceived(path, [index], durable: user != zone.owner)
                received.insert(index)
            }
            let missing = (0..<manifest.chunks.count).filter { !received.contains($0) }
            guard missing.isEmpty else { return AssetUploadState(missing: missing, complete: false) }
            try complete(zone, manifest, upload: path)
            try DurableFile.removeTree(path)
            unfinished.forget(path)
            return AssetUploadState(missing: [], complete: true)
        }
    }

    /// Removes this user's upload of an asset the zone holds now (another user's upload completed
    /// it), so that it no longer counts as unfinished.
    private func dropFinished(_ path: String) throws(ZoneStorageError) {
        guard unfinished.contains(path) else { return }
        try withUploadLock(path) { () throws(ZoneStorageError) in
            try DurableFile.removeTree(path)
            unfinished.forget(path)
        }
    }

    /// Verifies the whole asset from its chunks, then records the owner's manifest and the
    /// zone's link (in that order: a link never names an asset without a manifest).
    private func complete(_ zone: ZoneInfo, _ manifest: AssetManifest, upload: String) throws(ZoneStorageError) {
        // A one-chunk asset is its chunk (one hash names both), and a chunk file under its hash
        // name was checked before it was written (temporary file, fsync, rename): its name and
        // size are the check, and its bytes are not read and hashed again.
        let oneChunk = manifest.chunks.count == 1 && manifest.chunks[0] == manifest.sha256
            && FileSystem.fileSize(chunkPath(zone.owner, manifest.chunks[0])) == Int64(manifest.byteCount)
        var hasher = SHA256Hasher()
        for (index, chunk) in manifest.chunks.enumerated() where !oneChunk {
            guard let bytes = try DurableFile.read(chunkPath(zone.owner, chunk)), bytes.count == manifest.chunkLength(index) else {
                throw ZoneStorageError(.storageFailure, "chunk \(index) of asset \(manifest.sha256) vanished before the upload completed")
            }
            hasher.update(data: bytes)
        }
        guard oneChunk || AssetHash(digest: hasher.finalize()) == manifest.sha256 else {
            // Every chunk matched the manifest, so the manifest lied about the asset: start over.
            try DurableFile.removeTree(upload)
            unfinished.forget(upload)
            throw ZoneStorageError(.assetMismatch, "the chunks of asset \(manifest.sha256) match their hashes but not the asset's: its manifest is wrong; nothing was kept", zone: zone.id.description)
        }
        let manifestFile = manifestPath(zone.owner, manifest.sha256)
        if !FileSystem.exists(manifestFile) {
            try DurableFile.makeDirectories(DurableFile.parent(of: manifestFile))
            try DurableFile.writeAtomicallyUnique(manifest.encoded, to: manifestFile)
        }
        try link(zone, manifest.sha256)
    }

    /// Stores a verified chunk of `owner`'s unless the owner has it, and counts its bytes exactly
    /// once: uploads of other zones or users (other upload locks) may store the same chunk at
    /// the same moment, so the check, the write and the count are made under the chunk's own lock
    /// (both used to find no file, both wrote it, both counted it). The quota is taken from the
    /// count before the write, in one step, so that two chunks cannot both fill the last bytes.
    ///
    /// Another user's chunk that the owner already has is refused for the quota as a new one
    /// would be (and not counted): otherwise a grantee who fills the owner's quota to within a
    /// chunk learns from a chunk PUT's answer whether the owner holds a file, in any zone.
    private func storeChunk(_ bytes: [UInt8], _ chunkFile: String, owner: String, limit: Int64?, byOwner: Bool) throws(ZoneStorageError) {
        try withUploadLock(chunkFile) { () throws(ZoneStorageError) in
            let key = Self.ownerDirectoryName(owner)
            let adding = Int64(bytes.count)
            guard !FileSystem.exists(chunkFile) else {
                if !byOwner, let limit, limit > 0 {
                    let used = usage.withLock { $0[key] ?? 0 }
                    if used + adding > limit {
                        throw ZoneStorageError(.quotaExceeded, "storing \(adding) more bytes of assets would take \(owner) to \(used + adding) bytes of assets; the limit left is \(limit) bytes")
                    }
                }
                return
            }
            try usage.withLock { (usage) throws(ZoneStorageError) in
                let used = usage[key] ?? 0
                if let limit, limit > 0, used + adding > limit {
                    throw ZoneStorageError(.quotaExceeded, "storing \(adding) more bytes of assets would take \(owner) to \(used + adding) bytes of assets; the limit left is \(limit) bytes")
                }
                usage[key] = used + adding
            }
            do throws(ZoneStorageError) {
                try writeChunk(bytes, to: chunkFile)
            } catch {
                usage.withLock { $0[key, default: 0] -= adding }
                throw error
            }
        }
    }

    private func checkQuota(_ owner: String, adding bytes: Int64, limit: Int64?) throws(ZoneStorageError) {
        guard let limit, limit > 0 else { return }
        let used = storedBytes(owner: owner)
        // Logs and snapshots are counted by the caller's limit check on pushes; here the asset
        // bytes alone must fit (the caller passes what is left of the limit).
        if used + bytes > limit {
            throw ZoneStorageError(.quotaExceeded, "storing \(bytes) more bytes of assets would take \(owner) to \(used + bytes) bytes of assets; the limit left is \(limit) bytes")
        }
    }

    private struct Upload {
        var manifest: AssetManifest
        var received: Set<Int>
    }

    private func readUpload(_ path: String, _ asset: AssetHash) throws(ZoneStorageError) -> Upload? {
        guard let bytes = try DurableFile.read(path) else { return nil }
        // The manifest's own length follows from its chunk count, which the indexes after it
        // cannot be told from: so the file starts with the manifest's length.
        guard bytes.count >= 4 else { return nil }
        let length = Int(UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24)
        guard length <= bytes.count - 4, let manifest = AssetManifest.decode(Array(bytes[4..<4 + length]), expecting: asset) else {
            throw ZoneStorageError(.storageFailure, "the upload file \(path) does not decode")
        }
        var received = Set<Int>()
        var i = 4 + length
        while i + 4 <= bytes.count {
            let index = Int(UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
            if index < manifest.chunks.count { received.insert(index) }
            i += 4
        }
        return Upload(manifest: manifest, received: received)
    }

    /// Appends a received chunk's index to the upload's file (fsynced: the answer says the chunk
    /// is held). A torn append — a crash mid-write — leaves a short tail that reading ignores.
    private func appendReceived(_ path: String, _ indexes: [Int], durable: Bool = true) throws(ZoneStorageError) {
        var entry: [UInt8] = []
        for index in indexes { withUnsafeBytes(of: UInt32(index).littleEndian) { entry.append(contentsOf: $0) } }
        do {
            let file = try PositionalFile.open(path, write: true)
            let size = try file.size()
            try file.write(entry, at: size - size % 4)  // over a torn entry, if any
            if durable { try file.sync() }
        } catch {
            // A full disk is `storageFull` (507: try again later), as for the chunk's own write.
            let full = DurableFile.isDiskFull((error as? LogError)?.errno)
            throw ZoneStorageError(full ? .storageFull : .storageFailure, "could not record chunks \(indexes.prefix(4)) in \(path): \(error)")
        }
    }

    /// Writes a chunk durably under a temporary name of its own (two zones of one owner may
    /// upload the same chunk at once), then renames it into place.
    private func writeChunk(_ bytes: [UInt8], to path: String) throws(ZoneStorageError) {
        let directory = DurableFile.parent(of: path)
        try DurableFile.makeDirectories(directory)
        let temporary = path + "." + ObjectID().description + ".tmp"
        do {
            let file = try PositionalFile.open(temporary, write: true, create: true, exclusive: true)
            try file.write(bytes, at: 0)
            try file.sync()
            try FileSystem.move(temporary, to: path)
            try FileSystem.syncDirectory(directory)
        } catch let error as LogError {
            try? FileSystem.remove(temporary)
            throw ZoneStorageError(DurableFile.isDiskFull(error.errno) ? .storageFull : .storageFailure, error.description)
        } catch {
            try? FileSystem.remove(temporary)
            throw ZoneStorageError(.storageFailure, "\(error)")
        }
    }

    private func withUploadLock<T>(_ path: String, _ body: () throws(ZoneStorageError) -> T) throws(ZoneStorageError) -> T {
        // Uploads of different assets (or zones, or users) proceed in parallel; one upload's chunk
        // list, or one chunk file of an owner's, is changed by one request at a time.
        while !uploadLocks.withLock({ $0.insert(path).inserted }) { usleepBriefly() }
        defer { _ = uploadLocks.withLock { $0.remove(path) } }
        return try body()
    }

    private func usleepBriefly() {
        // (`usleep`, not `nanosleep`: which module's `timespec` the compiler picks on Linux
        // depends on the order it loads them in.)
        _ = usleep(200)
    }

    static func hex(_ text: String) -> String { Hex.encode(text.utf8) }

    static func unhex(_ text: String) -> String? { Hex.decode(text).flatMap { String(validating: $0, as: UTF8.self) } }
}
