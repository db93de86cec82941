public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process for the tests, with the part of Foundation's `Process` they use (same names).
///
/// On Linux it starts children with `posix_spawn` directly: Foundation's `Process.run()` there
/// (Swift 6.3.1) reads past the end of a `dirent` while listing `/proc/self/fd`
/// (`findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation PR 5472) and crashes the whole
/// test process now and then — more often the more descriptors are open, as in a full test
/// round. Serializing the starts did not help; not calling it does. Elsewhere it is `Process`.
public final class SpawnedProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String]?
    /// `nil`: the test process's environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// Each a `FileHandle` (`FileHandle.nullDevice` included) or a `Pipe` (the child gets the
    /// pipe's far end, which this process closes once the child has started); `nil`: this
    /// process's own stream.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    #if os(Linux)
    private let lock = NSLock()
    private var pid: pid_t = 0
    private var status: Int32?
    #else
    private let process = Process()
    #endif

    public init() {}

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    #if os(Linux)
    public var processIdentifier: Int32 { lock.withLock { pid } }

    /// Starts the child.
    public func run() throws {
        guard let executableURL else { throw Failure(description: "no executable to run") }
        let path = executableURL.path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [standardInput, standardOutput, standardError].enumerated() {
            switch target {
            case nil:
                break
            case let handle as FileHandle where handle === FileHandle.nullDevice:
                posix_spawn_file_actions_addopen(&actions, Int32(stream), "/dev/null", stream == 0 ? O_RDONLY : O_WRONLY, 0)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, Int32(stream))
            case let pipe as Pipe:
                let end = stream == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, Int32(stream))
            default:
                throw Failure(description: "standard stream \(stream): neither a FileHandle nor a Pipe")
            }
        }
        // No descriptor of the test process but the three streams (its pipes and listening
        // sockets would otherwise stay open in the child).
        try Spawn.closeOthers(&actions)
        if let directory = currentDirectoryURL?.path { try Spawn.changeDirectory(&actions, directory) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + (arguments ?? [])).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var attributes = posix_spawnattr_t()
        Spawn.defaultSignals(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var child: pid_t = 0
        let result = envp.map { envp in envp.withUnsafeBufferPointer { posix_spawn(&child, path, &actions, &attributes, argv, UnsafeMutablePointer(mutating: $0.baseAddress)) } }
            ?? posix_spawn(&child, path, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Failure(description: "posix_spawn \(path): \(String(cString: strerror(result)))") }
        lock.withLock { pid = child }
        // The child holds the far ends of its pipes now: this process keeps only its own ends, so
        // that reading a pipe to its end ends when the child does.
        for (stream, target) in [standardInput, standardOutput, standardError].enumerated() {
            if let pipe = target as? Pipe { try? (stream == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close() }
        }
    }

    /// Whether the child still runs (it is reaped here once it has ended).
    public var isRunning: Bool {
        lock.withLock {
            guard pid != 0, status == nil else { return false }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid {
                status = Spawn.exitStatus(raw)
            } else if reaped == -1 && errno != EINTR {
                // Not a child to wait for any more (reaped elsewhere): it has ended, how is unknown.
                status = -1
            }
            return status == nil
        }
    }

    /// Waits until the child has ended.
    public func waitUntilExit() {
        while isRunning { usleep(1_000) }
    }

    /// Its exit status, or the signal that ended it (as Foundation's `terminationStatus` says).
    public var terminationStatus: Int32 { lock.withLock { status ?? 0 } }
    #else
    public var processIdentifier: Int32 { process.processIdentifier }

    public func run() throws {
        process.executableURL = executableURL
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectoryURL { process.currentDirectoryURL = currentDirectoryURL }
        if let standardInput { process.standardInput = standardInput }
        if let standardOutput { process.standardOutput = standardOutput }
        if let standardError { process.standardError = standardError }
        try process.run()
    }

    public var isRunning: Bool { process.isRunning }
    public func waitUntilExit() { process.waitUntilExit() }
    public var terminationStatus: Int32 { process.terminationStatus }
    #endif
}
