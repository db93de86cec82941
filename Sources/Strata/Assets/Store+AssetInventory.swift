import StrataLog
public import StrataCore

/// What a store's asset directory holds, read from its files without opening the store: the
/// tools (`strata inspect`, `verify`, `asset`) read stores another process has open for writing
/// and copies taken from devices, and must change nothing. See `LocalAssets` for the layout.
@_spi(StrataInternals)
public struct AssetInventory: Sendable {
    /// A complete asset file, `objects/<sha256>`.
    public struct Object: Sendable, Hashable {
        /// The hash its name claims (not checked here: see `Store.hashAssetFile(at:each:)`).
        public let sha256: AssetHash
        public let path: String
        /// The file's size on disk.
        public let byteCount: UInt64
        /// Its manifest's path (present or not).
        public let manifestPath: String
    }

    /// A download in progress, `partial/<sha256>.data` and `.chunks`.
    public struct Partial: Sendable, Hashable {
        public let sha256: AssetHash
        public let dataPath: String
        public let listPath: String
        /// Distinct chunks the download's list names.
        public let heldChunks: Int
        /// Bytes those chunks hold: every chunk is 1 MiB but the asset's last, which is the only
        /// one that can end the data file short.
        public let heldBytes: UInt64
    }

    /// The store's `assets/` directory.
    public let directory: String
    /// Complete assets by hash.
    public var objects: [AssetHash: Object] = [:]
    /// Manifest paths by hash (with or without an object).
    public var manifests: [AssetHash: String] = [:]
    /// Downloads in progress by hash.
    public var partials: [AssetHash: Partial] = [:]
    /// Files in `objects/`, `manifests/` or `partial/` whose names are no asset's.
    public var strayFiles: [String] = []
    /// Imports a crash interrupted (`tmp/`), removed when the store next opens.
    public var temporaryFiles: [String] = []
    /// Assets pinned for offline use (`pins/`), held or not.
    public var pinned: Set<AssetHash> = []
    /// Assets a server is known to hold (`remote/`: fetched, or uploaded).
    public var knownRemote: Set<AssetHash> = []

    /// Bytes of the complete assets.
    public var heldBytes: UInt64 { objects.values.reduce(0) { $0 + $1.byteCount } }
}

extension Store {
    /// The paths of an asset's object file and manifest in the store at `directory` (present or not).
    @_spi(StrataInternals)
    public static func assetPaths(of hash: AssetHash, ofStoreAt directory: String) -> (object: String, manifest: String) {
        let assets = LocalAssets(storeDirectory: directory)
        return (assets.objectPath(hash), assets.manifestPath(hash))
    }

