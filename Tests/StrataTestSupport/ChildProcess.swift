public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs the crash tests' child programs (built next to the test binary) and kills them.
public enum ChildProcess {
    /// The executable `name` built in the same directory as the running test binary.
    public static func executable(_ name: String) throws -> URL {
        // The test binary's own path, found without /proc (which macOS lacks): the running
        // bundle's executable, else argv[0]. SwiftPM puts products beside the test binary on
        // Linux, and beside the .xctest bundle (three levels up from its executable) on macOS.
        let bases = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])]
            .compactMap { $0?.resolvingSymlinksInPath().deletingLastPathComponent() }
        for base in bases {
            var directory = base
            for _ in 0..<4 {
                let url = directory.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "\(name) is not built next to the test binary (run `swift build --build-tests --traits Server`)"])
    }

    /// Starts `executable`, lets it run for `microseconds`, kills it with SIGKILL, and returns the
    /// complete lines it wrote (each written with one write(2), so none is torn).
    public static func runAndKill(_ executable: URL, arguments: [String], after microseconds: UInt32) throws -> [Substring] {
        #if os(Linux)
        let scratch = NSTemporaryDirectory() + "strata-child-\(UUID().uuidString)"
        FileManager.default.createFile(atPath: scratch, contents: nil)
        defer { unlink(scratch) }
        let pid = try Spawn.start(executable.path, arguments, stdin: "/dev/null", stdout: scratch, stderr: "/dev/null", directory: nil)
        usleep(microseconds)
        kill(pid, SIGKILL)
        _ = try Spawn.wait(pid)
        let output = String(decoding: FileManager.default.contents(atPath: scratch) ?? Data(), as: UTF8.self)
        #else
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(microseconds)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #endif
        return Array(output.split(separator: "\n", omittingEmptySubsequences: false).dropLast())
    }

    /// What a finished child process left.
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs `executable` to the end (with `input` on its standard input) and collects its exit
    /// status and output. Output goes through files, so a chatty child never blocks on a pipe.
    public static func run(_ executable: URL, _ arguments: [String], input: String? = nil, directory: String? = nil) throws -> Result {
        let scratch = NSTemporaryDirectory() + "strata-child-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        FileManager.default.createFile(atPath: scratch + "/out", contents: nil)
        FileManager.default.createFile(atPath: scratch + "/err", contents: nil)
        FileManager.default.createFile(atPath: scratch + "/in", contents: Data((input ?? "").utf8))
        #if os(Linux)
        let pid = try Spawn.start(executable.path, arguments, stdin: scratch + "/in", stdout: scratch + "/out", stderr: scratch + "/err", directory: directory)
        let status = try Spawn.wait(pid)
        #else
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardInput = FileHandle(forReadingAtPath: scratch + "/in")
        process.standardOutput = FileHandle(forWritingAtPath: scratch + "/out")
        process.standardError = FileHandle(forWritingAtPath: scratch + "/err")
        try process.run()
        process.waitUntilExit()
        let status = process.terminationStatus
        #endif
        let out = String(decoding: FileManager.default.contents(atPath: scratch + "/out") ?? Data(), as: UTF8.self)
        let err = String(decoding: FileManager.default.contents(atPath: scratch + "/err") ?? Data(), as: UTF8.self)
        return Result(status: status, stdout: out, stderr: err)
    }
}

#if os(Linux)
/// Starting a child with `posix_spawn` directly (see `SpawnedProcess` for why not `Process`). The child gets its
/// three standard streams from files and no other descriptor of the test process.
enum Spawn {
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    // glibc 2.34 and 2.29 have these, but its Swift module does not show them.
    nonisolated(unsafe) private static let closeFromFunction = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: AddCloseFrom.self) }
    nonisolated(unsafe) private static let chdirFunction = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: AddChdir.self) }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Starts `path` with `arguments`, its standard streams opened from these files.
    static func start(_ path: String, _ arguments: [String], stdin: String, stdout: String, stderr: String, directory: String?) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_APPEND, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_APPEND, 0)
        try closeOthers(&actions)
        if let directory { try changeDirectory(&actions, directory) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var attributes = posix_spawnattr_t()
        defaultSignals(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Failure(description: "posix_spawn \(path): \(String(cString: strerror(result)))") }
        return pid
    }

    /// No descriptor of the test process but the three streams goes to the child (its pipes and
    /// listening sockets would otherwise stay open in the child).
    static func closeOthers(_ actions: inout posix_spawn_file_actions_t) throws {
        guard let closeFromFunction, closeFromFunction(&actions, 3) == 0 else {
            throw Failure(description: "posix_spawn cannot close the other descriptors here (glibc before 2.34)")
        }
    }

    static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, _ directory: String) throws {
        guard let chdirFunction else { throw Failure(description: "posix_spawn cannot change the directory here") }
        _ = chdirFunction(&actions, directory)
    }

    /// Default signal handling and an empty mask in the child: the spawning thread (a
    /// concurrency pool thread) may block or ignore signals the child must get (SIGTERM).
    /// Initializes `attributes` (the caller destroys them).
    static func defaultSignals(_ attributes: inout posix_spawnattr_t) {
        posix_spawnattr_init(&attributes)
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    }

    /// A `waitpid` status as Foundation's `terminationStatus` says it: the exit status, or the
    /// signal that ended the child.
    static func exitStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// Waits for the child to end: its exit status, or the signal that ended it (as Foundation's
    /// `terminationStatus` says).
    static func wait(_ pid: pid_t) throws -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno == EINTR { continue }
            throw Failure(description: "waitpid \(pid): \(String(cString: strerror(errno)))")
        }
        return exitStatus(status)
    }
}
#endif
