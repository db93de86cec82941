import Foundation

/// Measurements taken in a fresh process: this executable run again with `arguments` (a mode the
/// harness's `main` dispatches on), which prints one JSON line of what it measured.
public enum ChildRun {
    /// Runs the child to the end and decodes the last line it printed.
    ///
    /// - Returns: what it printed, and the wall time of its whole life in seconds.
    public static func json<T: Decodable>(_ type: T.Type, arguments: [String]) throws -> (value: T, seconds: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Machine.executablePath)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        let start = monotonicNanos()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let elapsed = monotonicNanos() - start
        let command = arguments.joined(separator: " ")
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchError("the child `\(command)` failed (status \(process.terminationStatus))")
        }
        guard let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last,
              let value = try? JSONDecoder().decode(T.self, from: Data(line.utf8)) else {
            throw BenchError("the child `\(command)` printed no measurement: \(String(decoding: data, as: UTF8.self))")
        }
        return (value, Double(elapsed) / 1e9)
    }
}
