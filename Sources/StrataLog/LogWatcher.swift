import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls a function whenever a log directory's files change — a record appended, a segment or
/// snapshot created — without polling: inotify on Linux, kqueue (a dispatch vnode source) on
/// Apple platforms. How each process sharing a log (``LogSharing/processes``) learns, within a
/// millisecond or so, that another one appended.
///
/// Notifications are hints, coalesced: one call may stand for many changes, and changes this
/// process made itself notify it too. The callee reads what is new (``SegmentLog/withTurn(appending:_:)``).
public final class LogWatcher: Sendable {
    private let stopper: @Sendable () -> Void

    /// Starts watching `directory`; `onChange` runs on the watcher's own queue, one call at a
    /// time.
    ///
    /// - Throws: ``LogError/Code/io`` when the system refuses a watch (say, too many inotify
    ///   watches).
    public init(directory: String, onChange: @escaping @Sendable () -> Void) throws {
        #if canImport(Glibc) || canImport(Musl)
        stopper = try LogWatcher.inotify(directory: directory, onChange: onChange)
        #elseif canImport(Darwin)
        stopper = try LogWatcher.vnodeSources(directory: directory, onChange: onChange)
        #endif
    }

    /// Stops watching; `onChange` is not called after this returns... except by a call already
    /// running. Later calls do nothing.
    public func stop() { stopper() }

    deinit { stopper() }

    #if canImport(Glibc) || canImport(Musl)
    /// One inotify watch on the directory (its files' writes, creations and renames), read by a
    /// blocking `poll` on a queue of its own, woken by a pipe to stop.
    private static func inotify(directory: String, onChange: @escaping @Sendable () -> Void) throws -> @Sendable () -> Void {
        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard watch >= 0 else { throw FileHandle.ioError("inotify_init1", directory) }
        let mask = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE)
        guard inotify_add_watch(watch, directory, mask) >= 0 else {
            let error = FileHandle.ioError("inotify_add_watch", directory)
            _ = close(watch)
            throw error
        }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            let error = FileHandle.ioError("pipe2", directory)
            _ = close(watch)
            throw error
        }
        let (wake, woken) = (ends[1], ends[0])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let stopped = Atomic<Bool>(false)
        DispatchQueue(label: "strata.log.watcher").async {
            defer {
                _ = close(watch)
                _ = close(woken)
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            var fds = [pollfd(fd: watch, events: Int16(POLLIN), revents: 0), pollfd(fd: woken, events: Int16(POLLIN), revents: 0)]
            while !stopped.load(ordering: .acquiring) {
                fds[0].revents = 0
                fds[1].revents = 0
                let ready = poll(&fds, 2, -1)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 || fds[1].revents != 0 { return }
                // Drain every queued event: one call for all of them.
                var any = false
                while buffer.withUnsafeMutableBytes({ read(watch, $0.baseAddress, $0.count) }) > 0 { any = true }
                if any && !stopped.load(ordering: .acquiring) { onChange() }
            }
        }
        return {
            guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
            var byte: UInt8 = 1
            _ = write(wake, &byte, 1)
            _ = close(wake)
        }
    }
    #elseif canImport(Darwin)
    /// A vnode source on the directory (segments and snapshots created or renamed) and one on the
    /// newest segment (records appended), moved to the next segment when one appears.
    private static func vnodeSources(directory: String, onChange: @escaping @Sendable () -> Void) throws -> @Sendable () -> Void {
        let queue = DispatchQueue(label: "strata.log.watcher")
        let directoryFD = open(directory, O_EVTONLY)
        guard directoryFD >= 0 else { throw FileHandle.ioError("open (O_EVTONLY)", directory) }
        let sources = VnodeSources()
        @Sendable func watchNewestSegment() {
            let names = (try? FileSystem.list(directory)) ?? []
            guard let newest = names.compactMap(SegmentName.position(of:)).max() else { return }
            let fd = open(FileSystem.join(directory, SegmentName.name(for: newest)), O_EVTONLY)
            guard fd >= 0 else { return }
            let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: fd, eventMask: [.write, .extend], queue: queue)
            source.setEventHandler { onChange() }
            source.setCancelHandler { _ = close(fd) }
            source.resume()
            sources.keep(segment: source)
        }
        let directorySource = DispatchSource.makeFileSystemObjectSource(fileDescriptor: directoryFD, eventMask: [.write], queue: queue)
        directorySource.setEventHandler {
            watchNewestSegment()
            onChange()
        }
        directorySource.setCancelHandler { _ = close(directoryFD) }
        directorySource.resume()
        sources.keep(directory: directorySource)
        queue.async { watchNewestSegment() }
        return { sources.stop() }
    }
    #endif
}

#if canImport(Darwin)
/// The Apple watcher's dispatch sources (`@unchecked Sendable`: every access is under `lock`,
/// whose value says whether the watcher stopped; a source may be cancelled from any thread). A
/// source made after the stop (a segment's, from an event already queued) is cancelled at once.
private final class VnodeSources: @unchecked Sendable {
    private let lock = Mutex(false)
    private var directory: (any DispatchSourceFileSystemObject)?
    private var segment: (any DispatchSourceFileSystemObject)?

    func keep(directory source: any DispatchSourceFileSystemObject) {
        lock.withLock { stopped in
            if stopped { source.cancel() } else { directory = source }
        }
    }

    func keep(segment source: any DispatchSourceFileSystemObject) {
        lock.withLock { stopped in
            if stopped {
                source.cancel()
                return
            }
            segment?.cancel()
            segment = source
        }
    }

    func stop() {
        lock.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            directory?.cancel()
            segment?.cancel()
        }
    }
}
#endif
