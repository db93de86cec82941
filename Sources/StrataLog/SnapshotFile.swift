import Dispatch
import Synchronization

/// A snapshot as listed in the log directory.
public struct SnapshotInfo: Sendable, Hashable {
    public var name: String
    public var path: String
    /// The snapshot covers entries at positions below this one.
    public var position: LogPosition
}

/// A snapshot read back and verified.
public struct Snapshot: Sendable, Hashable {
    public var info: SnapshotInfo
    public var payload: [UInt8]
    public var created: LogTimestamp
    /// Bytes of the file on disk.
    public var storedSize: Int
}

/// Snapshot files are named by the position they cover: `snapshot-00000000000000001024.snap`.
enum SnapshotName {
    static let prefix = "snapshot-"
    static let suffix = ".snap"

    static func name(for position: LogPosition) -> String {
        let digits = String(position)
        return prefix + String(repeating: "0", count: 20 - digits.count) + digits + suffix
    }

    static func position(of name: String) -> LogPosition? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        let stem = name.dropFirst(prefix.count).dropLast(suffix.count)
        guard stem.count == 20, stem.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
        return LogPosition(stem)
    }
}

/// The snapshot file format (layout in the format article): a 64-byte header, then the payload in
/// chunks of at most 4 MiB, each LZ4-compressed or stored raw; one CRC-32C over everything after
/// the checksum field.
enum SnapshotFile {
    static let magic: [UInt8] = Array("STRATASN".utf8)
    static let version: UInt16 = 1
    static let headerSize = 64
    static let chunkSize = 4 << 20
    static let chunkHeaderSize = 12

    static func encode(_ payload: [UInt8], position: LogPosition, logID: LogID, created: LogTimestamp) -> [UInt8] {
        var w = ByteWriter(capacity: headerSize + payload.count / 2 + 64)
        let chunks = payload.isEmpty ? 0 : (payload.count + chunkSize - 1) / chunkSize
        w.raw(magic)
        w.u32(0)
        w.u16(version)
        w.u16(UInt16(headerSize))
        w.raw(logID.bytes)
        w.u64(position)
        w.u64(UInt64(payload.count))
        w.i64(created)
        w.u32(UInt32(chunks))
        w.u32(0)
        payload.withUnsafeBytes { raw in
            var start = 0
            while start < raw.count {
                let chunk = UnsafeRawBufferPointer(rebasing: raw[start..<min(raw.count, start + chunkSize)])
                let compressed = LZ4Codec.compress(chunk, limit: chunk.count - chunk.count / 16)
                w.u8(compressed == nil ? RecordCodec.raw.rawValue : RecordCodec.lz4.rawValue)
                w.u8(0); w.u8(0); w.u8(0)
                w.u32(UInt32(chunk.count))
                if let compressed {
                    w.u32(UInt32(compressed.count))
                    w.raw(compressed)
                } else {
                    w.u32(UInt32(chunk.count))
                    w.raw(chunk)
                }
                start += chunk.count
            }
        }
        let crc = w.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        w.setU32(crc, at: 8)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8], info: SnapshotInfo, logID: LogID) throws -> Snapshot {
        func bad(_ why: String, _ offset: Int) -> LogError {
            LogError(.badSnapshot, why, file: info.path, offset: Int64(offset))
        }
        return try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            guard raw.count >= headerSize else { throw bad("snapshot truncated: \(raw.count) bytes", 0) }
            guard let m = r.bytes(8), Array(m) == magic else { throw bad("not a Strata snapshot (bad magic)", 0) }
            guard let stored = r.u32() else { throw bad("truncated", 8) }
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[12...]))
            guard stored == computed else {
                throw bad("snapshot checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))", 8)
            }
            guard let v = r.u16(), v == version else { throw bad("unsupported snapshot version", 12) }
            guard r.u16() == UInt16(headerSize) else { throw bad("unexpected snapshot header size", 14) }
            guard let id = r.bytes(16), Array(id) == logID.bytes else { throw bad("snapshot belongs to another log", 16) }
            guard let position = r.u64(), position == info.position else {
                throw bad("snapshot header position disagrees with its file name", 32)
            }
            guard let length = r.u64(), let created = r.i64(), let chunks = r.u32(), r.u32() == 0 else {
                throw bad("truncated header", 40)
            }
            guard length <= UInt64(raw.count) * 256 else { throw bad("implausible payload length \(length)", 40) }
            var payload = [UInt8](repeating: 0, count: Int(length))
            var filled = 0
            for index in 0..<Int(chunks) {
                let at = r.offset
                guard let codecByte = r.u8(), let codec = RecordCodec(rawValue: codecByte),
                      r.u8() == 0, r.u8() == 0, r.u8() == 0,
                      let rawLength = r.u32(), let storedLength = r.u32(),
                      Int(rawLength) <= payload.count - filled,
                      let body = r.bytes(Int(storedLength))
                else { throw bad("chunk \(index) header invalid or truncated", at) }
                let ok = payload.withUnsafeMutableBytes { out -> Bool in
                    let target = UnsafeMutableRawBufferPointer(rebasing: out[filled..<filled + Int(rawLength)])
                    switch codec {
                    case .raw:
                        guard body.count == target.count else { return false }
                        target.copyMemory(from: body)
                        return true
                    case .lz4:
                        return LZ4Codec.decompress(body, into: target)
                    }
                }
                guard ok else { throw bad("chunk \(index) does not decode to \(rawLength) bytes", at) }
                filled += Int(rawLength)
            }
            guard filled == payload.count, r.remaining == 0 else {
                throw bad("chunks hold \(filled) of \(length) bytes, \(r.remaining) bytes trailing", r.offset)
            }
            return Snapshot(info: info, payload: payload, created: created, storedSize: raw.count)
        }
    }
}

