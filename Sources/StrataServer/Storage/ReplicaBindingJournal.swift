import Foundation
import StrataCore
import StrataLog

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The server-wide replica bindings' journal, `replica-owners.journal` beside
/// `replica-owners.json`: the bindings made since that file was last written, one per line,
/// appended and `fsync`ed before the push that made it is acknowledged.
///
/// Why a journal: the first push of every new device binds its replica. Rewriting the whole
/// bindings file for each would cost a new device time in the number of devices the server has
/// seen — at 10,000 devices, every new one rewrote and synced a megabyte, and a fleet's first
/// day (or a benchmark's) stalled on it. A binding now costs one appended line; the file is
/// folded into `replica-owners.json` (written atomically, then the journal removed) once it holds
/// as many bindings as that file, which keeps the work per binding constant, and when the
/// storage closes, so that a server stopped cleanly leaves the one file older servers read.
///
/// A server older than the journal ignores it: downgrade only after a clean stop (which folds
/// it), or the bindings since the last fold are lost to the older server.
///
/// Each line is `{"replica":"<uuid>","user":"<name>"}` and a newline. A last line without its
/// newline (a crash during the append, whose push was never acknowledged) is dropped on open and
/// cut off the file; any other line that does not parse is damage, refused with its byte offset.
struct ReplicaBindingJournal {
    static let name = "replica-owners.journal"

    let path: String
    /// Bindings the journal holds (what a fold would take in).
    private(set) var count = 0
    /// Whether the journal's directory entry is known durable (synced once it was created, or
    /// found on open). A failed sync leaves it false, so the next append syncs again.
    private var directorySynced = false

    init(path: String) {
        self.path = path
    }

    private struct Line: Codable {
        var replica: ReplicaID
        var user: String
    }

    /// Reads the journal in `directory` (none: empty), cutting off a torn last line.
    static func load(in directory: String) throws(ZoneStorageError) -> (journal: ReplicaBindingJournal, bindings: [(ReplicaID, String)]) {
        var journal = ReplicaBindingJournal(path: DurableFile.join(directory, name))
        guard let bytes = try DurableFile.read(journal.path) else { return (journal, []) }
        var bindings: [(ReplicaID, String)] = []
        var start = 0
        while let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
            guard let line = try? JSONDecoder().decode(Line.self, from: Data(bytes[start..<end])) else {
                throw ZoneStorageError(.storageFailure, "\(journal.path) is damaged at byte \(start): not a replica binding")
            }
            bindings.append((line.replica, line.user))
            start = end + 1
        }
        if start < bytes.count {
            // Torn: the append never finished, so its push was never acknowledged.
            guard truncate(journal.path, off_t(start)) == 0 else {
                throw ZoneStorageError(DurableFile.isDiskFull(errno) ? .storageFull : .storageFailure,
                                       "cannot cut the torn last line off \(journal.path) at byte \(start) (errno \(errno))")
            }
        }
        journal.count = bindings.count
        journal.directorySynced = true
        return (journal, bindings)
    }

    /// Appends a binding and makes it durable (the file's first line also syncs its directory).
    mutating func append(_ replica: ReplicaID, _ user: String) throws(ZoneStorageError) {
        guard let encoded = try? JSONEncoder().encode(Line(replica: replica, user: user)) else {
            throw ZoneStorageError(.storageFailure, "cannot encode the binding of replica \(replica)")
        }
        let bytes = Array(encoded) + [UInt8(ascii: "\n")]
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Self.failure("open", path) }
        defer { close(fd) }
        // Where this line starts: a write or sync that fails cuts the file back here, so that a
        // fragment never ends up before later lines (where it would read as damage, not a tear).
        let start = lseek(fd, 0, SEEK_END)
        guard start >= 0 else { throw Self.failure("lseek", path) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                let failure = Self.failure("write", path)
                _ = ftruncate(fd, start)
                throw failure
            }
            offset += written
        }
        guard fsync(fd) == 0 else {
            let failure = Self.failure("fsync", path)
            _ = ftruncate(fd, start)
            throw failure
        }
        if !directorySynced {
            try DurableFile.syncDirectory(DurableFile.parent(of: path))
            directorySynced = true
        }
        count += 1
    }

    /// Removes the journal once its bindings are in `replica-owners.json`.
    mutating func clear() throws(ZoneStorageError) {
        guard FileSystem.exists(path) else {
            count = 0
            return
        }
        guard unlink(path) == 0 || errno == ENOENT else { throw Self.failure("unlink", path) }
        count = 0
        directorySynced = false
        try DurableFile.syncDirectory(DurableFile.parent(of: path))
    }

    private static func failure(_ call: String, _ path: String) -> ZoneStorageError {
        let code = errno
        return ZoneStorageError(DurableFile.isDiskFull(code) ? .storageFull : .storageFailure,
                                "\(call) \(path) failed: \(String(cString: strerror(code))) (errno \(code))")
    }
}
