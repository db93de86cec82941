import StrataLog

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The storage's view of the package's one durable-file layer (StrataLog's `FileSystem`): the
/// same calls, with the storage's typed errors (a full disk is ``ZoneStorageError/Code/storageFull``).
enum DurableFile {
    /// Writes `bytes` to `path` atomically and durably: a temporary file beside it, `fsync`,
    /// `rename` over `path`, `fsync` of the directory. After a crash `path` holds either the old
    /// contents or the new ones, never a mixture. The file gets `mode` whatever the umask (the
    /// users file holds credentials' hashes: 0600).
    static func writeAtomically(_ bytes: [UInt8], to path: String, mode: Int = 0o644) throws(ZoneStorageError) {
        try typed { try FileSystem.writeAtomically(bytes, to: path, mode: mode) }
    }

    /// ``writeAtomically(_:to:mode:)`` through a temporary name of its own, for files several
    /// requests may write at once (an asset's manifest, a zone's link to it).
    static func writeAtomicallyUnique(_ bytes: [UInt8], to path: String) throws(ZoneStorageError) {
        try typed { try FileSystem.writeAtomicallyUnique(bytes, to: path) }
    }

    /// Reads a whole file; `nil` when it does not exist.
    static func read(_ path: String) throws(ZoneStorageError) -> [UInt8]? {
        try typed { try FileSystem.read(path) }
    }

    /// Makes the entries of a directory (created, renamed, removed files) durable.
    static func syncDirectory(_ path: String) throws(ZoneStorageError) {
        try typed { try FileSystem.syncDirectory(path) }
    }

    /// Creates `path` and its missing parents.
    static func makeDirectories(_ path: String) throws(ZoneStorageError) {
        try typed { try FileSystem.makeDirectory(path) }
    }

    /// The names in a directory (without `.` and `..`).
    static func list(_ path: String) throws(ZoneStorageError) -> [String] {
        try typed { try FileSystem.list(path) }
    }

    static func isDirectory(_ path: String) -> Bool { FileSystem.isDirectory(path) }

    /// Removes `path` and, when it is a directory, everything in it. A missing path is no error.
    static func removeTree(_ path: String) throws(ZoneStorageError) {
        try typed { try FileSystem.removeTree(path) }
    }

    static func join(_ directory: String, _ name: String) -> String { FileSystem.join(directory, name) }

    static func parent(of path: String) -> String { FileSystem.parentPath(path) }

    /// Whether `code` says the disk (or the user's file-system quota) is full.
    static func isDiskFull(_ code: Int32?) -> Bool {
        code == ENOSPC || code == EDQUOT
    }

    /// `body`, its errors as the storage's: a full disk `storageFull`, anything else `storageFailure`.
    private static func typed<T>(_ body: () throws -> T) throws(ZoneStorageError) -> T {
        do {
            return try body()
        } catch let error as LogError {
            throw ZoneStorageError(isDiskFull(error.errno) ? .storageFull : .storageFailure, error.description)
        } catch {
            throw ZoneStorageError(.storageFailure, "\(error)")
        }
    }
}

extension DirectoryLock {
    /// The data directory's lock (``DirectoryLock`` from StrataLog, the one every log takes),
    /// with the storage's error type.
    static func forDataDirectory(_ directory: String) throws(ZoneStorageError) -> DirectoryLock {
        do {
            return try DirectoryLock(directory: directory)
        } catch {
            throw ZoneStorageError(.storageFailure, "the data directory \(directory) cannot be locked: \(error)")
        }
    }
}
