import Foundation
public import StrataCore
import StrataLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One file a user can send when their device misbehaves: a store's history and state — the log
/// (every record, position and timestamp), its snapshots, the states it adopted, its identity
/// and lineage, the users of its replicas, its sync cursors, pins and download masks — and,
/// when redacted (`ValueRedaction`), not one value the user wrote. Asset bytes are never in
/// it. The tools (`strata diff`, `replay`, `log`, `inspect`, `verify`, `merge --what-if`) read a
/// bundle wherever they read a store.
///
/// Layout (format 2; all integers little-endian):
///
/// | Bytes | Content |
/// |---|---|
/// | 8 | `STRATABN` |
/// | 2 | format version (2) |
/// | 2 | reserved (0) |
/// | 4 | manifest length `m` (at most 16 MiB) |
/// | `m` | the manifest: JSON (``Manifest``) |
/// | … | the files the manifest lists, in its order, back to back |
///
/// The files are the store's own, except its log: format 2 holds it as one `log.pack`
/// (`PackedLog`: each object ID, name and value stored once, then referred to), which the
/// reader unpacks into the log directory, record for record and entry byte for byte. Format 1
/// held the log's segment and snapshot files, rewritten record by record (`log/…`); it is
/// still read.
///
/// A reader checks every file's size and CRC-32C and refuses a path that is not one a store
/// holds (no `..`, no absolute path, only the names below), so a bundle from anyone can be
/// opened safely.
public enum DebugBundle {
    public static let magic = Array("STRATABN".utf8)
    /// The format this writes.
    public static let formatVersion: UInt16 = 2
    /// The formats this reads.
    public static let readableVersions: ClosedRange<UInt16> = 1...2
    /// Where a format-2 bundle keeps the packed log.
    static let packedLogPath = "log.pack"
    public static let maxManifestBytes = 16 << 20

    /// What a bundle holds.
    public struct Manifest: Codable, Sendable, Hashable {
        public struct File: Codable, Sendable, Hashable {
            /// The path inside the store directory: `log.pack` (format 2), `log/…` (format 1),
            /// `store.json`, `adopted/…`, ….
            public var path: String
            public var size: UInt64
            /// CRC-32C of the bytes, lower-case hex.
            public var crc32c: String
        }

        public var format: Int
        /// When the bundle was made (ISO 8601).
        public var created: String
        /// The store directory's name on the device (not its path).
        public var store: String
        public var redacted: Bool
        /// Which key redacted it (`ValueRedaction.keyID`): bundles with the same key ID compare
        /// value by value.
        public var keyID: String?
        /// A torn tail of the log left out (as opening the store would cut it).
        public var tornTail: String?
        public var files: [File]
    }