extension SegmentLog {
    /// Writes a snapshot of opaque `payload` covering the entries below `position`, atomically
    /// (temporary file, fsync, rename, fsync of the directory). Blocks for the syncs.
    ///
    /// - Throws: ``LogError/Code/positionOutOfRange`` when `position` is past the visible end.
    @discardableResult
    public func writeSnapshot(_ payload: [UInt8], position: LogPosition) throws -> SnapshotInfo {
        // A durable snapshot must never cover records that a power loss could still take away
        // (with buffered appends they may not be synced yet).
        try writer.withLock { w in
            // Shared: other processes' records may not be synced yet.
            guard w.unsynced || isShared else { return }
            try w.file.sync()
            w.unsynced = false
        }
        // Shared: under the commit lock, so that another process's open does not take this
        // snapshot's temporary file for a crash's leftover.
        if let commitLock { return try commitLock.withLock { try writeSnapshotFile(payload, position: position) } }
        return try writeSnapshotFile(payload, position: position)
    }

    private func writeSnapshotFile(_ payload: [UInt8], position: LogPosition) throws -> SnapshotInfo {
        let end = endPosition
        guard position <= end else {
            throw LogError(.positionOutOfRange, "snapshot position \(position) is past the end of the log (\(end))", file: directory)
        }
        let name = SnapshotName.name(for: position)
        let info = SnapshotInfo(name: name, path: FileSystem.join(directory, name), position: position)
        let bytes = SnapshotFile.encode(payload, position: position, logID: logID, created: options.fileTimestamp)
        try FileSystem.writeAtomically(bytes, to: info.path)
        return info
    }

    /// The snapshot files present, newest (highest position) first. Not yet verified.
    public func snapshots() throws -> [SnapshotInfo] {
        try SnapshotReader(directory: directory, logID: logID).list()
    }

    /// Reads and verifies one snapshot.
    ///
    /// - Throws: ``LogError/Code/badSnapshot`` naming the file and offset when it is damaged.
    public func readSnapshot(_ info: SnapshotInfo) throws -> Snapshot {
        try SnapshotReader(directory: directory, logID: logID).read(info)
    }

    /// Reads and verifies one snapshot of a log that is not open (see ``verify(at:progress:record:)``,
    /// whose report lists the snapshots and the log's ID).
    ///
    /// - Throws: ``LogError/Code/badSnapshot`` naming the file and offset when it is damaged.
    public static func readSnapshot(_ info: SnapshotInfo, logID: LogID) throws -> Snapshot {
        try SnapshotReader(directory: FileSystem.parentPath(info.path), logID: logID).read(info)
    }

