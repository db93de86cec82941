public import Foundation

/// Runs the crash tests' child programs (built next to the test binary) and kills them.
public enum ChildProcess {
    /// The executable `name` built in the same directory as the running test binary.
    public static func executable(_ name: String) throws -> URL {
        let here = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        for directory in [here, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()] {
            let url = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "\(name) is not built next to the test binary (run `swift build --build-tests`)"])
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
        try process.run()
        usleep(microseconds)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Array(output.split(separator: "\n", omittingEmptySubsequences: false).dropLast())
    }
}
