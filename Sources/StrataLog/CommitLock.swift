import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The short cross-process lock of a log shared by several writer processes
/// (``LogSharing/processes``): held while a process reads the others' new records, appends its
/// own and, on open, recovers a torn tail; and while a snapshot is written or pruned. Never held
/// across an fsync, so processes overlap their syncs.
///
/// A POSIX record lock (`fcntl(F_SETLKW)`) on the `COMMIT` file: the kernel drops it when its
/// holder dies (a process killed mid-append leaves a torn record, which the next holder cuts
/// off). POSIX locks do not exclude threads of one process, and closing any descriptor of the
/// file would drop them, so one instance per log per process takes it, under a mutex.
final class CommitLock: Sendable {
    static let fileName = "COMMIT"
    private let descriptor: Int32
    private let path: String
    /// Serializes holders inside this process (the kernel's lock does not).
    private let inProcess = Mutex<Int>(0)

    init(directory: String) throws {
        let path = FileSystem.join(directory, CommitLock.fileName)
        self.path = path
        let descriptor = retryingEINTR { systemOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else { throw FileHandle.ioError("open commit lock file", path) }
        self.descriptor = descriptor
    }

    deinit { _ = systemClose(descriptor) }

    /// Runs `body` holding the lock against every other process and every other thread here.
    /// Blocks (the calling thread) while another process holds it: for the length of one append.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        try inProcess.withLock { _ in
            guard DirectoryLock.setLock(descriptor, F_WRLCK, wait: true) == 0 else {
                throw FileHandle.ioError("fcntl(F_SETLKW)", path)
            }
            defer { _ = DirectoryLock.setLock(descriptor, F_UNLCK, wait: false) }
            return try body()
        }
    }
}