    /// Writes the bundle of the store at `directory` to `path` (replaced atomically).
    ///
    /// The store may be open and writing: the log is append-only, and what is copied is the
    /// records complete when each segment is read.
    ///
    /// - Throws: `StoreError` (`log`, `corruptEvent`, `corruptSnapshot`) when the store's files
    ///   do not read; `storeFailed` when the bundle cannot be written.
    @discardableResult
    public static func write(storeAt directory: String, to path: String, redaction: ValueRedaction? = nil) throws -> Manifest {
        let fm = FileManager.default
        let staging = path + ".staging-\(ReplicaID.random().description.prefix(8))"
        defer { try? fm.removeItem(atPath: staging) }
        do {
            try fm.createDirectory(atPath: staging, withIntermediateDirectories: true)
        } catch {
            throw StoreError(.storeFailed, "cannot create \(staging): \(error)")
        }
        var files: [String] = []
        // The small files of the store directory: identity, authors, cursors, pins, masks.
        let top = ((try? fm.contentsOfDirectory(atPath: directory)) ?? []).filter(isStoreFile).sorted()
        for name in top {
            guard let data = fm.contents(atPath: directory + "/" + name) else { continue }
            try put(Array(data), staging + "/" + name)
            files.append(name)
        }
        // The log, record by record (redacted when asked, on every core). An adoption record's
        // state is read after the walk meets the record (a state is written before its record),
        // so a store adopting while it is bundled gives a bundle whose records all have their
        // states.
        do {
            try fm.createDirectory(atPath: staging + "/adopted", withIntermediateDirectories: true)
        } catch {
            throw StoreError(.storeFailed, "cannot create \(staging)/adopted: \(error)")
        }
        let states = BundledStates(store: directory, staging: staging, redaction: redaction)
        let entry: @Sendable (StoredEntry) throws -> [UInt8] = { entry in
            guard AdoptionRecord.isAdoption(entry.payload) else {
                guard let redaction else { return entry.payload }
                return try redaction.redactEntry(entry.payload, position: entry.position)
            }
            return try states.bundle(AdoptionRecord(decoding: entry.payload, position: entry.position)).encoded()
        }
        let snapshot: (Snapshot) throws -> [UInt8] = { snapshot in
            guard let redaction else { return snapshot.payload }
            return try redaction.redactState(snapshot.payload).payload
        }
        var outcome: LogCopy.Outcome
        var pack: [UInt8]
        do {
            var packed = PackedLog.Writer()
            outcome = try LogCopy.copy(from: Store.logDirectory(ofStoreAt: directory), into: &packed, entry: entry, snapshot: snapshot)
            pack = packed.finish()
            if packed.unpacked > PackedLog.maxUnpacked(packedBytes: pack.count) {
                // Packs too well for a reader to trust (see `PackedLog.maxExpansion`): again,
                // every entry whole. (A log copied twice may have grown in between: the second
                // copy is the bundle.)
                var whole = PackedLog.Writer(wholeOnly: true)
                outcome = try LogCopy.copy(from: Store.logDirectory(ofStoreAt: directory), into: &whole, entry: entry, snapshot: snapshot)
                pack = whole.finish()
                guard whole.unpacked <= PackedLog.maxUnpacked(packedBytes: pack.count) else {
                    throw StoreError(.invalidArgument, "the log unpacks to \(whole.unpacked) bytes, more than a bundle of \(pack.count) bytes may")
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        files += states.files.sorted()
        try put(pack, staging + "/" + packedLogPath)
        files.append(packedLogPath)

        var manifest = Manifest(format: Int(formatVersion), created: ISO8601DateFormatter().string(from: Date()),
                                store: redaction == nil ? URL(fileURLWithPath: directory).lastPathComponent : "", redacted: redaction != nil,
                                keyID: redaction?.keyID, tornTail: outcome.tornTail, files: [])
        for file in files {
            guard let data = fm.contents(atPath: staging + "/" + file) else { throw StoreError(.storeFailed, "cannot read back \(staging)/\(file)") }
            manifest.files.append(Manifest.File(path: file, size: UInt64(data.count), crc32c: hex32(Array(data).withUnsafeBytes { CRC32C.checksum($0) })))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json: [UInt8]
        do {
            json = Array(try encoder.encode(manifest))
        } catch {
            throw StoreError(.encoding, "cannot encode the bundle's manifest: \(error)")
        }
        var header = ByteWriter(capacity: 16)
        header.raw(magic)
        header.u16(formatVersion)
        header.u16(0)
        header.u32(UInt32(json.count))
        var isDirectory: ObjCBool = false
        if fm.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw StoreError(.invalidArgument, "\(path) is a directory: a bundle is written to a file")
        }
        let temporary = staging + ".bundle"
        guard fm.createFile(atPath: temporary, contents: Data(header.bytes + json)), let handle = FileHandle(forWritingAtPath: temporary) else {
            throw StoreError(.storeFailed, "cannot write \(temporary)")
        }
        defer { try? handle.close() }
        do {
            try handle.seekToEnd()
            for file in files {
                guard let data = fm.contents(atPath: staging + "/" + file) else { throw StoreError(.storeFailed, "cannot read back \(staging)/\(file)") }
                try handle.write(contentsOf: data)
            }
            try handle.synchronize()
            // rename(2) replaces a bundle already there in one step.
            guard rename(temporary, path) == 0 else { throw StoreError(.storeFailed, "cannot rename \(temporary) to \(path): errno \(errno)") }
        } catch let error as StoreError {
            try? fm.removeItem(atPath: temporary)
            throw error
        } catch {
            try? fm.removeItem(atPath: temporary)
            throw StoreError(.storeFailed, "cannot write \(path): \(error)")
        }
        return manifest
    }

    /// Whether the file at `path` starts as a bundle does.
    public static func isBundle(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: magic.count)).map(Array.init) == magic
    }

    /// Unpacks the bundle at `path` into `directory` (created; it then reads as a store to the
    /// tools), after checking every part of it.
    ///
    /// - Throws: `StoreError` `corruptBundle` saying what is wrong and at which byte:
    ///   not a bundle, another format version, a manifest too large or undecodable, a path a
    ///   store does not hold, a file cut short or failing its checksum, bytes after the last, a
    ///   `log.pack` that does not unpack (the stream, its byte and the log position);
    ///   `storeFailed` when `directory` exists already or cannot be written.
    @discardableResult
    public static func extract(_ path: String, into directory: String) throws -> Manifest {
        func bad(_ why: String, at offset: Int) -> StoreError {
            StoreError(.corruptBundle, "\(path): \(why) (at byte \(offset))")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw StoreError(.corruptBundle, "\(path): cannot be read") }
        let bytes = [UInt8](data)
        guard bytes.count >= 16, Array(bytes[0..<8]) == magic else { throw bad("not a Strata debug bundle (no STRATABN)", at: 0) }
        let version = UInt16(bytes[8]) | UInt16(bytes[9]) << 8
        guard readableVersions.contains(version) else {
            throw bad("bundle format version \(version); this reader knows versions \(readableVersions.lowerBound)–\(readableVersions.upperBound)", at: 8)
        }
        let length = Int(UInt32(bytes[12]) | UInt32(bytes[13]) << 8 | UInt32(bytes[14]) << 16 | UInt32(bytes[15]) << 24)
        guard length <= maxManifestBytes, 16 + length <= bytes.count else {
            throw bad("a manifest of \(length) bytes does not fit (at most \(maxManifestBytes), and the file has \(bytes.count))", at: 12)
        }
        let manifest: Manifest
        do {
            manifest = try JSONDecoder().decode(Manifest.self, from: Data(bytes[16..<(16 + length)]))
        } catch {
            throw bad("the manifest does not decode: \(error)", at: 16)
        }
        var offset = 16 + length
        // Case-folded: on a case-insensitive file system `store.json` and `STORE.json` are one file.
        var seen = Set<String>()
        let fm = FileManager.default
        do {
            // A new directory: nothing already there is mixed with the bundle's files.
            try fm.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            if version == 1 { try fm.createDirectory(atPath: directory + "/log", withIntermediateDirectories: false) }
            try fm.createDirectory(atPath: directory + "/adopted", withIntermediateDirectories: false)
        } catch {
            throw StoreError(.storeFailed, "cannot create \(directory): \(error)")
        }
        guard manifest.format == Int(version) else { throw bad("the manifest says format \(manifest.format), the header \(version)", at: 16) }
        if version >= 2, !manifest.files.contains(where: { $0.path == packedLogPath }) { throw bad("the manifest lists no \(packedLogPath)", at: 16) }
        for file in manifest.files {
            guard isBundledPath(file.path, format: version), seen.insert(file.path.lowercased()).inserted else { throw bad("the manifest names \(file.path.debugDescription), which is not a file of a store (or names it twice)", at: 16) }
            guard file.size <= UInt64(bytes.count - offset) else { throw bad("\(file.path) is cut short: \(file.size) bytes listed, \(bytes.count - offset) left", at: offset) }
            let content = Array(bytes[offset..<(offset + Int(file.size))])
            let crc = hex32(content.withUnsafeBytes { CRC32C.checksum($0) })
            guard crc == file.crc32c else { throw bad("\(file.path) fails its checksum (listed \(file.crc32c), computed \(crc))", at: offset) }
            if file.path == packedLogPath {
                try unpackLog(content, into: directory + "/log", bundle: path, at: offset)
            } else if !fm.createFile(atPath: directory + "/" + file.path, contents: Data(content)) {
                throw StoreError(.storeFailed, "cannot write \(directory)/\(file.path)")
            }
            offset += Int(file.size)
        }
        guard offset == bytes.count else { throw bad("\(bytes.count - offset) bytes follow the last file", at: offset) }
        return manifest
    }

    /// A top-level file of a store directory that belongs in a bundle — its identity, authors,
    /// pins, download masks and sync cursors (`sync-<zone>.json`, `sync-<zone>@<owner>.json`) —
    /// and nothing else an app may keep there. The writer and the reader use this one rule.
    static func isStoreFile(_ name: String) -> Bool {
        guard !name.hasPrefix("."), !name.contains("/"), !name.contains("\\"),
              !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return false }
        return ["store.json", "authors.json", "sync-pins.json", "download-masks.json"].contains(name)
            || (name.hasPrefix("sync-") && name.hasSuffix(".json") && name.count > 10)
    }

