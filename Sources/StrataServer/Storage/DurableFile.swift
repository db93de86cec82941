import StrataLog

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few file-system calls the embedded storage makes itself (the logs make their own):
/// durable atomic replacement of a small file, directory creation and removal, and the data
/// directory's lock. Every call retries on `EINTR`.
enum DurableFile {
    /// Writes `bytes` to `path` atomically and durably: a temporary file beside it, `fsync`,
    /// `rename` over `path`, `fsync` of the directory. After a crash `path` holds either the old
    /// contents or the new ones, never a mixture. The file gets `mode` whatever the umask (the
    /// users file holds credentials' hashes: 0600).
    static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(ZoneStorageError) {
        let temporary = path + ".tmp"
        _ = unlink(temporary)
        let fd = retryingEINTR { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw failure("open", temporary) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                retryingEINTR { write(fd, raw.baseAddress! + written, raw.count - written) }
            }
            guard n > 0 else {
                let error = failure("write", temporary)
                _ = close(fd)
                throw error
            }
            written += n
        }
        guard fchmod(fd, mode) == 0, retryingEINTR({ fsync(fd) }) == 0 else {
            let error = failure("fsync", temporary)
            _ = close(fd)
            throw error
        }
        _ = close(fd)
        guard rename(temporary, path) == 0 else { throw failure("rename to \(path)", temporary) }
        try syncDirectory(parent(of: path))
    }

    /// Reads a whole file; `nil` when it does not exist.
    static func read(_ path: String) throws(ZoneStorageError) -> [UInt8]? {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw failure("open", path)
        }
        defer { _ = close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { raw in retryingEINTR { systemRead(fd, raw.baseAddress!, raw.count) } }
            if n < 0 { throw failure("read", path) }
            if n == 0 { return result }
            result.append(contentsOf: chunk[0..<n])
        }
    }

    /// Makes the entries of a directory (created, renamed, removed files) durable.
    static func syncDirectory(_ path: String) throws(ZoneStorageError) {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw failure("open directory", path) }
        defer { _ = close(fd) }
        guard retryingEINTR({ fsync(fd) }) == 0 else { throw failure("fsync directory", path) }
    }

    /// Creates `path` and its missing parents.
    static func makeDirectories(_ path: String) throws(ZoneStorageError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0 && errno != EEXIST { throw failure("mkdir", current) }
        }
    }

    /// The names in a directory (without `.` and `..`).
    static func list(_ path: String) throws(ZoneStorageError) -> [String] {
        guard let dir = opendir(path) else { throw failure("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Removes `path` and, when it is a directory, everything in it. A missing path is no error.
    static func removeTree(_ path: String) throws(ZoneStorageError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw failure("lstat", path)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in try list(path) { try removeTree(join(path, name)) }
            guard rmdir(path) == 0 || errno == ENOENT else { throw failure("rmdir", path) }
        } else {
            guard unlink(path) == 0 || errno == ENOENT else { throw failure("unlink", path) }
        }
    }

    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    static func failure(_ call: String, _ path: String) -> ZoneStorageError {
        let code = errno
        return ZoneStorageError(isDiskFull(code) ? .storageFull : .storageFailure,
                                "\(call) failed for \(path): \(String(cString: strerror(code))) (errno \(code))")
    }

    /// Whether `code` says the disk (or the user's file-system quota) is full.
    static func isDiskFull(_ code: Int32?) -> Bool {
        code == ENOSPC || code == EDQUOT
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

private func retryingEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.read(fd, buffer, count)
    #else
    return Darwin.read(fd, buffer, count)
    #endif
}
