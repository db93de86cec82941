/// An error that stops a command: what went wrong and where, and the exit code it ends with
/// (2: usage or I/O — a finding such as corruption or divergence is not an error but exit 1).
public struct CLIError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var exitCode: Int32

    public init(_ message: String, exitCode: Int32 = 2) {
        self.message = message
        self.exitCode = exitCode
    }

    public var description: String { message }
}

/// Exit codes of every command (DESIGN.md's CLI contract).
public enum ExitStatus {
    public static let success: Int32 = 0
    /// Verify found corruption, diff found divergence.
    public static let finding: Int32 = 1
    /// Bad arguments, a missing or unreadable file.
    public static let usageOrIO: Int32 = 2
}
