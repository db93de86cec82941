public import Foundation

/// Serializes starting child processes across the test process: Foundation's `Process.run()`
/// on Linux crashed (a bad pointer in its memmove) when several tests started children at once
/// from different threads. Only the start is serialized; the children run side by side.
private let launchLock = NSLock()

extension Process {
    /// `run()`, one start at a time in the test process (see `launchLock`).
    public func runSerialized() throws {
        launchLock.lock()
        defer { launchLock.unlock() }
        try run()
    }
}

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
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.runSerialized()
        usleep(microseconds)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
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
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardInput = FileHandle(forReadingAtPath: scratch + "/in")
        process.standardOutput = FileHandle(forWritingAtPath: scratch + "/out")
        process.standardError = FileHandle(forWritingAtPath: scratch + "/err")
        try process.runSerialized()
        process.waitUntilExit()
        let out = String(decoding: FileManager.default.contents(atPath: scratch + "/out") ?? Data(), as: UTF8.self)
        let err = String(decoding: FileManager.default.contents(atPath: scratch + "/err") ?? Data(), as: UTF8.self)
        return Result(status: process.terminationStatus, stdout: out, stderr: err)
    }
}