    /// Unpacks a format-2 bundle's packed log into the log directory `destination`.
    private static func unpackLog(_ bytes: [UInt8], into destination: String, bundle: String, at offset: Int) throws {
        do {
            var writer = try LogCopy.DirectoryWriter(destination: destination)
            try PackedLog.unpack(bytes, into: &writer)
        } catch let error as PackError {
            throw StoreError(.corruptBundle, "\(bundle): \(packedLogPath) (at byte \(offset) of the bundle): \(error.message)")
        } catch let error as LogError where error.code == .io {
            throw StoreError(.storeFailed, "cannot unpack \(bundle)'s \(packedLogPath) into \(destination): \(error)")
        } catch let error as LogError {
            throw StoreError(.corruptBundle, "\(bundle): \(packedLogPath) (at byte \(offset) of the bundle) does not unpack: \(error.message)")
        }
    }

    /// The paths a bundle of `format` may hold: the store files above, adopted states, and the
    /// log — packed (format 2), or its segments and snapshots (format 1). Nothing else — above
    /// all no `..` and no absolute path.
    static func isBundledPath(_ path: String, format: UInt16) -> Bool {
        if path == packedLogPath { return format >= 2 }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        func plain(_ name: Substring) -> Bool {
            !name.isEmpty && name != "." && name != ".." && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
        }
        switch parts.count {
        case 1: return isStoreFile(String(parts[0]))
        case 2:
            guard plain(parts[1]) else { return false }
            if parts[0] == "log" { return format == 1 && (parts[1].hasSuffix(".seg") || parts[1].hasSuffix(".snap")) }
            if parts[0] == "adopted" { return parts[1].hasSuffix(".state") }
            return false
        default: return false
        }
    }

