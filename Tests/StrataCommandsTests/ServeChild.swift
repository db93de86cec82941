import Foundation
import StrataTestSupport

/// A running `strata serve` child process (the real executable) and the URL it listens on, for
/// the tests of what only a real process shows: signals, resident memory, the users file reloaded
/// on SIGHUP.
final class ServeChild: @unchecked Sendable {
    let process: SpawnedProcess
    let url: URL
    let stdoutPath: String
    let stderrPath: String

    /// Starts `strata serve --data DATA --port 0 --users USERS ARGUMENTS…` and waits (at most
    /// 60 s, for a loaded machine) for its `listening on` line; fails loudly, with its stderr,
    /// when it does not come.
    convenience init(data: String, users: String, scratch: String, arguments: [String] = [], openFilesLimit: Int? = nil) throws {
        try self.init(storage: ["--data", data], users: users, scratch: scratch, arguments: arguments, openFilesLimit: openFilesLimit)
    }

    /// Starts `strata serve STORAGE… --port 0 --users USERS ARGUMENTS…` (`STORAGE`: `--data DIR`
    /// or `--postgres URL`), as ``init(data:users:scratch:arguments:)``.
    /// `openFilesLimit`: the child's soft and hard `RLIMIT_NOFILE` (set through `prlimit`).
    init(storage: [String], users: String, scratch: String, arguments: [String] = [], openFilesLimit: Int? = nil) throws {
        stdoutPath = scratch + "/serve-\(UUID().uuidString).out"
        stderrPath = scratch + "/serve-\(UUID().uuidString).err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process = SpawnedProcess()
        let strata = try ChildProcess.executable("strata")
        let serve = ["serve"] + storage + ["--port", "0", "--users", users] + arguments
        if let openFilesLimit {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            process.arguments = ["--nofile=\(openFilesLimit):\(openFilesLimit)", "--", strata.path] + serve
        } else {
            process.executableURL = strata
            process.arguments = serve
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        var found: URL?
        while found == nil && Date() < deadline && process.isRunning {
            let text = String(decoding: FileManager.default.contents(atPath: stdoutPath) ?? Data(), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                found = URL(string: String(line.dropFirst("listening on ".count)))
            } else {
                usleep(20_000)
            }
        }
        guard let found else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let stderr = String(decoding: FileManager.default.contents(atPath: stderrPath) ?? Data(), as: UTF8.self)
            throw ServeChildError("strata serve did not start within 60 s (status \(process.terminationStatus)): \(stderr)")
        }
        url = found
    }

    var stderr: String { String(decoding: FileManager.default.contents(atPath: stderrPath) ?? Data(), as: UTF8.self) }

    /// Everything the server wrote (its stdout, then its stderr).
    var log: String {
        String(decoding: (FileManager.default.contents(atPath: stdoutPath) ?? Data()) + (FileManager.default.contents(atPath: stderrPath) ?? Data()), as: UTF8.self)
    }

    /// Sends `signal` and waits for the exit (at most `limit`, then SIGKILL): the exit status
    /// and how long it took, or `nil` when it had to be killed.
    func stop(_ signal: Int32 = SIGTERM, limit: TimeInterval = 60) async -> (status: Int32, seconds: TimeInterval)? {
        let started = Date()
        kill(process.processIdentifier, signal)
        while process.isRunning && Date().timeIntervalSince(started) < limit {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let seconds = Date().timeIntervalSince(started)
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return (process.terminationStatus, seconds)
    }

    /// A field of the child's `/proc/PID/status` in bytes (`VmHWM`: peak resident memory,
    /// `VmRSS`: resident now).
    func memory(_ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
            throw ServeChildError("no \(field) in /proc/\(process.processIdentifier)/status")
        }
        return kilobytes * 1024
    }

    /// Kills the process if it still runs (a failed test never leaves a server behind).
    func kill9() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct ServeChildError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
