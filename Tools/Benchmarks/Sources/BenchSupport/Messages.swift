// Progress notes and fatal errors: both go to stderr, so that stdout keeps only the report.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Progress for the person watching; stdout keeps only the report.
public func note(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Says `message` on stderr and exits with `status`.
public func fail(_ message: String, status: Int32) -> Never {
    note(message)
    exit(status)
}

public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