    /// The adopted states a bundle holds, as the log's adoption records meet them (from the
    /// cores redacting the log: one at a time). Each state is bundled once; each record is
    /// rewritten from its own fields, so that two records of one state come out the same
    /// whichever core meets them first.
    private final class BundledStates: @unchecked Sendable {
        /// A state bundled: its hash, size and digest as bundled (the digest only when redacted:
        /// a plain record is kept as it is).
        private struct Bundled {
            var contentHash: String
            var size: UInt64
            var stateDigest: String
        }

        let store: String
        let staging: String
        let redaction: ValueRedaction?
        private let lock = NSLock()
        /// By the device's content hash; `nil`: missing on the device.
        private var states: [String: Bundled?] = [:]
        private var names: [String] = []

        init(store: String, staging: String, redaction: ValueRedaction?) {
            self.store = store
            self.staging = staging
            self.redaction = redaction
        }

        var files: [String] { lock.withLock { names } }

        /// The record as the bundle holds it, its state bundled (redacted when asked).
        func bundle(_ record: AdoptionRecord) throws -> AdoptionRecord {
            let state = try lock.withLock { try bundleState(record.contentHash) }
            // Plain: the record is kept as it is (its state is bundled as it is, or is missing).
            guard let redaction else { return record }
            // Missing on the device: the record is kept (redacted), its state cannot be.
            guard let state else { return redaction.redactUnbundled(record) }
            return redaction.redact(AdoptionRecord(contentHash: state.contentHash, size: state.size, stateDigest: state.stateDigest,
                                                   newestHLC: record.newestHLC, origin: record.origin))
        }

        private func bundleState(_ contentHash: String) throws -> Bundled? {
            if let done = states[contentHash] { return done }
            guard let data = FileManager.default.contents(atPath: store + "/adopted/" + contentHash + ".state") else {
                states[contentHash] = .some(nil)
                return nil
            }
            var stored = Array(data)
            var digest: String?
            if let redaction {
                let state = try redaction.redactState(stored)
                stored = state.payload
                digest = state.digest
            }
            let hash = Hex.encode(SHA256Hasher.hash(data: stored))
            let bundled = Bundled(contentHash: hash, size: UInt64(stored.count), stateDigest: digest ?? "")
            let name = "adopted/" + hash + ".state"
            try put(stored, staging + "/" + name)
            names.append(name)
            states[contentHash] = bundled
            return bundled
        }
    }

    private static func put(_ bytes: [UInt8], _ path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw StoreError(.storeFailed, "cannot write \(path)") }
    }

    private static func hex32(_ value: UInt32) -> String {
        let s = String(value, radix: 16)
        return String(repeating: "0", count: 8 - s.count) + s
    }
}
