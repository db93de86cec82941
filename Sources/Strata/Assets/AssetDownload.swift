import StrataLog
import StrataCore

/// A download of one asset into a store, resumable at chunk granularity.
///
/// Chunks are written at their offsets in `partial/<hash>.data` as they arrive (each checked
/// against its hash in the manifest first), and each written chunk's index is appended to
/// `partial/<hash>.chunks`. A download started again — after a kill, a dropped connection, a
/// cancelled fetch — reads that list and asks only for the chunks it lacks. Neither file is
/// fsynced per chunk: a kill of the process loses nothing the kernel was given, and what a
/// power cut loses is caught at the end, when the whole file is hashed before it becomes the
/// asset (chunks that then fail their own hash are fetched again). When one download wrote
/// every chunk in order, that hash was computed from the chunks as they arrived.
final class AssetDownload: @unchecked Sendable {  // used by one fetch at a time
    let manifest: AssetManifest
    private let assets: LocalAssets
    private let data: PositionalFile
    private let list: PositionalFile
    private var listLength: Int64
    /// Chunks written (by this download or one before it).
    private(set) var held: Set<Int>
    /// The whole asset's hash over chunks `0..<next`, when this download wrote each of them in
    /// order (from the bytes it was given, before writing them): then ``finish()`` need not read
    /// the file back to hash it. `nil` once a chunk came out of order or a check failed.
    private var inOrder: (hasher: SHA256Hasher, next: Int)? = (SHA256Hasher(), 0)

    var dataPath: String { assets.partial + "/" + manifest.sha256.hex + ".data" }
    var listPath: String { assets.partial + "/" + manifest.sha256.hex + ".chunks" }

    /// Opens (or starts) the download of `manifest`'s asset.
    init(_ manifest: AssetManifest, in assets: LocalAssets) throws {
        self.manifest = manifest
        self.assets = assets
        try FileSystem.makeDirectory(assets.partial)
        let base = assets.partial + "/" + manifest.sha256.hex
        data = try PositionalFile.open(base + ".data", write: true, create: true)
        list = try PositionalFile.open(base + ".chunks", write: true, create: true)
        // A torn last entry (a kill mid-append) is dropped; an index out of range (a damaged
        // list) ends the list there: those chunks are fetched again.
        let size = try list.size()
        let bytes = try list.read(count: Int(size - size % 4), at: 0)
        var held = Set<Int>()
        var valid: Int64 = 0
        var i = 0
        while i + 4 <= bytes.count {
            let index = Int(UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
            guard index < manifest.chunks.count else { break }
            held.insert(index)
            i += 4
            valid = Int64(i)
        }
        if valid != size { try list.truncate(to: valid) }
        listLength = valid
        self.held = held
    }

    /// The chunks still to fetch, in order.
    var missing: [Int] { (0..<manifest.chunks.count).filter { !held.contains($0) } }

    /// Bytes already held.
    var heldBytes: UInt64 { held.reduce(0) { $0 + UInt64(manifest.chunkLength($1)) } }

    /// Writes chunk `index` after checking its length and hash.
    ///
    /// - Throws: ``StoreError/Code/corruptAsset`` when the bytes are not the chunk the manifest
    ///   names (nothing is written).
    func write(chunk index: Int, _ bytes: [UInt8]) throws {
        guard index >= 0, index < manifest.chunks.count else {
            throw StoreError(.corruptAsset, "asset \(manifest.sha256): no chunk \(index) (it has \(manifest.chunks.count))")
        }
        guard bytes.count == manifest.chunkLength(index) else {
            throw StoreError(.corruptAsset, "asset \(manifest.sha256): chunk \(index) is \(bytes.count) bytes; expected \(manifest.chunkLength(index))")
        }
        // A one-chunk asset's chunk hash is the asset's hash: checked once, in `finish`.
        if manifest.chunks.count > 1, AssetHash.of(bytes) != manifest.chunks[index] {
            throw StoreError(.corruptAsset, "asset \(manifest.sha256): chunk \(index) does not match its hash \(manifest.chunks[index])")
        }
        if var state = inOrder {
            if index == state.next {
                state.hasher.update(data: bytes)
                state.next += 1
                inOrder = state
            } else {
                inOrder = nil
            }
        }
        try data.write(bytes, at: manifest.chunkOffset(index))
        var entry: [UInt8] = []
        withUnsafeBytes(of: UInt32(index).littleEndian) { entry.append(contentsOf: $0) }
        try list.write(entry, at: listLength)
        listLength += 4
        held.insert(index)
    }

    /// Verifies the whole file against the asset's hash and installs it. When the hash does
    /// not match, the chunks that fail their own hash are forgotten (``missing`` names them)
    /// and `false` is returned: fetch them again and finish again.
    func finish() throws -> Bool {
        guard missing.isEmpty else { return false }
        try data.truncate(to: Int64(manifest.byteCount))
        // Every chunk was written by this download, in order: the file holds exactly the bytes
        // hashed on the way in (the sync below makes them durable), so nothing is read back.
        if var state = inOrder, state.next == manifest.chunks.count {
            if AssetHash(digest: state.hasher.finalize()) == manifest.sha256 {
                try data.sync()
                try assets.install(manifest: manifest, from: dataPath)
                try FileSystem.remove(listPath)
                return true
            }
        }
        // Otherwise (chunks from a download before this one, which a power cut may have lost,
        // or a mismatch): the file is read back and hashed, chunk by chunk.
        inOrder = nil
        var whole = SHA256Hasher()
        var chunkHashes: [AssetHash] = []
        let verifyChunks = manifest.chunks.count > 1
        for index in 0..<manifest.chunks.count {
            let bytes = try data.read(count: manifest.chunkLength(index), at: manifest.chunkOffset(index))
            whole.update(data: bytes)
            if verifyChunks { chunkHashes.append(AssetHash.of(bytes)) }
        }
        guard AssetHash(digest: whole.finalize()) == manifest.sha256 else {
            // Forget the chunks whose bytes are not theirs; when every chunk matches its
            // hash, the manifest itself is wrong: nothing to fetch again can fix it.
            let bad = verifyChunks ? (0..<manifest.chunks.count).filter { chunkHashes[$0] != manifest.chunks[$0] } : [0]
            if bad.isEmpty {
                try abandon()
                throw StoreError(.corruptAsset, "asset \(manifest.sha256): its chunks match the manifest but not the asset's hash (a manifest that lies)")
            }
            held.subtract(bad)
            try rewriteList()
            return false
        }
        try data.sync()
        try assets.install(manifest: manifest, from: dataPath)
        try FileSystem.remove(listPath)
        return true
    }

    /// Removes the download's files.
    func abandon() throws {
        try FileSystem.remove(dataPath)
        try FileSystem.remove(listPath)
        // The manifest came with the download (it is stored while the first chunk travels); a
        // manifest without its object would stay for good (collection walks the objects).
        if !assets.has(manifest.sha256) { try FileSystem.remove(assets.manifestPath(manifest.sha256)) }
    }

    private func rewriteList() throws {
        var bytes: [UInt8] = []
        for index in held.sorted() { withUnsafeBytes(of: UInt32(index).littleEndian) { bytes.append(contentsOf: $0) } }
        try list.truncate(to: 0)
        try list.write(bytes, at: 0)
        listLength = Int64(bytes.count)
    }
}