    /// The newest snapshot that verifies, and the errors of newer ones that did not (for the
    /// caller to log): a damaged snapshot falls back to an older one, never to wrong data.
    public func latestValidSnapshot() throws -> (snapshot: Snapshot?, skipped: [LogError]) {
        var skipped: [LogError] = []
        for info in try snapshots() {
            do {
                return (try readSnapshot(info), skipped)
            } catch let error as LogError {
                skipped.append(error)
            }
        }
        return (nil, skipped)
    }

    /// Deletes the segments whose entries all lie below `snapshot`'s position, after verifying
    /// the snapshot. The active segment is never retired. Oldest first, so a crash part way leaves
    /// a contiguous log. Returns the names of the retired segment files.
    @discardableResult
    public func retireSegments(coveredBy snapshot: SnapshotInfo) throws -> [String] {
        try retireSegments(coveredBy: snapshot, keepingFrom: .max)
    }

    /// Retires the segments wholly below both the snapshot's position and `keepingFrom`: the
    /// entries from `keepingFrom` on stay readable although the snapshot covers them (a store
    /// keeps the transactions its sync has not pushed yet).
    ///
    /// A log shared by several processes (``LogSharing/processes``) retires segments only while
    /// no other process has it open (another may not have read them yet); otherwise this
    /// returns `[]` and the segments wait for a compaction that finds the process alone.
    @discardableResult
    public func retireSegments(coveredBy snapshot: SnapshotInfo, keepingFrom keep: LogPosition) throws -> [String] {
        if isShared {
            return try lock.whileAlone { try retireSegmentFiles(coveredBy: snapshot, keepingFrom: keep) } ?? []
        }
        return try retireSegmentFiles(coveredBy: snapshot, keepingFrom: keep)
    }

    private func retireSegmentFiles(coveredBy snapshot: SnapshotInfo, keepingFrom keep: LogPosition) throws -> [String] {
        _ = try readSnapshot(snapshot)
        let limit = min(snapshot.position, keep)
        return try writer.withLock { _ in
            let retired = state.withLock { s -> [Segment] in
                var retired: [Segment] = []
                while s.segments.count > 1, s.segments[0].summary.endPosition <= limit {
                    retired.append(s.segments.removeFirst())
                }
                return retired
            }
            // One at a time, oldest first, each removal made durable before the next, so a crash
            // part way always leaves a contiguous log. (The index goes first: an index without
            // its segment would be an orphan; a segment without its index is merely re-indexed.)
            for segment in retired {
                try FileSystem.remove(FileSystem.join(directory, SegmentName.indexName(for: segment.summary.firstPosition)))
                try FileSystem.remove(segment.path)
                try FileSystem.syncDirectory(directory)
            }
            return retired.map(\.name)
        }
    }

    /// Deletes snapshot files older than the newest `keep` that verify (damaged ones are not
    /// counted, so the last good snapshot is never deleted because newer ones are bad).
    public func pruneSnapshots(keeping keep: Int = 2) throws {
        // Shared: under the commit lock, which another process's open holds while it reads one.
        if let commitLock { return try commitLock.withLock { try pruneSnapshotFiles(keeping: keep) } }
        try pruneSnapshotFiles(keeping: keep)
    }

    /// Runs `body` holding the commit lock of a log shared by several processes (at once for an
    /// exclusive log): for deleting files another process's open may be reading.
    public func withCommitLock<T: Sendable>(_ body: () throws -> T) throws -> T {
        if let commitLock { return try commitLock.withLock(body) }
        return try body()
    }

    /// Runs `body` when no other process has the log open (always for an exclusive log);
    /// `nil` without running it otherwise. For what must not happen under another process's
    /// feet: deleting files it may still need.
    public func whileAlone<T>(_ body: () throws -> T) rethrows -> T? {
        try lock.whileAlone(body)
    }

    private func pruneSnapshotFiles(keeping keep: Int) throws {
        var valid = 0
        for info in try snapshots() {
            if valid >= max(keep, 1) {
                try FileSystem.remove(info.path)
            } else if (try? readSnapshot(info)) != nil {
                valid += 1
            }
        }
        try FileSystem.syncDirectory(directory)
    }
}
