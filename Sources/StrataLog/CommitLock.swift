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
/// own and, on open, recovers a torn tail; and while a snapshot is written or pruned. An
/// append's fsync comes after the lock is released, so processes overlap their syncs; it is held
/// across one only to seal a segment, to sync one another process sealed before following into
/// the next, to cut off a torn record, to write a snapshot, and during an open's recovery.
///
/// A POSIX record lock (`fcntl(F_SETLKW)`) on the `COMMIT` file: the kernel drops it when its
/// holder dies (a process killed mid-append leaves a torn record, which the next holder cuts
/// off). POSIX locks do not exclude threads of one process, and closing any descriptor of the
/// file would drop them, so one instance per log per process takes it, under a mutex.
final class CommitLock: Sendable {
    static let fileName = "COMMIT"
    private let path: String
    /// The descriptor (-1 once closed), under the mutex that also serializes holders inside this
    /// process (the kernel's lock does not).
    private let inProcess: Mutex<Int32>

    init(directory: String) throws {
        let path = FileSystem.join(directory, CommitLock.fileName)
        self.path = path
        let descriptor = retryingEINTR { systemOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else { throw FileHandle.ioError("open commit lock file", path) }
        inProcess = Mutex(descriptor)
    }

    /// Closes the descriptor when the log closes, not when this object happens to be freed: a
    /// close of any descriptor of the file drops every POSIX lock this process holds on it, so a
    /// late close of this one would drop the lock of the same log opened again since. Waits for
    /// a holder to finish.
    func close() {
        inProcess.withLock { descriptor in
            if descriptor >= 0 { _ = systemClose(descriptor) }
            descriptor = -1
        }
    }

    deinit { close() }

    /// Runs `body` holding the lock against every other process and every other thread here.
    /// Blocks (the calling thread) while another process holds it: for the length of one append.
    ///
    /// - Throws: ``LogError/Code/closed`` after ``close()``.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        try inProcess.withLock { descriptor in
            guard descriptor >= 0 else { throw LogError(.closed, "the log is closed", file: path) }
            guard DirectoryLock.setLock(descriptor, F_WRLCK, wait: true) == 0 else {
                throw FileHandle.ioError("fcntl(F_SETLKW)", path)
            }
            defer { _ = DirectoryLock.setLock(descriptor, F_UNLCK, wait: false) }
            return try body()
        }
    }
}