    /// Lists the asset directory of the store at `directory` (empty when it has none), reading
    /// file names and sizes only.
    ///
    /// - Throws: `StoreError.Code.invalidArgument` when a folder exists but cannot be listed.
    @_spi(StrataInternals)
    public static func assetInventory(ofStoreAt directory: String) throws -> AssetInventory {
        let assets = LocalAssets(storeDirectory: directory)
        var inventory = AssetInventory(directory: assets.root)
        func names(_ folder: String) throws -> [String] {
            guard FileSystem.isDirectory(folder) else { return [] }
            do { return try FileSystem.list(folder).sorted() } catch {
                throw StoreError(.invalidArgument, "cannot list the asset folder \(folder): \(error)")
            }
        }
        for name in try names(assets.objects) {
            guard let hash = AssetHash(hex: name) else { inventory.strayFiles.append(assets.objects + "/" + name); continue }
            let path = assets.objectPath(hash)
            inventory.objects[hash] = AssetInventory.Object(sha256: hash, path: path, byteCount: UInt64(max(0, FileSystem.fileSize(path) ?? 0)),
                                                            manifestPath: assets.manifestPath(hash))
        }
        for name in try names(assets.manifests) {
            guard let hash = AssetHash(hex: name) else { inventory.strayFiles.append(assets.manifests + "/" + name); continue }
            inventory.manifests[hash] = assets.manifestPath(hash)
        }
        var partialNames = Set<String>()
        for name in try names(assets.partial) {
            let base = name.hasSuffix(".data") ? String(name.dropLast(5)) : name.hasSuffix(".chunks") ? String(name.dropLast(7)) : name
            guard AssetHash(hex: base) != nil else { inventory.strayFiles.append(assets.partial + "/" + name); continue }
            partialNames.insert(base)
        }
        for base in partialNames.sorted() {
            guard let hash = AssetHash(hex: base) else { continue }
            let dataPath = assets.partial + "/" + base + ".data"
            let listPath = assets.partial + "/" + base + ".chunks"
            let dataSize = UInt64(max(0, FileSystem.fileSize(dataPath) ?? 0))
            var held = Set<Int>()
            if let list = try? FileSystem.read(listPath) {
                var i = 0
                while i + 4 <= list.count {
                    held.insert(Int(UInt32(list[i]) | UInt32(list[i + 1]) << 8 | UInt32(list[i + 2]) << 16 | UInt32(list[i + 3]) << 24))
                    i += 4
                }
            }
            let chunk = UInt64(AssetManifest.chunkSize)
            // An index past the data file's end was never written whole (or the list is damaged):
            // it holds nothing the download will keep.
            let bytes = held.reduce(UInt64(0)) { sum, index in
                let start = UInt64(index) * chunk
                return start < dataSize ? sum + min(chunk, dataSize - start) : sum
            }
            inventory.partials[hash] = AssetInventory.Partial(sha256: hash, dataPath: dataPath, listPath: listPath, heldChunks: held.count, heldBytes: bytes)
        }
        inventory.temporaryFiles = try names(assets.temporary).map { assets.temporary + "/" + $0 }
        inventory.pinned = Set(try names(assets.pins).compactMap { AssetHash(hex: $0) })
        inventory.knownRemote = Set(try names(assets.remote).compactMap { AssetHash(hex: $0) })
        return inventory
    }

    /// Reads the file at `path` once, in 1 MiB pieces (bounded memory whatever its size), handing
    /// each piece to `each`, and returns the manifest of what it read: the file's SHA-256 and its
    /// chunks' — what a file named by that hash must match.
    ///
    /// - Throws: `StoreError.Code.invalidArgument` when the file cannot be read, or what `each` throws.
    @_spi(StrataInternals)
    public static func hashAssetFile(at path: String, each: (UnsafeRawBufferPointer) throws -> Void = { _ in }) throws -> AssetManifest {
        let file: PositionalFile
        do { file = try PositionalFile.open(path, write: false) } catch {
            throw StoreError(.invalidArgument, "cannot read the asset file \(path): \(error)")
        }
        var hasher = AssetHasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: AssetManifest.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let n: Int
            do { n = try file.read(into: buffer, at: offset) } catch {
                throw StoreError(.invalidArgument, "cannot read the asset file \(path) at byte \(offset): \(error)")
            }
            if n == 0 { break }
            let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            hasher.update(piece)
            try each(piece)
            offset += Int64(n)
        }
        guard let manifest = hasher.finalize() else {
            throw StoreError(.corruptAsset, "\(path): its \(offset) bytes make no manifest (larger than the largest asset)")
        }
        return manifest
    }

    /// The manifest in the file at `path`, when it decodes as the manifest of `sha256`.
    @_spi(StrataInternals)
    public static func readAssetManifest(at path: String, of sha256: AssetHash) -> AssetManifest? {
        guard let bytes = try? FileSystem.read(path) else { return nil }
        return AssetManifest.decode(bytes, expecting: sha256)
    }

    /// Writes `manifest` as the manifest of its asset in the store at `directory` (atomically):
    /// how `strata verify --repair` replaces a missing or damaged manifest of an asset whose file
    /// it has just verified.
    @_spi(StrataInternals)
    public static func writeAssetManifest(_ manifest: AssetManifest, ofStoreAt directory: String) throws {
        let assets = LocalAssets(storeDirectory: directory)
        try FileSystem.makeDirectory(assets.manifests)
        try FileSystem.writeAtomically(manifest.encoded, to: assets.manifestPath(manifest.sha256))
    }
}
