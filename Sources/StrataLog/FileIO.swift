import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A thin owner of a POSIX file descriptor: positional reads and writes that loop until done, a
/// durable sync, truncation. Every system call of the log goes through here, so EINTR handling and
/// the platform's notion of "durable" live in one place.
///
/// `@unchecked Sendable`: the descriptor number never changes after init and the calls used
/// (`pread`, `pwrite`, `fdatasync`, `fstat`) are safe to issue from several threads at once; `close`
/// is only called by the single owner when no other user remains.
final class FileHandle: @unchecked Sendable {
    let fd: Int32
    let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { _ = systemClose(fd) }

    static func open(_ path: String, write: Bool, create: Bool = false, exclusive: Bool = false, mode: mode_t = 0o644) throws -> FileHandle {
        var flags: Int32 = write ? O_RDWR : O_RDONLY
        if create { flags |= O_CREAT }
        if exclusive { flags |= O_EXCL }
        flags |= O_CLOEXEC
        let fd = retryingEINTR { systemOpen(path, flags, mode) }
        guard fd >= 0 else { throw ioError("open", path) }
        return FileHandle(fd: fd, path: path)
    }

    /// The file's current size in bytes.
    func size() throws -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileHandle.ioError("fstat", path) }
        return Int64(st.st_size)
    }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = retryingEINTR {
                pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
            }
            if n < 0 { throw FileHandle.ioError("pread", path, offset: offset + Int64(done)) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads exactly `count` bytes at `offset`, or fewer at end of file.
    func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try read(into: $0, at: offset) }
        if n < count { bytes.removeSubrange(n...) }
        return bytes
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        if let injected = FaultInjection.writeFailure(for: path) {
            errno = injected
            throw FileHandle.ioError("pwrite", path, offset: offset)
        }
        var done = 0
        while done < bytes.count {
            let n = retryingEINTR {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            }
            if n < 0 { throw FileHandle.ioError("pwrite", path, offset: offset + Int64(done)) }
            done += n
        }
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Makes the file's data (and the metadata needed to read it back, such as its size) durable.
    /// On Darwin `fsync` only reaches the drive's cache, so `F_FULLFSYNC` is used there.
    func sync() throws {
        if let injected = FaultInjection.syncFailure(for: path) {
            errno = injected
            throw FileHandle.ioError("fdatasync", path)
        }
        #if canImport(Darwin)
        let result = retryingEINTR { fcntl(fd, F_FULLFSYNC) }
        #else
        let result = retryingEINTR { fdatasync(fd) }
        #endif
        guard result == 0 else { throw FileHandle.ioError("fdatasync", path) }
    }

    func truncate(to size: Int64) throws {
        let result = retryingEINTR { ftruncate(fd, off_t(size)) }
        guard result == 0 else { throw FileHandle.ioError("ftruncate", path, offset: size) }
    }

    static func ioError(_ call: String, _ path: String, offset: Int64? = nil) -> LogError {
        let code = errno
        return LogError(.io, "\(call) failed: \(String(cString: strerror(code)))", file: path, offset: offset, errno: code)
    }
}

/// A directory's writer lock, so that two writers (processes, or two instances in one process)
/// never manage the same directory: the log takes it for its directory, and the server's embedded
/// storage for its data directory.
///
/// Across processes it is a POSIX record lock (`fcntl(F_SETLK)`) on the `LOCK` file, which the
/// kernel drops when the process dies, so a crash never leaves a stale lock. POSIX locks are not
/// inherited by child processes — unlike `flock`, whose lock a child forked at the wrong moment
/// would keep holding after we close our descriptor. Because POSIX locks do not conflict within one
/// process, a process-wide registry of locked directories covers that case.
public final class DirectoryLock: Sendable {
    static let fileName = "LOCK"
    private static let lockedInProcess = Mutex<Set<String>>([])
    private let fd: Mutex<Int32>
    private let key: String
    let path: String

    /// Whether this is a shared (read) lock: held by every process of a log opened for several
    /// writer processes (``LogSharing/processes``); an exclusive opener is refused while any
    /// process holds one, and they are refused while an exclusive opener holds its lock.
    let shared: Bool

