import Foundation
import StrataLog
import StrataCore

/// A store's asset directory, `assets/`: the bytes of the assets its objects name, kept by
/// content, outside the event log.
///
/// | Path | Holds |
/// |---|---|
/// | `objects/<sha256 hex>` | A complete asset: exactly the bytes whose SHA-256 names it. |
/// | `manifests/<sha256 hex>` | Its chunk list (``AssetManifest``), written before the object. |
/// | `partial/<sha256 hex>.data` | A download in progress: chunks written at their offsets. |
/// | `partial/<sha256 hex>.chunks` | The chunk indexes the download wrote, 4 bytes each. |
/// | `tmp/` | Imports in progress; emptied when the store opens. |
///
/// An object file appears only by rename of a fully written, fsynced, verified file (then the
/// directory is fsynced), so a crash leaves an asset either complete or absent; a partial
/// download resumes from what its `.chunks` file lists, and its bytes are verified against the
/// asset's hash before they become an object. An app reads an object as one ordinary file — an
/// image decoder or a video player needs one, not chunks.
final class LocalAssets: Sendable {
    let root: String

    init(storeDirectory: String) {
        root = storeDirectory + "/assets"
    }

    var objects: String { root + "/objects" }
    var manifests: String { root + "/manifests" }
    var partial: String { root + "/partial" }
    var temporary: String { root + "/tmp" }

    func objectPath(_ hash: AssetHash) -> String { objects + "/" + hash.hex }
    func manifestPath(_ hash: AssetHash) -> String { manifests + "/" + hash.hex }

    /// Removes imports a crash interrupted (downloads stay: they resume).
    func clearTemporary() throws {
        if FileSystem.isDirectory(temporary) {
            for name in try FileSystem.list(temporary) { try FileSystem.remove(temporary + "/" + name) }
        }
        // A download killed between installing its object and removing its chunk list leaves
        // the list alone: nothing to resume.
        if FileSystem.isDirectory(partial) {
            let names = Set(try FileSystem.list(partial))
            for name in names where name.hasSuffix(".chunks") && !names.contains(String(name.dropLast(7)) + ".data") {
                try FileSystem.remove(partial + "/" + name)
            }
        }
    }

    /// Whether the complete asset is here.
    func has(_ hash: AssetHash) -> Bool { FileSystem.exists(objectPath(hash)) }

    /// The asset's manifest when the complete asset is here.
    func manifest(_ hash: AssetHash) throws -> AssetManifest? {
        guard has(hash), let bytes = try FileSystem.read(manifestPath(hash)) else { return nil }
        guard let manifest = AssetManifest.decode(bytes, expecting: hash) else {
            throw StoreError(.corruptAsset, "asset \(hash): its manifest \(manifestPath(hash)) does not decode")
        }
        return manifest
    }

    /// Copies the file at `path` into the store, hashing it on the way in bounded memory (one
    /// 1 MiB buffer): its manifest. An asset already here is not written again.
    func importFile(at path: String) throws -> AssetManifest {
        let source: PositionalFile
        do { source = try PositionalFile.open(path, write: false) } catch let error as LogError {
            throw StoreError(.invalidArgument, "cannot read \(path): \(error.message)")
        }
        return try importStream { buffer, offset in try source.read(into: buffer, at: offset) }
    }

    /// Stores `bytes` as an asset: its manifest.
    func importBytes(_ bytes: [UInt8]) throws -> AssetManifest {
        try importStream { buffer, offset in
            let start = Int(offset)
            let n = min(buffer.count, bytes.count - start)
            guard n > 0 else { return 0 }
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<start + n])) }
            return n
        }
    }

    /// Streams bytes from `read` (a chunk at a time, until it returns 0) into a temporary file,
    /// then makes it the asset its hash names.
    private func importStream(_ read: (UnsafeMutableRawBufferPointer, Int64) throws -> Int) throws -> AssetManifest {
        try FileSystem.makeDirectory(temporary)
        let tmpPath = temporary + "/import-" + ObjectID().description
        let tmp = try PositionalFile.open(tmpPath, write: true, create: true, exclusive: true)
        var hasher = AssetHasher()
        var offset: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: AssetManifest.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        do {
            while true {
                let n = try read(buffer, offset)
                if n == 0 { break }
                let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                hasher.update(piece)
                try tmp.write(piece, at: offset)
                offset += Int64(n)
                if UInt64(offset) > Asset.maxByteCount {
                    throw StoreError(.invalidArgument, "the asset is larger than the largest asset (\(Asset.maxByteCount) bytes)")
                }
            }
            guard let manifest = hasher.finalize() else {
                throw StoreError(.invalidArgument, "the asset's chunks do not add up")
            }
            if has(manifest.sha256) {
                try FileSystem.remove(tmpPath)
                // Imported again: a use, so that collection's grace starts over for it.
                touch(manifest.sha256)
                return manifest
            }
            try tmp.sync()
            try install(manifest: manifest, from: tmpPath)
            return manifest
        } catch {
            try? FileSystem.remove(tmpPath)
            throw error
        }
    }

    /// Makes the fsynced, verified file at `path` the object of `manifest`'s asset: its manifest
    /// first (an object is never without one), then the rename, then the directory's fsync.
    func install(manifest: AssetManifest, from path: String) throws {
        try storeManifest(manifest)
        try FileSystem.makeDirectory(objects)
        try FileSystem.move(path, to: objectPath(manifest.sha256))
        try FileSystem.syncDirectory(objects)
    }

    /// Writes the asset's manifest durably, unless the same one is there: a download stores it
    /// while its chunks travel, so that only the object's rename and one directory `fsync`
    /// remain once the last chunk is in. Until the object is installed, the manifest alone is
    /// ignored (``manifest(_:)`` needs the object; verify calls it an install in progress).
    func storeManifest(_ manifest: AssetManifest) throws {
        let path = manifestPath(manifest.sha256)
        let encoded = manifest.encoded
        if let stored = try? FileSystem.read(path), stored == encoded { return }
        try FileSystem.makeDirectory(manifests)
        try FileSystem.writeAtomicallyUnique(encoded, to: path)
    }

    /// Leaves the empty file `directory/<hash>`, not durably: for a marker whose loss in a
    /// power cut errs on the safe side (the `remote/` marker: without it the device only keeps
    /// its copy longer). No temporary file and no fsync, which cost each upload and each fetch
    /// two `fsync`s: an empty file is whole the moment it exists.
    func markLightly(_ directory: String, _ hash: AssetHash) throws {
        let path = directory + "/" + hash.hex
        guard !FileSystem.exists(path) else { return }
        try FileSystem.makeDirectory(directory)
        _ = try PositionalFile.open(path, write: true, create: true)
    }

    /// The empty asset's object, made on first use (every store holds it).
    func ensureEmpty() throws {
        let empty = Asset.empty.sha256
        guard !has(empty) else { return }
        _ = try importBytes([])
    }
}