    /// Takes the lock on `directory` (creating its `LOCK` file): exclusive, or `shared` with other
    /// processes that take it shared. A shared lock is retried for up to ten seconds, because a
    /// process that shares the log holds it exclusively for a moment while it retires segments
    /// (see ``whileAlone(_:)``).
    ///
    /// - Throws: ``LogError`` with ``LogError/Code/locked`` when it is held elsewhere.
    public init(directory: String, shared: Bool = false) throws {
        self.shared = shared
        let path = FileSystem.join(directory, DirectoryLock.fileName)
        self.path = path
        let key = FileSystem.canonicalPath(directory)
        self.key = key
        let inserted = DirectoryLock.lockedInProcess.withLock { $0.insert(key).inserted }
        guard inserted else {
            throw LogError(.locked, "the log is already open in this process", file: path)
        }
        let descriptor = retryingEINTR { systemOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else {
            DirectoryLock.lockedInProcess.withLock { _ = $0.remove(key) }
            throw FileHandle.ioError("open lock file", path)
        }
        var attempts = shared ? 1000 : 1
        while true {
            attempts -= 1
            if DirectoryLock.setLock(descriptor, shared ? F_RDLCK : F_WRLCK, wait: false) == 0 { break }
            let code = errno
            if attempts > 0 && (code == EACCES || code == EAGAIN) {
                usleep(10_000)
                continue
            }
            _ = systemClose(descriptor)
            DirectoryLock.lockedInProcess.withLock { _ = $0.remove(key) }
            if code == EACCES || code == EAGAIN {
                throw LogError(.locked, "the log is open in another process", file: path, errno: code)
            }
            errno = code
            throw FileHandle.ioError("fcntl(F_SETLK)", path)
        }
        fd = Mutex(descriptor)
    }

    /// A POSIX record lock of the whole file: `F_RDLCK`, `F_WRLCK` or `F_UNLCK`; 0 or -1 (errno).
    static func setLock(_ descriptor: Int32, _ type: Int32, wait: Bool) -> Int32 {
        var region = flock()
        region.l_type = Int16(type)
        region.l_whence = Int16(SEEK_SET)
        region.l_start = 0
        region.l_len = 0
        return retryingEINTR { fcntl(descriptor, wait ? F_SETLKW : F_SETLK, &region) }
    }

    /// Runs `body` when no other process holds the lock (a shared lock is turned exclusive for the
    /// call, then shared again); returns `nil` without running it when another process holds it.
    /// An exclusive lock runs `body` at once. What only one process may do to a shared log —
    /// deleting files another process might still be reading — happens here.
    public func whileAlone<T>(_ body: () throws -> T) rethrows -> T? {
        try fd.withLock { descriptor -> T? in
            guard descriptor >= 0 else { return nil }
            guard shared else { return try body() }
            guard DirectoryLock.setLock(descriptor, F_WRLCK, wait: false) == 0 else { return nil }
            // Shared again whatever `body` does: POSIX converts the lock in place, and nothing can
            // take it in between (we hold it exclusively).
            defer { _ = DirectoryLock.setLock(descriptor, F_RDLCK, wait: true) }
            return try body()
        }
    }

    /// Releases the lock; later calls do nothing.
    public func release() {
        let released = fd.withLock { descriptor -> Bool in
            guard descriptor >= 0 else { return false }
            _ = systemClose(descriptor)
            descriptor = -1
            return true
        }
        if released { DirectoryLock.lockedInProcess.withLock { _ = $0.remove(key) } }
    }

    deinit { release() }
}

/// Lets tests make writes or syncs of files under a directory fail, to check what the log (and the
/// server above it) does when the disk reports an error — a failed fsync, a full disk — which
/// cannot be provoked on demand on a healthy machine. Disarmed, it costs one atomic load per call.
enum FaultInjection {
    private struct Failure {
        var errno: Int32
        var writes: Bool
    }

    private static let armed = Atomic<Int>(0)
    private static let failing = Mutex<[String: Failure]>([:])

    /// Makes every sync of a file under `directory` fail with `errno`.
    static func failSyncs(under directory: String, errno: Int32) {
        set(directory, Failure(errno: errno, writes: false))
    }

    /// Makes every write and sync of a file under `directory` fail with `errno` (`ENOSPC`: the
    /// disk is full).
    static func failWrites(under directory: String, errno: Int32) {
        set(directory, Failure(errno: errno, writes: true))
    }

    static func clear(_ directory: String) {
        failing.withLock { table in
            _ = table.removeValue(forKey: directory)
            armed.store(table.count, ordering: .releasing)
        }
    }

    static func syncFailure(for path: String) -> Int32? {
        failure(for: path)?.errno
    }

    static func writeFailure(for path: String) -> Int32? {
        guard let failure = failure(for: path), failure.writes else { return nil }
        return failure.errno
    }

    private static func set(_ directory: String, _ failure: Failure) {
        failing.withLock { table in
            table[directory] = failure
            armed.store(table.count, ordering: .releasing)
        }
    }

    private static func failure(for path: String) -> Failure? {
        guard armed.load(ordering: .acquiring) > 0 else { return nil }
        return failing.withLock { table in
            table.first { path.hasPrefix($0.key + "/") }?.value
        }
    }
}

/// File-system operations on paths, with the fsyncs that make creation and renames durable: the
/// one durable-file layer of the package. The log's files, and the small files beside it — a
/// store's `store.json`, sync pins and authors, the sync cursor, the server's catalog, ledgers
/// and users file — are all written through here, with the same rules (`F_FULLFSYNC` where
/// `fsync` does not reach the disk).
package enum FileSystem {
    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// A file's size, or `nil` when it cannot be stat'ed.
    package static func size(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    package static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Creates `path` and any missing parents (each made durable in its parent).
    package static func makeDirectory(_ path: String) throws {
        if isDirectory(path) { return }
        let parent = parentPath(path)
        if parent != path, !parent.isEmpty { try makeDirectory(parent) }
        if mkdir(path, 0o755) != 0 && errno != EEXIST {
            throw FileHandle.ioError("mkdir", path)
        }
        if !parent.isEmpty { try syncDirectory(parent) }
    }

    /// The names in a directory (without "." and "..").
    package static func list(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw FileHandle.ioError("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Makes the directory's entries (created, renamed or removed files) durable.
    package static func syncDirectory(_ path: String) throws {
        let fd = retryingEINTR { systemOpen(path, O_RDONLY | O_CLOEXEC, 0) }
        guard fd >= 0 else { throw FileHandle.ioError("open directory", path) }
        defer { _ = systemClose(fd) }
        #if canImport(Darwin)
        let result = retryingEINTR { fcntl(fd, F_FULLFSYNC) }
        #else
        let result = retryingEINTR { fsync(fd) }
        #endif
        guard result == 0 else { throw FileHandle.ioError("fsync directory", path) }
    }

    static func rename(_ from: String, _ to: String) throws {
        guard systemRename(from, to) == 0 else { throw FileHandle.ioError("rename to \(to)", from) }
    }

    package static func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw FileHandle.ioError("unlink", path) }
    }

    /// Removes `path` and, when it is a directory, everything in it. A missing path is no error.
    package static func removeTree(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw FileHandle.ioError("lstat", path)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in try list(path) { try removeTree(join(path, name)) }
            guard rmdir(path) == 0 || errno == ENOENT else { throw FileHandle.ioError("rmdir", path) }
        } else {
            try remove(path)
        }
    }

    /// Writes `bytes` to `path` atomically: a temporary file, fsync, rename over `path`, fsync of the
    /// directory. A crash leaves either the old file or the new one, never a mixture. The file
    /// gets `mode` whatever the umask (a users file holds credentials' hashes: 0600).
    package static func writeAtomically(_ bytes: [UInt8], to path: String, durable: Bool = true, mode: Int = 0o644) throws {
        let temporary = path + ".tmp"
        try remove(temporary)
        do {
            let file = try FileHandle.open(temporary, write: true, create: true, exclusive: true, mode: mode_t(mode))
            try file.write(bytes, at: 0)
            guard fchmod(file.fd, mode_t(mode)) == 0 else { throw FileHandle.ioError("fchmod", temporary) }
            if durable { try file.sync() }
            try rename(temporary, path)
        } catch {
            // A write that failed (a full disk) leaves no temporary behind: nothing else may
            // ever write this path again to clear it.
            try? remove(temporary)
            throw error
        }
        if durable { try syncDirectory(parentPath(path)) }
    }

    /// The whole file; `nil` when it does not exist.
    package static func read(_ path: String) throws -> [UInt8]? {
        let file: FileHandle
        do {
            file = try FileHandle.open(path, write: false)
        } catch let error as LogError where error.errno == ENOENT {
            return nil
        }
        return try file.read(count: Int(try file.size()), at: 0)
    }

    /// The path with symbolic links and `..` resolved (the path itself when it cannot be).
    static func canonicalPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    package static func parentPath(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    static func baseName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    package static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

func retryingEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
    return Glibc.open(path, flags, mode)
    #elseif canImport(Musl)
    return Musl.open(path, flags, mode)
    #else
    return Darwin.open(path, flags, mode)
    #endif
}

func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

private func systemRename(_ from: String, _ to: String) -> Int32 {
    #if canImport(Glibc)
    return Glibc.rename(from, to)
    #elseif canImport(Musl)
    return Musl.rename(from, to)
    #else
    return Darwin.rename(from, to)
    #endif
}
